package envflag_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/envflag"
)

func TestParse(t *testing.T) {
	t.Parallel()
	type got struct {
		s string
		d time.Duration
		n int
		f float64
		b bool
	}
	defaults := got{s: "def", d: time.Second, n: 7, f: 1.5, b: true}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    got
		wantErr string
	}{
		{name: "defaults", want: defaults},
		{name: "empty variables are unset", env: map[string]string{"S": "", "D": "", "B": ""}, want: defaults},
		{name: "variables", env: map[string]string{"S": "x", "D": "3s", "N": "-2", "F": "0.25", "B": "0"},
			want: got{s: "x", d: 3 * time.Second, n: -2, f: 0.25, b: false}},
		{name: "flags win", env: map[string]string{"S": "x", "B": "0"}, args: []string{"-s", "y", "-b"},
			want: got{s: "y", d: time.Second, n: 7, f: 1.5, b: true}},
		{name: "bad duration", env: map[string]string{"D": "3"}, wantErr: `config: $D="3" is not a duration`},
		{name: "bad int", env: map[string]string{"N": "3.0"}, wantErr: `config: $N="3.0" is not a whole number`},
		{name: "bad float", env: map[string]string{"F": "1,5"}, wantErr: `config: $F="1,5" is not a number`},
		{name: "bool yes", env: map[string]string{"B": "yes"}, wantErr: `config: $B="yes" is not 1, 0, true or false`},
		{name: "bool t", env: map[string]string{"B": "t"}, wantErr: `config: $B="t" is not 1, 0, true or false`},
		{name: "bool flag FALSE", args: []string{"-b=FALSE"}, wantErr: `invalid boolean value "FALSE" for -b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			g := defaults
			env := envflag.New(fs)
			env.String(&g.s, "s", "S", "")
			env.Duration(&g.d, "d", "D", "")
			env.Int(&g.n, "n", "N", "")
			env.Float64(&g.f, "f", "F", "")
			env.Bool(&g.b, "b", "B", "")
			err := env.Parse(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Parse = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || g != tc.want {
				t.Errorf("Parse = %v, %+v; want nil, %+v", err, g, tc.want)
			}
		})
	}
}
