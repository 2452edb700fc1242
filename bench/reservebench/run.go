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
	"github.com/flashgate/flashgate/bench/internal/reserveperf"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
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
	rep, err := reserveperf.Run(ctx, c)
	return benchreport.Finish(stdout, rep, out, err)
}

func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (c reserveperf.Config, out benchreport.Output, err error) {
	def := reservescript.DefaultReserverOptions()
	c = reserveperf.Config{
		ScriptReserves: 200_000,
		ScriptWorkers:  256,
		RedisBenchmark: reserveperf.RedisBenchmarkOptions{Clients: 50, Pipeline: 32, KeySpace: 100_000_000},
		HTTPRequests:   100_000,
		HTTPConns:      256, // as many as an edge keeps to the origin, and as the script path's goroutines
		HTTPNoJournal:  true,
		Warmup:         2_000,
		Rounds:         1,
		Prime:          true,
		Timeout:        5 * time.Minute,

		DurabilityReserves: 50_000,
		WaitTimeout:        reservescript.DefaultWaitTimeout(),
		RedisServer:        "redis-server",

		// Issue 31's workload: 95 % of the shoppers are told sold out.
		PeerUnits:    1_000,
		PeerAccounts: 20_000,
		PeerConns:    200,
	}
	fs := flag.NewFlagSet("reservebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := benchcmd.ServiceFlags(fs, &c.RedisURL, &c.PostgresURL)
	parts := fs.String("run", "script,durability,http,peers", "which phases to run: script, durability, http, peers, comma-separated")
	durability := fs.String("durability", strings.Join(reserveperf.DurabilityOptions, ","), "durability phase: options to measure, each against none in the same round: "+strings.Join(reserveperf.DurabilityOptions, ", "))
	fs.IntVar(&c.DurabilityReserves, "durability-n", c.DurabilityReserves, "durability phase: timed reserves per option")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", c.WaitTimeout, "durability phase: WAIT's timeout for the wait option (the origin's FLASHGATE_RESERVE_WAIT_TIMEOUT default)")
	fs.StringVar(&c.RedisServer, "redis-server", c.RedisServer, "durability phase: the redis-server executable it starts its own servers with")
	fs.BoolVar(&c.HTTPNoJournal, "http-no-journal", c.HTTPNoJournal, "HTTP path: also measure the origin with its reserve journal off")
	fs.IntVar(&c.ScriptReserves, "n", c.ScriptReserves, "script path: timed reserves per Reserver setting, and redis-benchmark's -n")
	fs.IntVar(&c.ScriptWorkers, "c", c.ScriptWorkers, "script path: goroutines calling Reserver.Reserve at once")
	pipelines := fs.String("pipelines", strconv.Itoa(def.Pipelines), "script path: ReserverOptions.Pipelines; a comma list measures each (with each -max-batch)")
	batches := fs.String("max-batch", strconv.Itoa(def.MaxBatch), "script path: ReserverOptions.MaxBatch; a comma list measures each")
	fs.IntVar(&c.RedisBenchmark.Clients, "rb-clients", c.RedisBenchmark.Clients, "redis-benchmark -c")
	fs.IntVar(&c.RedisBenchmark.Pipeline, "rb-pipeline", c.RedisBenchmark.Pipeline, "redis-benchmark -P")
	fs.IntVar(&c.RedisBenchmark.KeySpace, "rb-keyspace", c.RedisBenchmark.KeySpace, "redis-benchmark -r: range of each __rand_int__")
	fs.StringVar(&c.RedisBenchmark.Binary, "redis-benchmark", "redis-benchmark", "the redis-benchmark executable")
	fs.IntVar(&c.HTTPRequests, "http-n", c.HTTPRequests, "HTTP path: timed requests per server")
	fs.IntVar(&c.HTTPConns, "http-c", c.HTTPConns, "HTTP path: load-generator connections")
	fs.BoolVar(&c.OriginWork, "origin-workers", false, "HTTP path and peers: run the origin's order writer and sweeper too (they then compete for the CPUs)")
	fs.IntVar(&c.PeerUnits, "peer-units", c.PeerUnits, "peers: units each design sells per round")
	fs.IntVar(&c.PeerAccounts, "peer-accounts", c.PeerAccounts, "peers: shoppers per design and round, each with an admission token of its own, each attempting once")
	fs.IntVar(&c.PeerConns, "peer-c", c.PeerConns, "peers: load-generator connections per design")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "untimed calls before each timed run")
	fs.BoolVar(&c.Prime, "prime", c.Prime, "script path: run redis-benchmark once untimed first, so the first timed run does not pay for Redis growing its memory")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "measure each path this many times, alternating with its ceiling (peers: flashgate, seckill, pgserializable in turn); ratios are medians")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "cap on the whole run")
	benchreport.OutputFlags(fs, env, &out)
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write CPU profiles of the timed runs to `path`.script.pprof, path.origin.pprof and path.peers-<design>.pprof (the first round of each)")
	if err := env.Parse(args, getenv); err != nil {
		return c, out, err
	}
	if fs.NArg() > 0 {
		return c, out, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	durable := false
	for p := range strings.SplitSeq(*parts, ",") {
		switch strings.TrimSpace(p) {
		case "script":
			c.Script = true
		case "durability":
			durable = true
		case "http":
			c.HTTP = true
		case "peers":
			c.Peers = true
		default:
			return c, out, fmt.Errorf("-run %q: want some of script, durability, http, peers", *parts)
		}
	}
	if durable {
		for d := range strings.SplitSeq(*durability, ",") {
			if d = strings.TrimSpace(d); d != "" {
				c.Durability = append(c.Durability, d)
			}
		}
	}
	ps, err := ints(*pipelines)
	if err != nil {
		return c, out, fmt.Errorf("-pipelines: %w", err)
	}
	bs, err := ints(*batches)
	if err != nil {
		return c, out, fmt.Errorf("-max-batch: %w", err)
	}
	for _, p := range ps {
		for _, b := range bs {
			c.Reserver = append(c.Reserver, reservescript.ReserverOptions{Pipelines: p, MaxBatch: b})
		}
	}
	return c, out, c.Validate()
}

// ints parses a comma-separated list of positive integers.
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
