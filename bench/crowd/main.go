// Command crowd plays a whole flash sale against a running flashgate stack,
// through the edge, the way real shoppers do, and the same crowd against
// the naive baseline, and writes a report (JSON, Markdown, PNG charts).
// `make bench` starts the stack and runs it; see docs/BENCHMARKS.md.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("crowd", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}
