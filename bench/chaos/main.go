// Command chaos plays a sale through the real binaries and breaks things
// while it runs — processes killed, Postgres stopped, Redis emptied,
// slowed or failed over, the payment gateway frozen, webhooks lost — then
// checks what the stack promised and writes the table to
// docs/RELIABILITY.md. `make chaos` runs it; `go run ./bench/chaos -h`
// lists the flags.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("chaos", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}
