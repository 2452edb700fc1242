package benchreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeReport is a report with a table of one line; it measured something
// when it has a name.
type fakeReport struct {
	Name    string    `json:"name"`
	Figures []float64 `json:"figures,omitempty"`
}

func (r fakeReport) WriteTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, "table of %s\n", r.Name)
	return err
}

func (r fakeReport) Measured() bool { return r.Name != "" }

// failingWriter fails every write, as stdout closed under a pipe does.
type failingWriter struct{}

var errStdout = errors.New("stdout closed")

func (failingWriter) Write([]byte) (int, error) { return 0, errStdout }

func TestFinish(t *testing.T) {
	errRun := errors.New("round 2 failed")
	rep := fakeReport{Name: "join", Figures: []float64{31.4, 6.05}}
	for _, tc := range []struct {
		name       string
		rep        fakeReport
		asJSON     bool
		file       string // under the test's folder; "" for none
		stdout     io.Writer
		runErr     error
		wantStdout string // "json": rep as indented JSON
		wantFile   bool
		wantErrs   []error // each must be in Finish's error
		wantErrMsg string  // and its message must hold this
	}{
		{name: "table only", rep: rep, wantStdout: "table of join\n"},
		{name: "json only", rep: rep, asJSON: true, wantStdout: "json"},
		{name: "table and file", rep: rep, file: "edgebench/20261209-101500/report.json", wantStdout: "table of join\n", wantFile: true},
		{name: "json and file", rep: rep, asJSON: true, file: "report.json", wantStdout: "json", wantFile: true},
		{name: "run error kept", rep: rep, file: "a/report.json", runErr: errRun, wantStdout: "table of join\n", wantFile: true, wantErrs: []error{errRun}},
		{name: "nothing measured", rep: fakeReport{}, file: "a/report.json", runErr: errRun, wantErrs: []error{errRun}},
		{name: "stdout fails, file written", rep: rep, file: "a/report.json", stdout: failingWriter{}, wantFile: true, wantErrs: []error{errStdout}},
		{name: "folder is a file", rep: rep, file: "plain/report.json", runErr: errRun, wantStdout: "table of join\n",
			wantErrs: []error{errRun}, wantErrMsg: "write report JSON"},
		{name: "not encodable", rep: fakeReport{Name: "join", Figures: []float64{math.Inf(1)}}, file: "a/report.json", wantStdout: "table of join\n",
			wantErrMsg: "encode report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			out := Output{JSON: tc.asJSON}
			if tc.file != "" {
				out.JSONFile = filepath.Join(dir, tc.file)
			}
			var stdout bytes.Buffer
			w := tc.stdout
			if w == nil {
				w = &stdout
			}
			err := Finish(w, tc.rep, out, tc.runErr)

			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Finish(%+v) = %v, want it to hold %v", out, err, want)
				}
			}
			switch {
			case tc.wantErrMsg != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErrMsg) {
					t.Errorf("Finish(%+v) = %v, want an error containing %q", out, err, tc.wantErrMsg)
				}
			case len(tc.wantErrs) == 0 && err != nil:
				t.Errorf("Finish(%+v) = %v, want nil", out, err)
			}

			want := tc.wantStdout
			if want == "json" {
				want = indented(t, tc.rep)
			}
			if got := stdout.String(); got != want {
				t.Errorf("Finish(%+v) wrote %q to stdout, want %q", out, got, want)
			}

			if tc.file == "" {
				return
			}
			raw, readErr := os.ReadFile(out.JSONFile)
			if !tc.wantFile {
				if readErr == nil {
					t.Errorf("Finish(%+v) wrote %s, want no file", out, out.JSONFile)
				}
				return
			}
			if readErr != nil {
				t.Fatalf("Finish(%+v) wrote no file: %v", out, readErr)
			}
			if got, want := string(raw), indented(t, tc.rep); got != want {
				t.Errorf("%s = %q, want %q", out.JSONFile, got, want)
			}
			var back fakeReport
			if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, tc.rep) {
				t.Errorf("%s decodes to %+v, %v; want %+v", out.JSONFile, back, err, tc.rep)
			}
		})
	}
}

func TestFinishReplacesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(`{"name": "an older, longer report than this one"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := fakeReport{Name: "poll"}
	if err := Finish(io.Discard, rep, Output{JSONFile: path}, nil); err != nil {
		t.Fatalf("Finish = %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(raw), indented(t, rep); got != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// indented is rep as Finish writes it as JSON.
func indented(t *testing.T, rep fakeReport) string {
	t.Helper()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}
