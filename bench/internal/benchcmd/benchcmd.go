// Package benchcmd is what the bench commands share around their run
// function: main's signal handling and exit status, the flags that point a
// benchmark at this machine's Redis and Postgres, and the report written as a
// table or as JSON.
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
	"syscall"
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

// ServiceFlags adds -redis-url and -postgres-url to fs, their defaults taken
// from FLASHGATE_BENCH_REDIS_URL and FLASHGATE_BENCH_POSTGRES_URL through
// getenv, else DefaultRedisURL and DefaultPostgresURL.
func ServiceFlags(fs *flag.FlagSet, getenv func(string) string, redisURL, postgresURL *string) {
	def := func(name, fallback string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(redisURL, "redis-url", def("FLASHGATE_BENCH_REDIS_URL", DefaultRedisURL),
		"Redis on this machine ($FLASHGATE_BENCH_REDIS_URL); only keys under a random prefix are touched")
	fs.StringVar(postgresURL, "postgres-url", def("FLASHGATE_BENCH_POSTGRES_URL", DefaultPostgresURL),
		"Postgres database on this machine ($FLASHGATE_BENCH_POSTGRES_URL); the run works in schemas of its own")
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

// Finish writes rep to w when it measured anything, as indented JSON when
// asJSON and else as its table, and returns runErr, the run's own error,
// with the writing's.
func Finish(w io.Writer, rep Report, asJSON bool, runErr error) error {
	if !rep.Measured() {
		return runErr
	}
	if !asJSON {
		return errors.Join(runErr, rep.WriteTable(w))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return errors.Join(runErr, enc.Encode(rep))
}
