package benchcmd

import (
	"flag"
	"fmt"
	"io"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
)

func TestOutputFlags(t *testing.T) {
	const env = "FLASHGATE_BENCH_REPORT_JSON"
	for _, tc := range []struct {
		args   []string
		getenv map[string]string
		want   benchreport.Output
	}{
		{args: nil, want: benchreport.Output{}},
		{args: []string{"-json"}, want: benchreport.Output{JSON: true}},
		{args: []string{"-report-json", "r.json"}, want: benchreport.Output{JSONFile: "r.json"}},
		{getenv: map[string]string{env: "env.json"}, want: benchreport.Output{JSONFile: "env.json"}},
		{args: []string{"-json", "-report-json", "flag.json"}, getenv: map[string]string{env: "env.json"}, want: benchreport.Output{JSON: true, JSONFile: "flag.json"}},
	} {
		t.Run(fmt.Sprint(tc.args, tc.getenv), func(t *testing.T) {
			fs := flag.NewFlagSet("bench", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var redisURL, postgresURL string
			set := ServiceFlags(fs, &redisURL, &postgresURL)
			var out benchreport.Output
			benchreport.OutputFlags(fs, set, &out)
			if err := set.Parse(tc.args, func(k string) string { return tc.getenv[k] }); err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if out != tc.want {
				t.Errorf("Parse(%q) with %v = %+v, want %+v", tc.args, tc.getenv, out, tc.want)
			}
		})
	}
}
