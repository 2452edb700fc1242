package reserveperf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/testenv"
)

// The durability options the durability phase measures (issue 9: a 201
// survives any single fault). Each runs the Reserver with the headline
// setting against redis-servers of the run's own, and is compared with
// DurNone in the same round.
const (
	DurNone       = "none"        // no persistence, no journal, no WAIT: the baseline
	DurJournal    = "journal"     // the origin's default: the Postgres reserve journal
	DurAOF        = "aof"         // appendonly yes, appendfsync always
	DurJournalAOF = "journal+aof" // both
	DurReplica    = "replica"     // a replica attached, no WAIT: what replication alone costs
	DurWait       = "wait"        // a replica attached, WAIT 1 after each pipeline
)

// DurabilityOptions are every option, in the order a round runs them.
var DurabilityOptions = []string{DurNone, DurJournal, DurAOF, DurJournalAOF, DurReplica, DurWait}

// durability is how one option is run.
type durability struct {
	server  string // which of the run's servers: plain, aof or primary (with its replica)
	journal bool
	wait    int
	about   string
}

var durabilities = map[string]durability{
	DurNone:       {server: "plain", about: "redis-server without persistence; no journal, no WAIT"},
	DurJournal:    {server: "plain", journal: true, about: "same server; each pipeline's grants INSERTed into Postgres before answering"},
	DurAOF:        {server: "aof", about: "redis-server with appendonly yes, appendfsync always"},
	DurJournalAOF: {server: "aof", journal: true, about: "the AOF server and the Postgres journal"},
	DurReplica:    {server: "primary", about: "redis-server with one replica attached; no WAIT"},
	DurWait:       {server: "primary", wait: 1, about: "the same primary; WAIT 1 ending each pipeline"},
}

// serverConfig are each server's settings beyond the common ones (no RDB
// snapshots, no AOF): the servers differ in these alone.
var serverConfig = map[string][]string{
	"plain":   nil,
	"aof":     {"appendonly yes", "appendfsync always"},
	"primary": nil,
}

// durServer is one of the run's redis-servers with the script path on it.
type durServer struct {
	srv, replica *redisserver.Server
	rdb          *redis.Client
	sp           *reservescript.Path
}

func runDurability(ctx context.Context, c Config, prefix string, perReserve int) (_ *DurabilityReport, err error) {
	opts := c.Reserver[0]
	rep := &DurabilityReport{Workers: c.ScriptWorkers, Reserves: c.DurabilityReserves, Warmup: c.Warmup, Primed: c.Prime,
		Reserver: opts, WaitTimeoutMillis: benchreport.Millis(c.WaitTimeout), Servers: map[string]string{}}
	options := c.Durability
	if !slices.Contains(options, DurNone) {
		options = append([]string{DurNone}, options...)
	}

	// The servers' folder is under the system's temporary folder, which
	// must be a real disk for AOF figures to mean anything.
	dir, err := os.MkdirTemp("", "reservebench-")
	if err != nil {
		return rep, fmt.Errorf("redis-server folder: %w", err)
	}
	rep.Dir = dir
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()

	servers := map[string]*durServer{}
	defer func() {
		for _, s := range servers {
			s.rdb.Close()
			if s.replica != nil {
				s.replica.Kill()
			}
			s.srv.Kill()
		}
	}()
	var journal *reservescript.Journal
	for _, name := range options {
		d := durabilities[name]
		if d.journal && journal == nil {
			schema := strings.TrimSuffix(prefix, ":") + "_journal"
			pgURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, schema)
			if err != nil {
				return rep, err
			}
			defer func() {
				dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				err = errors.Join(err, drop(dropCtx))
			}()
			if journal, err = reservescript.OpenJournal(ctx, pgURL, scriptSale, sku, maxSaleStock); err != nil {
				return rep, err
			}
			defer journal.Close()
		}
		if servers[d.server] != nil {
			continue
		}
		s, err := startDurServer(ctx, c, dir, d.server, prefix)
		if s != nil {
			servers[d.server] = s
		}
		if err != nil {
			return rep, err
		}
		rep.Servers[d.server] = strings.Join(s.srv.Settings(), "; ")
		if s.replica != nil {
			rep.Servers[d.server+" replica"] = strings.Join(s.replica.Settings(), "; ")
		}
	}

	perRun := c.Warmup + c.DurabilityReserves
	// The servers are flushed before each run, so every run may use the
	// same shoppers.
	reqs := scriptRequests(c.RedisBenchmark.KeySpace, perRun)
	reset := func(s *durServer, withJournal bool) error {
		if err := s.rdb.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("flush own redis-server: %w", err)
		}
		if withJournal {
			if err := journal.Reset(ctx); err != nil {
				return err
			}
		}
		return s.sp.Load(ctx, scriptSale, sku, int64(perRun+slack))
	}
	if c.Prime {
		// As for the script path: a fresh redis-server grows its memory
		// during its first run, which that run would pay for.
		for _, name := range slices.Sorted(maps.Keys(servers)) {
			s := servers[name]
			if err := reset(s, false); err != nil {
				return rep, err
			}
			r := s.sp.Reserver(opts)
			res := r.Run(ctx, loadgen.Options{Workers: c.ScriptWorkers, Calls: perRun}, reqs)
			r.Close()
			if res.Err != nil {
				return rep, fmt.Errorf("prime %s server: %w", name, res.Err)
			}
		}
	}

	for round := 1; round <= c.Rounds; round++ {
		first := len(rep.Runs)
		for _, name := range options {
			d := durabilities[name]
			s := servers[d.server]
			if err := reset(s, d.journal); err != nil {
				return rep, err
			}
			dur := reservescript.Durable{WaitReplicas: d.wait, WaitTimeout: c.WaitTimeout}
			if d.journal {
				dur.Journal = journal
			}
			warm, res, cpu, err := timeReserver(ctx, c, s.rdb, s.sp.DurableReserver(opts, dur), reqs, c.DurabilityReserves, perReserve)
			if err != nil {
				return rep, err
			}
			run := DurabilityRun{Round: round, Option: name, Server: d.server, Timing: benchreport.NewTiming(res, reservescript.OutcomeName, cpu),
				Created: res.Labels[reservescript.Created]}
			run.Other = run.Calls - run.Created
			if d.journal {
				// Every created reserve, warm-up included, must have its row:
				// otherwise the run did not measure the journal.
				n, err := journal.Rows(ctx)
				if err != nil {
					return rep, err
				}
				run.Journaled = n
				if want := warm.Labels[reservescript.Created] + run.Created; n != want {
					rep.Runs = append(rep.Runs, run)
					return rep, fmt.Errorf("%s: the journal holds %d reserves, want %d", name, n, want)
				}
			}
			rep.Runs = append(rep.Runs, run)
			if res.Cut {
				return rep, fmt.Errorf("%s: time cap reached after %d of %d reserves", name, res.Calls, c.DurabilityReserves)
			}
		}
		var base float64
		for _, run := range rep.Runs[first:] {
			if run.Option == DurNone {
				base = run.PerSecond
			}
		}
		for i := first; i < len(rep.Runs); i++ {
			if base > 0 {
				rep.Runs[i].Ratio = rep.Runs[i].PerSecond / base
			}
		}
	}
	for _, name := range options {
		var ps, p50, p99, ratio []float64
		for _, run := range rep.Runs {
			if run.Option == name {
				ps, p50, p99, ratio = append(ps, run.PerSecond), append(p50, run.P50Millis), append(p99, run.P99Millis), append(ratio, run.Ratio)
			}
		}
		rep.Options = append(rep.Options, DurabilityOption{Option: name, About: durabilities[name].about,
			PerSecond: benchreport.Median(ps), P50Millis: benchreport.Median(p50), P99Millis: benchreport.Median(p99), Ratio: benchreport.Median(ratio)})
	}
	return rep, nil
}

// startDurServer starts the named server (with a replica for "primary"), its
// files in dir.
func startDurServer(ctx context.Context, c Config, dir, name, prefix string) (*durServer, error) {
	start := func(server string, replicaOf *redisserver.Server) (*redisserver.Server, error) {
		return redisserver.Start(ctx, redisserver.Options{Binary: c.RedisServer, Dir: dir, Name: server, Config: serverConfig[name], ReplicaOf: replicaOf})
	}
	srv, err := start(name, nil)
	if err != nil {
		return nil, err
	}
	s := &durServer{srv: srv}
	ropts, err := redis.ParseURL(srv.URL)
	if err != nil {
		srv.Kill()
		return nil, fmt.Errorf("redis url: %w", err)
	}
	ropts.ContextTimeoutEnabled = true
	ropts.PoolSize = 64 // as the origin's app.New
	s.rdb = redis.NewClient(ropts)
	s.sp = reservescript.New(s.rdb, prefix, retention)
	if name == "primary" {
		if s.replica, err = start(name+"-replica", srv); err != nil {
			return s, err
		}
	}
	return s, nil
}
