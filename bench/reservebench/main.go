// Command reservebench measures the origin's reserve path: reserves per
// second through checkout.Reserver beside redis-benchmark running the same
// script, through the origin's HTTP handler beside a bare fasthttp handler,
// what durability costs, and the origin against two simple designs (a
// Redis-Lua seckill, a Postgres-serializable one). See docs/BENCHMARKS.md.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("reservebench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}
