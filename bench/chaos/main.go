// Command chaos plays a sale through the real binaries and breaks things
// while it runs — processes killed, Postgres stopped, Redis emptied,
// slowed or failed over, the payment gateway frozen, webhooks lost — then
// checks what the stack promised and writes the table to
// docs/RELIABILITY.md. `make chaos` runs it; `go run ./bench/chaos -h`
// lists the flags.
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
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}
