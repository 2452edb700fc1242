package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/faults"
)

// errFailed: the run went through and some scenario failed.
var errFailed = errors.New("some scenarios failed")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := faults.Options{Load: faults.DefaultLoad()}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names, providers, out string
	var list, verbose bool
	fs.StringVar(&names, "scenarios", "", "comma-separated scenarios to play (default: all; -list names them)")
	fs.StringVar(&providers, "providers", "", "comma-separated payment providers the payment scenarios play with (default: "+
		strings.Join(faults.Providers(), ", ")+", one per personality of the sandbox gateway; the other scenarios play with "+
		faults.DefaultProvider+")")
	fs.BoolVar(&o.Short, "short", false, "only the short scenarios (those make test plays)")
	fs.StringVar(&out, "out", "docs/RELIABILITY.md", "where the Markdown report goes (empty: nowhere)")
	fs.BoolVar(&list, "list", false, "list the scenarios and exit")
	fs.StringVar(&o.BinDir, "bin", "", "folder with origin, edge and sandboxgateway already built (default: build them)")
	fs.StringVar(&o.WorkDir, "dir", "", "folder for the servers' data and logs (default: a temporary one, removed)")
	fs.StringVar(&o.PostgresBin, "postgres-bin", faults.DefaultPostgresBin, "folder with initdb and postgres")
	fs.BoolVar(&verbose, "v", false, "print the binaries' last log lines for a failed scenario")
	fs.IntVar(&o.Load.Shoppers, "shoppers", o.Load.Shoppers, "shoppers per scenario")
	fs.IntVar(&o.Load.Stock, "stock", o.Load.Stock, "units per scenario")
	seed := fs.Uint64("seed", o.Load.Seed, "seed of the crowd")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.Load.Seed = *seed
	if list {
		for _, sc := range faults.Scenarios() {
			short := ""
			if sc.Short {
				short = " (short)"
			}
			fmt.Fprintf(stdout, "%-32s %s%s\n", sc.Label(), sc.What, short)
		}
		return nil
	}
	if names != "" {
		o.Scenarios = strings.Split(names, ",")
	}
	if providers != "" {
		o.Providers = strings.Split(providers, ",")
	}
	o.Keep = o.WorkDir != ""
	o.Log = func(format string, a ...any) { fmt.Fprintf(stderr, "chaos: "+format+"\n", a...) }
	results, err := faults.Run(ctx, o)
	if err != nil && len(results) == 0 {
		return err
	}
	fmt.Fprint(stdout, faults.Summary(results))
	if verbose {
		for _, r := range results {
			if !r.Pass() && r.Logs != "" {
				fmt.Fprintf(stdout, "\n== %s: the binaries' last lines\n%s", r.Scenario, r.Logs)
			}
		}
	}
	if out != "" {
		if werr := writeReport(out, faults.Report{Command: command(args), When: time.Now(), Machine: benchreport.MachineLine(), Load: o.Load, Results: results}); werr != nil {
			return werr
		}
		benchreport.PrintPath(stdout, out)
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if !r.Pass() {
			return errFailed
		}
	}
	return nil
}

// writeReport writes rep's Markdown to path, creating its folder.
func writeReport(path string, rep faults.Report) error {
	return benchreport.WriteFile(path, func(w io.Writer) error { return faults.WriteMarkdown(w, rep) })
}

// command is how this run was started, for the report.
func command(args []string) string {
	if len(args) == 0 {
		return "make chaos"
	}
	return "make chaos CHAOS_FLAGS='" + strings.Join(args, " ") + "'"
}
