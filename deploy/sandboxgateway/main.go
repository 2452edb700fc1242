// Command sandboxgateway is a sandbox stand-in for an external payment
// gateway, for `make run`, tests and the crowd simulator: the origin
// creates payments on it, shoppers pay or fail them on its hosted page, and
// it reports back by signed, retried webhooks — in its own protocol, or in
// a real provider's (-personality stripe or razorpay). Run it with -h for its flags;
// package gateway documents the APIs.
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
		fmt.Fprintln(os.Stderr, "sandboxgateway:", err)
		os.Exit(1)
	}
}
