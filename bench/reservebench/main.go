// Command reservebench measures the origin's reserve path: reserves per
// second through checkout.Reserver beside redis-benchmark running the same
// script, and through the origin's HTTP handler beside a bare fasthttp
// handler. See docs/BENCHMARKS.md.
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
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reservebench:", err)
		os.Exit(1)
	}
}
