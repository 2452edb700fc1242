// Package benchcmd is what the bench commands share around their run
// function: main's signal handling and exit status, the flags that point a
// benchmark at this machine's Redis and Postgres, and their code's log.
// Package benchreport writes their reports.
package benchcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
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
