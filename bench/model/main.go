// Command model computes the fleet each seed's peak needs from the measured
// cost of each request kind (bench/internal/capmodel) and writes it into
// docs/CAPACITY.md between its markers. It first takes the newest
// benchmark reports under .data/ into docs/capacity-inputs.json, keeping
// the recorded figures where a report is missing or older; -check only
// compares the document with what the inputs file gives. See
// docs/CAPACITY.md.
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("model", func(context.Context) error { return run(os.Args[1:], os.Stdout, os.Stderr) })
}
