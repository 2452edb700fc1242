// Package benchcmd is what the bench commands share around their run
// function: main's signal handling and exit status, the flags that point a
// benchmark at this machine's Redis and Postgres, and the report written to
// stdout as a table or as JSON, and to a JSON file.
package benchcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/flashgate/flashgate/internal/envflag"
)

// Main runs run with a context that ends on SIGINT or SIGTERM, and exits 1
// with "name: error" on stderr when it fails.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Defaults of the services a benchmark uses: the Redis and Postgres make
// run starts, and the database make bench-reserve and make bench-edge create.
const (
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/flashgate_bench?sslmode=disable"
)

// ServiceFlags adds -redis-url and -postgres-url to fs, set from
// FLASHGATE_BENCH_REDIS_URL and FLASHGATE_BENCH_POSTGRES_URL (or their
// _FILE variants) else DefaultRedisURL and DefaultPostgresURL. Parse the
// command line with the returned Set: the URLs may hold passwords, so they
// are bound as secrets and never printed.
func ServiceFlags(fs *flag.FlagSet, redisURL, postgresURL *string) *envflag.Set {
	env := envflag.New(fs)
	*redisURL, *postgresURL = DefaultRedisURL, DefaultPostgresURL
	env.Secret(redisURL, "redis-url", "FLASHGATE_BENCH_REDIS_URL",
		"Redis on this machine; only keys under a random prefix are touched")
	env.Secret(postgresURL, "postgres-url", "FLASHGATE_BENCH_POSTGRES_URL",
		"Postgres database on this machine; the run works in schemas of its own")
	return env
}

// Logger is the log of the code a benchmark runs (the edge node, the
// origin): its warnings and errors, as text on stderr.
func Logger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
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

// OutputFlags adds -json and -report-json to fs; env, ServiceFlags' Set,
// sets -report-json from FLASHGATE_BENCH_REPORT_JSON.
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
		errs = append(errs, writeJSON(w, rep, out))
	}
	return errors.Join(errs...)
}

// writeJSON writes rep as indented JSON to w when out.JSON, and to
// out.JSONFile when named.
func writeJSON(w io.Writer, rep Report, out Output) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	var errs []error
	if out.JSON {
		_, err := w.Write(b)
		errs = append(errs, err)
	}
	if out.JSONFile != "" {
		errs = append(errs, writeFile(out.JSONFile, b))
	}
	return errors.Join(errs...)
}

// writeFile writes b to path, creating path's folder if missing.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report JSON: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write report JSON: %w", err)
	}
	return nil
}
