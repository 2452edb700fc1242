package envflag_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
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
		l int64
		f float64
		b bool
	}
	defaults := got{s: "def", d: time.Second, n: 7, l: 1 << 40, f: 1.5, b: true}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    got
		wantErr string
	}{
		{name: "defaults", want: defaults},
		{name: "empty variables are unset", env: map[string]string{"S": "", "D": "", "B": ""}, want: defaults},
		{name: "variables", env: map[string]string{"S": "x", "D": "3s", "N": "-2", "L": "-3", "F": "0.25", "B": "0"},
			want: got{s: "x", d: 3 * time.Second, n: -2, l: -3, f: 0.25, b: false}},
		{name: "flags win", env: map[string]string{"S": "x", "B": "0"}, args: []string{"-s", "y", "-b"},
			want: got{s: "y", d: time.Second, n: 7, l: 1 << 40, f: 1.5, b: true}},
		{name: "a bad variable is refused under its flag", env: map[string]string{"D": "soon"}, args: []string{"-d", "1s"},
			wantErr: `config: $D="soon" is not a duration`},
		{name: "bad duration", env: map[string]string{"D": "3"}, wantErr: `config: $D="3" is not a duration`},
		{name: "bad int", env: map[string]string{"N": "3.0"}, wantErr: `config: $N="3.0" is not a whole number`},
		{name: "bad int64", env: map[string]string{"L": "1e3"}, wantErr: `config: $L="1e3" is not a whole number`},
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
			env.Int64(&g.l, "l", "L", "")
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

// A secret comes from its variable, from the file $NAME_FILE names, or
// from a fallback variable (either way), and Source says which variable
// it was; both a variable and its file is an error naming them.
func TestSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	withNewline := file("nl", "from-file\n")
	withCRLF := file("crlf", "from-crlf\r\n")
	empty := file("empty", "\n")
	big := file("big", strings.Repeat("x", 64<<10+1))
	for _, tc := range []struct {
		name       string
		env        map[string]string
		args       []string
		want       string
		wantSource string
		wantErr    string
	}{
		{name: "unset", want: "def"},
		{name: "variable", env: map[string]string{"S": "v"}, want: "v", wantSource: "S"},
		{name: "file, newline dropped", env: map[string]string{"S_FILE": withNewline}, want: "from-file", wantSource: "S"},
		{name: "file, CRLF dropped", env: map[string]string{"S_FILE": withCRLF}, want: "from-crlf", wantSource: "S"},
		{name: "variable and file", env: map[string]string{"S": "v", "S_FILE": withNewline}, wantErr: "set $S or $S_FILE, not both"},
		{name: "missing file", env: map[string]string{"S_FILE": filepath.Join(dir, "nope")}, wantErr: "$S_FILE: open " + filepath.Join(dir, "nope")},
		{name: "empty file", env: map[string]string{"S_FILE": empty}, wantErr: "$S_FILE: " + empty + " is empty"},
		{name: "huge file", env: map[string]string{"S_FILE": big}, wantErr: "not a secret"},
		{name: "fallback", env: map[string]string{"OLD": "o"}, want: "o", wantSource: "OLD"},
		{name: "fallback file", env: map[string]string{"OLD_FILE": withNewline}, want: "from-file", wantSource: "OLD"},
		{name: "fallback and its file", env: map[string]string{"OLD": "o", "OLD_FILE": withNewline}, wantErr: "set $OLD or $OLD_FILE, not both"},
		{name: "the first variable wins", env: map[string]string{"S": "v", "OLD": "o"}, want: "v", wantSource: "S"},
		{name: "the flag wins", env: map[string]string{"S": "v"}, args: []string{"-s", "f"}, want: "f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			got := "def"
			env := envflag.New(fs)
			env.Secret(&got, "s", "S", "", "OLD")
			err := env.Parse(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Parse = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || env.Source("s") != tc.wantSource {
				t.Errorf("Parse = %v, %q from %q; want nil, %q from %q", err, got, env.Source("s"), tc.want, tc.wantSource)
			}
		})
	}
}

// Neither -h nor a mistyped flag prints a secret given by a variable or a
// file (nor any variable's value), and a secret's variable names the file
// variable in the usage.
func TestSecretsAreNotPrinted(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("file-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"A": "env-secret-value", "B_FILE": path, "C": "plain-env-value"}[k]
	}
	for _, args := range [][]string{{"-h"}, {"-nope"}, {"-a"}} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var out strings.Builder
		fs.SetOutput(&out)
		var a, b, c string
		env := envflag.New(fs)
		env.Secret(&a, "a", "A", "a secret")
		env.Secret(&b, "b", "B", "another")
		env.String(&c, "c", "C", "not secret")
		err := env.Parse(args, getenv)
		if err == nil {
			t.Errorf("Parse(%q) = nil, want an error", args)
		}
		for _, secret := range []string{"env-secret-value", "file-secret-value", "plain-env-value"} {
			if strings.Contains(out.String(), secret) || strings.Contains(err.Error(), secret) {
				t.Errorf("Parse(%q) printed %q:\n%s\n%v", args, secret, out.String(), err)
			}
		}
		if args[0] == "-h" && !strings.Contains(out.String(), "($A or $A_FILE)") {
			t.Errorf("-h output lacks ($A or $A_FILE):\n%s", out.String())
		}
	}
}
