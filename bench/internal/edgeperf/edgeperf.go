// Package edgeperf measures the edge node's request paths and memory, each
// path beside a bare fasthttp handler measured in the same run with the same
// load generator, connections and request count:
//
//   - status poll: GET /v1/sales/{id}/queue/status with queue tokens of
//     shoppers in a real line, some admitted and some waiting;
//   - join: POST /v1/sales/{id}/queue with distinct user tokens;
//   - sold-out reserve: POST /v1/sales/{id}/reserve answered 409 at the
//     edge from its snapshot;
//   - static page: GET /;
//   - proxied reserve: POST /v1/sales/{id}/reserve through the edge to a
//     real origin, beside the origin alone too;
//   - memory: the node's heap and the line's Redis bytes with 10,000 and
//     1,000,000 shoppers in line.
//
// The node is app.New's App with its loops running (package inproc), on a
// real Redis and in front of a real origin (inproc too) on Postgres.
// It works under a Redis key prefix and a Postgres schema of its own and
// removes both at the end.
package edgeperf

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// Goals the figures are held against.
const (
	StatusGoal  = 0.8  // status poll / bare
	JoinGoal    = 0.6  // join / bare
	SoldOutGoal = 0.8  // sold-out reserve / bare
	HeapGoal    = 1.10 // heap with the longest line / with the shortest: flat within 10 %
	RedisGoal   = 100  // Redis bytes per queued shopper
)

// Path names, as -run takes them.
const (
	PathStatus  = "status"
	PathJoin    = "join"
	PathSoldOut = "soldout"
	PathStatic  = "static"
	PathProxied = "proxied"
	PathMemory  = "memory"
)

// AllPaths is every part of the benchmark, in the order they run.
var AllPaths = []string{PathMemory, PathStatus, PathJoin, PathSoldOut, PathStatic, PathProxied}

// Limit settings of the node.
const (
	// LimitsProduction keeps the per-account limits at their defaults and
	// raises the per-IP ones out of reach: the load generator is one IP.
	LimitsProduction = "production"
	// LimitsHigh sets every limit out of reach: the limiters run, never refuse.
	LimitsHigh = "high"
	// LimitsOff switches every limiter off.
	LimitsOff = "off"
)

const (
	unreachable  = "1000000000-M" // a limit no run reaches, in ulule/limiter's form
	maxSaleStock = 10_000_000     // the origin admin API's cap on one SKU's stock
	slack        = 1_000
	sku          = "unit"

	saleOpen    = "open"    // joins and proxied reserves; large stock
	saleSoldOut = "soldout" // stock 0: the edge's snapshot says sold out
	salePoll    = "poll"    // the status-poll line
	saleLine    = "line"    // the memory phase's line
)

// Config is one benchmark run. Zero values are not defaults: command
// edgebench fills every field from its flags.
type Config struct {
	RedisURL    string
	PostgresURL string // the database must exist; the run works in a schema of its own

	Paths map[string]bool // which parts to run (AllPaths)

	Requests      int // timed requests per server per round, every path but the proxied reserve
	ProxyRequests int // the same for the proxied reserve (and the origin alone)
	Conns         int // load-generator connections per server
	Warmup        int // untimed requests before each timed run
	Rounds        int // times each path is measured, alternating with the bare handler; ratios are medians

	PollLine     int     // shoppers in the status-poll line
	PollAdmitted float64 // fraction of that line the admission cursor has passed

	MemSizes    []int // line lengths of the memory phase, ascending
	MemPolls    int   // polls per line length, from shoppers spread over the line
	FillWorkers int   // goroutines calling Joiner.Join at once when filling a line

	Limits        string // LimitsProduction, LimitsHigh or LimitsOff
	OriginWorkers bool   // run the origin's order writer and sweeper too

	Timeout    time.Duration // cap on the whole run; the cleanup has a budget of its own
	CPUProfile string        // if set, CPU profiles of each path's first timed edge run go to CPUProfile+".<path>.pprof", the bare handler's beside it to ".<path>.bare.pprof"
	Log        *slog.Logger  // the edge node's and the origin's log
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case len(c.Paths) == 0:
		return errors.New("nothing to run")
	case c.Requests < 1 || c.ProxyRequests < 1 || c.Conns < 1 || c.PollLine < 1 || c.MemPolls < 1 || c.FillWorkers < 1:
		return errors.New("counts of requests, connections, shoppers, polls and workers must be positive")
	case c.Warmup < 0 || c.Rounds < 1:
		return errors.New("warm-up must not be negative, and rounds must be positive")
	case c.PollAdmitted < 0 || c.PollAdmitted > 1:
		return errors.New("the admitted fraction of the poll line must be from 0 to 1")
	case 2*c.Rounds*(c.Warmup+c.ProxyRequests)+slack > maxSaleStock:
		return fmt.Errorf("2 x rounds x (proxied requests + warm-up) must stay under %d, the largest stock a sale takes", maxSaleStock-slack)
	case c.Timeout <= 0:
		return errors.New("the time cap must be positive")
	case c.Limits != LimitsProduction && c.Limits != LimitsHigh && c.Limits != LimitsOff:
		return fmt.Errorf("limits %q: want %s, %s or %s", c.Limits, LimitsProduction, LimitsHigh, LimitsOff)
	}
	for p := range c.Paths {
		if !slices.Contains(AllPaths, p) {
			return fmt.Errorf("unknown path %q: want some of %s", p, strings.Join(AllPaths, ","))
		}
	}
	if c.Paths[PathMemory] {
		if len(c.MemSizes) == 0 || !slices.IsSorted(c.MemSizes) || c.MemSizes[0] < 1 {
			return errors.New("memory line sizes must be positive and ascending")
		}
	}
	for _, u := range []string{c.RedisURL, c.PostgresURL} {
		if err := testenv.LoopbackOnly(u); err != nil {
			return err
		}
	}
	return nil
}
