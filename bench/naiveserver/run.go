package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/flashgate/flashgate/bench/internal/naive"
	"github.com/flashgate/flashgate/internal/envflag"
	"github.com/flashgate/flashgate/internal/testenv"
)

// DefaultAddr is where the server listens unless told otherwise.
const DefaultAddr = "127.0.0.1:9400"

type options struct {
	naive.Options
	PostgresURL string
	Stock       int // units on sale at the start (the crowd resets it per run)
}

func loadOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	o := options{Options: naive.Options{Addr: DefaultAddr, PoolSize: 64, Budget: 10 * time.Second}}
	fs := flag.NewFlagSet("naiveserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := envflag.New(fs)
	env.String(&o.Addr, "listen", "FLASHGATE_NAIVE_ADDR", "host:port to listen on, loopback only")
	env.Secret(&o.PostgresURL, "postgres-url", "FLASHGATE_POSTGRES_URL", "Postgres on this machine; the baseline's tables live in schema -schema")
	env.Int(&o.PoolSize, "pool", "FLASHGATE_NAIVE_POOL_SIZE", "Postgres connections")
	env.Duration(&o.Budget, "budget", "FLASHGATE_NAIVE_BUDGET", "one buy's database budget; a buy over it answers 503")
	fs.StringVar(&o.Schema, "schema", "naive_baseline", "schema of the baseline's tables (dropped and made afresh at the start, dropped at the end)")
	fs.IntVar(&o.Stock, "stock", 0, "units on sale at the start")
	if err := env.Parse(args, getenv); err != nil {
		return options{}, err
	}
	switch {
	case fs.NArg() > 0:
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.PostgresURL == "":
		return options{}, errors.New("the Postgres URL is required (FLASHGATE_POSTGRES_URL)")
	case o.PoolSize < 1 || o.Budget <= 0 || o.Stock < 0:
		return options{}, errors.New("-pool and -budget must be positive, -stock not negative")
	}
	if err := testenv.LoopbackOnly(o.PostgresURL); err != nil {
		return options{}, err
	}
	return o, o.Validate()
}

// run serves until ctx ends, then stops accepting, lets the buys in flight
// finish (10 s at most) and drops its schema.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := loadOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	srv, err := naive.Start(startCtx, o.PostgresURL, o.Stock, o.Options)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "naiveserver: serving on %s (%d Postgres connections, %v per buy, %d units on sale)\n", srv.URL, o.PoolSize, o.Budget, o.Stock)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	fmt.Fprintln(stderr, "naiveserver: stopped")
	return nil
}
