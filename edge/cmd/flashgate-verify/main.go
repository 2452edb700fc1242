// Command flashgate-verify checks a sale's admission log, as the edge
// publishes it after the sale at GET /v1/sales/{sale_id}/admission-log,
// and prints a verdict in plain English: whether the pre-queue was drawn
// by the seed committed to before the start, whether the admission cursor
// reached the places in order, and, for a shopper, whether their entry is
// in the log as their page showed it (docs/FAIRNESS.md, "Checking a sale
// afterwards").
//
//	flashgate-verify -log URL-or-file [-seed-sha256 HEX] [-pre-queue N] [-starts-at TIME]
//	    [-account NAME [-pre-index I] [-place P]]
//
// It exits 0 when the log verifies, 1 when it does not (an -account
// without an entry, or with another index or place, included), and 2 when
// it cannot run: bad flags, or a log it cannot fetch or read.
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
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := exitCode(err)
	if code == exitUnable {
		fmt.Fprintln(os.Stderr, "flashgate-verify:", err)
	}
	os.Exit(code)
}
