// Command crowd plays a whole flash sale against a running flashgate stack,
// through the edge, the way real shoppers do, and the same crowd against
// the naive baseline, and writes a report (JSON, Markdown, PNG charts).
// `make bench` starts the stack and runs it; see docs/BENCHMARKS.md.
//
// With -sweep it runs the capacity sweep instead (`make bench-capacity`):
// at each burst arrival rate a fresh sale through the stack and the naive
// baseline's sale reset, and per design the highest rate that keeps the
// promise (p99 time to an honest answer ≤ 2 s, 0 5xx, 0 oversold), written
// as capacity.md, capacity.json and capacity.png.
//
// With -autotune-compare it runs the autotune comparison instead (`make
// bench-autotune`): the capacity with admission unthrottled, then the same
// sale with the origin's admission controller on (-autotune-min,
// -autotune-max), at a fixed rate too high and at one too low, each a
// fresh sale, written as autotune.md, autotune.json and autotune.png.
package main

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

// loadGeneratorGCPercent is the simulator's GOGC unless the environment
// sets one: its core's seconds spent collecting garbage (and shrinking the
// stacks of 100,000 shoppers' goroutines, which then grow again) are
// seconds its shoppers wait to read their replies, which the report would
// count against the system. Memory is plentiful beside it.
const loadGeneratorGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(loadGeneratorGCPercent)
	}
	benchcmd.Main("crowd", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}
