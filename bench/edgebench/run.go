package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/edgeperf"
)

// run reads flags (defaults from getenv), runs the benchmark and writes its
// report to stdout (a table, or JSON with -json) and, with -report-json, to
// a JSON file.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, out, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	c.Log = benchcmd.Logger(stderr)
	rep, err := edgeperf.Run(ctx, c)
	return benchreport.Finish(stdout, rep, out, err)
}

func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (c edgeperf.Config, out benchreport.Output, err error) {
	c = edgeperf.Config{
		Requests:      30_000,
		ProxyRequests: 10_000,
		Conns:         64,
		Warmup:        2_000,
		Rounds:        3,
		PollLine:      20_000,
		PollAdmitted:  0.2,
		MemPolls:      100_000,
		FillWorkers:   2_048,
		Limits:        edgeperf.LimitsProduction,
		Timeout:       3 * time.Minute,
	}
	fs := flag.NewFlagSet("edgebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := benchcmd.ServiceFlags(fs, &c.RedisURL, &c.PostgresURL)
	parts := fs.String("run", strings.Join(edgeperf.AllPaths, ","), "which parts to run: "+strings.Join(edgeperf.AllPaths, ", "))
	fs.IntVar(&c.Requests, "n", c.Requests, "timed requests per server per round (every path but the proxied reserve)")
	fs.IntVar(&c.ProxyRequests, "proxy-n", c.ProxyRequests, "timed requests per server per round for the proxied reserve and the origin alone")
	fs.IntVar(&c.Conns, "c", c.Conns, "load-generator connections per server")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "untimed requests before each timed run")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "measure each path this many times, alternating with the bare handler; ratios are medians")
	fs.IntVar(&c.PollLine, "poll-line", c.PollLine, "status poll: shoppers in line, each polling with its own queue token")
	fs.Float64Var(&c.PollAdmitted, "poll-admitted", c.PollAdmitted, "status poll: fraction of the line the admission cursor has passed (those polls are answered with an admission token)")
	sizes := fs.String("mem-sizes", "10000,1000000", "memory: line lengths to measure, ascending")
	fs.IntVar(&c.MemPolls, "mem-polls", c.MemPolls, "memory: polls per line length, from shoppers spread over the line")
	fs.IntVar(&c.FillWorkers, "fill-workers", c.FillWorkers, "goroutines calling the Joiner at once when filling a line")
	fs.StringVar(&c.Limits, "limits", c.Limits, "the node's rate limits: production (per-account as shipped, per-IP out of reach: the load generator is one IP), high (all out of reach) or off")
	fs.BoolVar(&c.OriginWorkers, "origin-workers", false, "run the origin's order writer and sweeper too (they then compete for the CPUs)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "cap on the whole run")
	benchreport.OutputFlags(fs, env, &out)
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of each path's first timed edge run to `path`.<path>.pprof (and of the bare handler's run to path.<path>.bare.pprof)")
	if err := env.Parse(args, getenv); err != nil {
		return c, out, err
	}
	if fs.NArg() > 0 {
		return c, out, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Paths = map[string]bool{}
	for p := range strings.SplitSeq(*parts, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.Paths[p] = true
		}
	}
	for f := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, out, fmt.Errorf("-mem-sizes: %q is not a positive integer", f)
		}
		c.MemSizes = append(c.MemSizes, n)
	}
	return c, out, c.Validate()
}
