// Command naiveserver serves the naive baseline (bench/internal/naive) as a
// process of its own, so that a benchmark can pin it to the stack's CPUs as
// it pins flashgate's: make bench and make bench-capacity start it on
// FLASHGATE_STACK_CPUS (deploy/local/crowd.sh) and the crowd resets its sale
// before each run through its admin routes.
//
//	naiveserver -listen 127.0.0.1:9400 -postgres-url postgres://postgres@127.0.0.1:5432/flashgate -pool 64
//
// It listens on loopback only: the admin routes (POST /naive/admin/reset,
// GET /naive/admin/state) take no token.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("naiveserver", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stderr) })
}
