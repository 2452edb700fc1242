// Command edgebench measures the edge node's request paths (status poll,
// join, sold-out reserve, static page, proxied reserve), each beside a bare
// fasthttp handler in the same run, and its memory with long lines: the
// node's heap and Redis bytes per queued shopper. See docs/BENCHMARKS.md.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("edgebench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}
