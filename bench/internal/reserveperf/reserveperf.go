// Package reserveperf measures the origin's reserve path twice over, each
// beside a ceiling measured in the same run on the same machine, and what
// making a granted reserve durable costs:
//
//   - the script path: checkout.Reserver.Reserve from many goroutines, every
//     reserve a distinct shopper that takes a unit, beside redis-benchmark
//     running the same reserve.lua, pipelined, on the same stock key;
//   - the HTTP path: POST /v1/sales/{sale}/reserve against the origin's real
//     public handler on a loopback listener, beside a bare fasthttp handler,
//     both driven by the same load generator with the same requests, and
//     the same origin with its reserve journal off;
//   - the durability options (issue 9): the Reserver against redis-servers
//     of the run's own, with the Postgres journal, AOF with appendfsync
//     always, WAIT for a replica, each beside the same Reserver on a
//     server without any;
//   - the peers (issue 31): the origin's reserve route, journal on, beside
//     the two simplest fast designs (package reservepeers), a Redis-Lua
//     seckill and a Postgres-serializable one, in one interleaved
//     sequence, each fresh per round with the same stock and the same
//     crowd of shoppers attempting once, most of them told sold out.
//
// It works in a Redis key prefix and a Postgres schema of its own and
// removes both at the end.
package reserveperf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/testenv"
)

// Goals the ratios are held against.
const (
	ScriptGoal = 0.7 // Reserver / redis-benchmark
	HTTPGoal   = 0.6 // origin handler / bare fasthttp handler
)

// Config is one benchmark run. Zero values are not defaults: command
// reservebench fills every field from its flags.
type Config struct {
	RedisURL    string
	PostgresURL string // the database must exist; the run works in a schema of its own

	Script     bool     // run the script path
	HTTP       bool     // run the HTTP path
	Durability []string // durability options to measure (DurabilityOptions); none skips the phase
	Peers      bool     // run the peers phase (issue 31)

	ScriptReserves int                             // timed reserves per Reserver setting, and redis-benchmark's -n
	ScriptWorkers  int                             // goroutines calling Reserve at once
	Reserver       []reservescript.ReserverOptions // settings to measure; the first is the headline and the HTTP origin's
	RedisBenchmark RedisBenchmarkOptions           // Requests is set from ScriptReserves

	HTTPRequests  int  // timed requests per server
	HTTPConns     int  // load-generator connections per server
	OriginWork    bool // start the origin's order writer, sweeper and catalog refresh during the HTTP and peers runs
	HTTPNoJournal bool // also measure an origin with its reserve journal off

	PeerUnits    int // units each design sells in each round of the peers phase
	PeerAccounts int // shoppers per design and round, each with an admission token of its own, each attempting once
	PeerConns    int // load-generator connections per design

	DurabilityReserves int           // timed reserves per durability option
	WaitTimeout        time.Duration // WAIT's timeout for the wait option
	RedisServer        string        // the redis-server executable the durability phase starts

	Warmup     int           // untimed calls before each timed run
	Rounds     int           // times each path is measured, its runs alternating with their ceiling's (the peers': with each other); ratios are medians
	Prime      bool          // before the script path, an untimed redis-benchmark pass of the same size readies Redis's memory
	Timeout    time.Duration // cap on the whole run, setup included; the final cleanup has a budget of its own
	CPUProfile string        // if set, CPU profiles go to CPUProfile+".script.pprof" (the timed rounds of the script path) and ".origin.pprof" (the first timed origin run)
	Log        *slog.Logger  // the origin's log
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case !c.Script && !c.HTTP && !c.Peers && len(c.Durability) == 0:
		return errors.New("nothing to run: choose script, durability, http, peers or some of them")
	case c.Peers && (c.PeerUnits < 1 || c.PeerConns < 1 || c.PeerUnits > maxSaleStock):
		return fmt.Errorf("peer units must be 1 to %d, and peer connections positive", maxSaleStock)
	case c.Peers && c.PeerAccounts < c.PeerUnits:
		return errors.New("peer accounts must be at least the peer units: flashgate must sell every unit")
	case len(c.Durability) > 0 && (c.DurabilityReserves < 1 || c.WaitTimeout <= 0):
		return errors.New("durability reserves and the WAIT timeout must be positive")
	case c.ScriptReserves < 1 || c.ScriptWorkers < 1 || c.HTTPRequests < 1 || c.HTTPConns < 1:
		return errors.New("counts of reserves, workers, requests and connections must be positive")
	case c.Warmup < 0 || c.Rounds < 1:
		return errors.New("warm-up must not be negative, and rounds must be positive")
	case len(c.Reserver) == 0:
		return errors.New("at least one reserver setting is needed")
	case c.RedisBenchmark.Clients < 1 || c.RedisBenchmark.Pipeline < 1 || c.RedisBenchmark.KeySpace < 1:
		return errors.New("redis-benchmark clients, pipeline and key space must be positive")
	case c.Rounds*(c.HTTPRequests+c.Warmup)+slack > maxSaleStock:
		return fmt.Errorf("rounds times (http requests plus warm-up) must stay under %d, the largest stock a sale takes", maxSaleStock-slack)
	case c.Timeout <= 0:
		return errors.New("the time cap must be positive")
	}
	for _, d := range c.Durability {
		if _, ok := durabilities[d]; !ok {
			return fmt.Errorf("durability option %q: want some of %s", d, strings.Join(DurabilityOptions, ","))
		}
	}
	for _, u := range []string{c.RedisURL, c.PostgresURL} {
		if err := testenv.LoopbackOnly(u); err != nil {
			return err
		}
	}
	return nil
}

const (
	maxSaleStock = 10_000_000 // the admin API's cap on one SKU's stock
	slack        = 1_000      // units beyond the reserves planned, so none sells out
	holdTTL      = 10 * time.Minute
	retention    = time.Hour // per-shopper keys outlive a crashed run by this much only
	sku          = "unit"
	scriptSale   = "script"
	httpSale     = "http"
	randInt      = "__rand_int__" // redis-benchmark's substitution marker, 12 digits once replaced
)

// Run runs the benchmark and returns its report. Keys and schema are removed
// even when a phase fails.
func Run(ctx context.Context, c Config) (rep Report, err error) {
	if err := c.Validate(); err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	defer func() {
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the run reached its %s cap: raise -timeout, or lower -n, -http-n and -peer-accounts)", err, c.Timeout)
		}
	}()
	r, err := testenv.OpenRedis(ctx, c.RedisURL, "reservebench", 64) // 64 connections, as the origin's app.New
	if err != nil {
		return Report{}, err
	}
	defer func() {
		n, cerr := r.Remove(ctx)
		rep.Cleanup.RedisKeys = n
		err = errors.Join(err, cerr)
	}()
	rdb, prefix := r.Client, r.Prefix
	rep.Prefix = prefix

	rep.Machine, err = benchreport.DescribeMachine(ctx, rdb, c.PostgresURL)
	if err != nil {
		return rep, err
	}
	src, err := reservescript.Source()
	if err != nil {
		return rep, err
	}
	if c.Script {
		s, err := runScript(ctx, c, rdb, prefix, src)
		rep.Script = s
		if err != nil {
			return rep, fmt.Errorf("script path: %w", err)
		}
		// Hundreds of thousands of keys slow every SCAN on this Redis,
		// the tests' and the HTTP path's included: drop them now.
		if _, err := testenv.DeleteKeys(ctx, rdb, prefix); err != nil {
			return rep, err
		}
	}
	if len(c.Durability) > 0 {
		d, err := runDurability(ctx, c, prefix, commandsPerReserve(src))
		rep.Durability = d
		if err != nil {
			return rep, fmt.Errorf("durability: %w", err)
		}
	}
	if c.HTTP {
		h, err := runHTTP(ctx, c, rdb, prefix, commandsPerReserve(src))
		rep.HTTP = h
		if err != nil {
			return rep, fmt.Errorf("http path: %w", err)
		}
	}
	if c.Peers {
		p, err := runPeers(ctx, c, rdb, prefix)
		rep.Peers = p
		if err != nil {
			return rep, fmt.Errorf("peers: %w", err)
		}
	}
	return rep, nil
}
