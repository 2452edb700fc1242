// Command edgebench measures the edge node's request paths (status poll,
// join, sold-out reserve, static page, proxied reserve), each beside a bare
// fasthttp handler in the same run, and its memory with long lines: the
// node's heap and Redis bytes per queued shopper. See docs/BENCHMARKS.md.
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
		fmt.Fprintln(os.Stderr, "edgebench:", err)
		os.Exit(1)
	}
}
