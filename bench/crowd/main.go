// Command crowd plays a whole flash sale against a running flashgate stack,
// through the edge, the way real shoppers do, and the same crowd against
// the naive baseline, and writes a report (JSON, Markdown, PNG charts).
// `make bench` starts the stack and runs it; see docs/BENCHMARKS.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "crowd:", err)
		os.Exit(1)
	}
}
