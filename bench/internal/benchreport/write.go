package benchreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/flashgate/flashgate/internal/envflag"
)

// WriteJSON writes v as indented JSON, HTML characters unescaped, ending
// with a newline: the form of every bench report's JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteFile writes the file path with write, creating its folder if
// missing; a file already there is replaced.
func WriteFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFiles writes each file into dir (created if missing) with its
// writer, by name.
func WriteFiles(dir string, files map[string]func(io.Writer) error) error {
	for name, write := range files {
		if err := WriteFile(filepath.Join(dir, name), write); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// PrintPath tells the user where a report went: "report: path".
func PrintPath(w io.Writer, path string) {
	fmt.Fprintf(w, "report: %s\n", path)
}

// Report is a benchmark's report.
type Report interface {
	// WriteTable writes the report for people.
	WriteTable(w io.Writer) error
	// Measured reports whether the report holds any figure: a run that
	// failed part-way still says what it measured.
	Measured() bool
}

// Output is where a benchmark's report goes: to stdout as its table or as
// JSON, and to a JSON file when one is named.
type Output struct {
	// JSON writes the report to stdout as indented JSON instead of as its
	// table.
	JSON bool
	// JSONFile, when not empty, is a file that also gets the report as
	// indented JSON, whatever JSON says; its folder is created if missing
	// and a file already there is replaced.
	JSONFile string
}

// OutputFlags adds -json and -report-json to fs; env (benchcmd's
// ServiceFlags' Set) sets -report-json from FLASHGATE_BENCH_REPORT_JSON.
func OutputFlags(fs *flag.FlagSet, env *envflag.Set, out *Output) {
	fs.BoolVar(&out.JSON, "json", out.JSON, "write the report to stdout as JSON instead of as a table")
	env.String(&out.JSONFile, "report-json", "FLASHGATE_BENCH_REPORT_JSON",
		"also write the report as indented JSON to this `file`, creating its folder")
}

// Finish writes rep where out says when it measured anything (a report of
// nothing is written nowhere), and returns runErr, the run's own error,
// joined with the writing's. A failure to write to w does not keep the
// file from being written.
func Finish(w io.Writer, rep Report, out Output, runErr error) error {
	if !rep.Measured() {
		return runErr
	}
	errs := []error{runErr}
	if !out.JSON {
		errs = append(errs, rep.WriteTable(w))
	}
	if out.JSON || out.JSONFile != "" {
		errs = append(errs, finishJSON(w, rep, out))
	}
	return errors.Join(errs...)
}

// finishJSON writes rep as JSON to w when out.JSON, and to out.JSONFile
// when named.
func finishJSON(w io.Writer, rep Report, out Output) error {
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	var errs []error
	if out.JSON {
		_, err := w.Write(b.Bytes())
		errs = append(errs, err)
	}
	if out.JSONFile != "" {
		err := WriteFile(out.JSONFile, func(f io.Writer) error { _, err := f.Write(b.Bytes()); return err })
		if err != nil {
			errs = append(errs, fmt.Errorf("write report JSON: %w", err))
		}
	}
	return errors.Join(errs...)
}
