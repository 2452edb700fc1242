// Package edgeside measures the edge node's request paths and memory, each
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
// The node is app.New's App with its loops running (App.Start), on a real
// Redis and in front of a real origin (origin/originbench) on Postgres. It
// works under a Redis key prefix and a Postgres schema of its own and
// removes both at the end.
package edgeperf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/httpload"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/originside"
	"github.com/flashgate/flashgate/edge/edgeinternals"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
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

// env is everything a run has started.
type env struct {
	c      Config
	rdb    *redis.Client // the benchmark's own: CPU samples, fills, checks
	origin *originside.Origin

	keySpec, userSecret, edgePrefix string                // every node's
	issuer                          *tokens.Issuer        // queue and admission tokens, with the nodes' keys
	users                           *tokens.DevUserIssuer // user tokens, with the nodes' user secret
	endsAt                          time.Time             // every sale's end

	// The paths' node, bare server and load-generator clients.
	node                                 *node
	bare                                 *bare
	edgeClient, bareClient, originClient *httpload.Client
}

// Run runs the benchmark and returns its report. Keys and schema are removed
// even when a part fails.
func Run(ctx context.Context, c Config) (rep Report, err error) {
	if err := c.Validate(); err != nil {
		return Report{}, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	defer func() {
		rep.Seconds = time.Since(began).Seconds()
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the run reached its %s cap: raise -timeout, or lower -n, -proxy-n and -mem-polls)", err, c.Timeout)
		}
	}()
	rep.Settings = Settings{Conns: c.Conns, Requests: c.Requests, ProxyRequests: c.ProxyRequests, Warmup: c.Warmup, Rounds: c.Rounds,
		Limits: c.Limits, PollLine: c.PollLine, PollAdmitted: c.PollAdmitted, OriginWorkers: c.OriginWorkers}

	ropts, err := redis.ParseURL(c.RedisURL)
	if err != nil {
		return rep, fmt.Errorf("redis url: %w", err)
	}
	ropts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return rep, fmt.Errorf("redis: %w", err)
	}
	prefix := testenv.Name("edgebench") + ":"
	rep.Prefix = prefix
	defer func() {
		// A fresh budget: the run's may be spent, or the run interrupted.
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		n, cerr := testenv.DeleteKeys(cleanCtx, rdb, prefix)
		rep.Cleanup.RedisKeys = n
		err = errors.Join(err, cerr)
	}()
	if rep.Machine, err = describeMachine(ctx, rdb, c.PostgresURL); err != nil {
		return rep, err
	}

	e := &env{c: c, rdb: rdb}
	stop, err := e.start(ctx, prefix)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, stop(stopCtx))
	}()
	if err != nil {
		return rep, err
	}
	if c.Paths[PathMemory] {
		// First, each part on a node of its own: what the node keeps per
		// shopper is what this part measures, and what the paths leave in
		// theirs would blur it.
		rep.Memory = &Memory{}
		if err := e.memory(ctx, rep.Memory); err != nil {
			return rep, fmt.Errorf("memory: %w", err)
		}
		// Let the memory node go before the paths' starts (see settleHeap).
		settleHeap(ctx, rep.Memory.Baseline.InuseBytes+4<<20, 15*time.Second)
	}
	return rep, e.paths(ctx, &rep)
}

// start brings up the origin with every sale, in a Postgres schema of its
// own. stop undoes it.
func (e *env) start(ctx context.Context, prefix string) (stop func(context.Context) error, err error) {
	var stops []func(context.Context) error
	stop = func(ctx context.Context) error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i](ctx))
		}
		return errors.Join(errs...)
	}
	c := e.c
	if e.keySpec, err = tokens.GenerateKeySpec("bench"); err != nil {
		return stop, err
	}
	keys, err := tokens.ParseKeySet(e.keySpec)
	if err != nil {
		return stop, err
	}
	e.userSecret = randomHex(32)
	e.edgePrefix = prefix + "edge:"
	e.issuer = tokens.NewIssuer(keys, tokens.IssuerOptions{AdmissionTTL: c.Timeout + 10*time.Minute})
	e.users = tokens.NewDevUserIssuer([]byte(e.userSecret), "", c.Timeout+time.Hour, nil)

	schema := strings.TrimSuffix(prefix, ":") // lowercase letters, digits and _
	pgURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, schema)
	if err != nil {
		return stop, err
	}
	stops = append(stops, drop)
	e.origin, err = originside.StartOrigin(ctx, originside.OriginConfig{
		RedisURL: c.RedisURL, PostgresURL: pgURL, RedisPrefix: prefix + "origin:",
		Sale: saleOpen, SKU: sku, Stock: 2*c.Rounds*(c.Warmup+c.ProxyRequests) + slack,
		Sales: []originside.SaleSpec{
			{Sale: saleSoldOut, SKU: sku, Stock: 0},
			{Sale: salePoll, SKU: sku, Stock: slack},
			{Sale: saleLine, SKU: sku, Stock: slack},
		},
		TokenKeys: e.keySpec, UserSecret: e.userSecret, Workers: c.OriginWorkers, Log: c.Log,
	})
	if err != nil {
		return stop, err
	}
	stops = append(stops, e.origin.Stop)
	return stop, nil
}

// nodeConfig is the edge node's Config: production defaults (tick,
// refresh, timeouts, pools) on the run's Redis prefix, keys and origin,
// with the limits asked for.
func (e *env) nodeConfig() edgeinternals.Config {
	cfg := edgeinternals.DefaultConfig()
	cfg.Addr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RedisURL = e.c.RedisURL
	cfg.RedisPrefix = e.edgePrefix
	cfg.OriginURL = "http://" + e.origin.Addr
	cfg.AdminToken = randomHex(16)
	cfg.TokenKeys = e.keySpec
	cfg.UserTokenSecret = e.userSecret
	switch e.c.Limits {
	case LimitsProduction:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = unreachable, unreachable, unreachable
	case LimitsHigh:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = unreachable, unreachable, unreachable
		cfg.LimitJoinAccount, cfg.LimitPollAccount, cfg.LimitReserveAccount = unreachable, unreachable, unreachable
	case LimitsOff:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = "", "", ""
		cfg.LimitJoinAccount, cfg.LimitPollAccount, cfg.LimitReserveAccount = "", "", ""
	}
	return cfg
}

// startNode starts a node and waits until it serves every sale.
func (e *env) startNode(ctx context.Context) (*node, error) {
	n, err := startNode(e.nodeConfig(), e.c.Log)
	if err != nil {
		return nil, err
	}
	if err := n.waitSales(ctx, saleOpen, saleSoldOut, salePoll, saleLine); err != nil {
		return nil, errors.Join(err, n.stop(context.WithoutCancel(ctx)))
	}
	if e.endsAt.IsZero() {
		open, _ := n.app.Snapshots.Get(saleOpen)
		e.endsAt = open.EndsAt
	}
	return n, nil
}

// paths measures the request paths on a node of their own, beside the bare
// handler, and stops both at the end.
func (e *env) paths(ctx context.Context, rep *Report) (err error) {
	c := e.c
	var todo []func(context.Context) (*Path, error)
	for _, p := range []struct {
		name string
		run  func(context.Context) (*Path, error)
	}{
		{PathStatus, e.status}, {PathJoin, e.join}, {PathSoldOut, e.soldOut}, {PathStatic, e.static}, {PathProxied, e.proxied},
	} {
		if c.Paths[p.name] {
			todo = append(todo, p.run)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	rep.PathsHeap = readHeap() // what a node before left is gone
	if e.node, err = e.startNode(ctx); err != nil {
		return err
	}
	rep.Settings.Tick, rep.Settings.Refresh = e.node.cfg.Tick.String(), e.node.cfg.SnapshotRefresh.String()
	if e.bare, err = startBare(e.node); err != nil {
		return errors.Join(err, e.node.stop(context.WithoutCancel(ctx)))
	}
	e.edgeClient = httpload.New(httpload.Options{Addr: e.node.addr, Conns: c.Conns})
	e.bareClient = httpload.New(httpload.Options{Addr: e.bare.addr, Conns: c.Conns})
	e.originClient = httpload.New(httpload.Options{Addr: e.origin.Addr, Conns: c.Conns})
	defer func() {
		e.edgeClient.Close()
		e.bareClient.Close()
		e.originClient.Close()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, e.bare.stop(stopCtx), e.node.stop(stopCtx))
		e.node, e.bare = nil, nil
	}()
	for _, run := range todo {
		path, err := run(ctx)
		if path != nil {
			rep.Paths = append(rep.Paths, path)
		}
		if err != nil && path != nil {
			return fmt.Errorf("%s: %w", path.Name, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}

// target is one server a path's requests go to.
type target struct {
	server string // "bare", "origin" or "edge"
	client *httpload.Client
	addr   string
	reqs   []httpload.Request
}

// measurePath runs each round: every target in turn, warm-up then n timed
// requests from the round's slice of its requests. The bare target must
// come first: the others' ratios are to it.
func (e *env) measurePath(ctx context.Context, p *Path, n int, targets []target) error {
	perRound := e.c.Warmup + n
	var ratios, cpuRatios, originRatios, overOrigin []float64
	for round := 1; round <= e.c.Rounds; round++ {
		first := (round - 1) * perRound
		out := Round{Round: round}
		var bareRate, bareMicros, bareRedis float64
		for _, t := range targets {
			warm := t.client.Run(ctx, t.reqs, first, e.c.Warmup)
			stopProfile := func() error { return nil }
			if round == 1 && (t.server == "edge" || t.server == "bare") {
				name := p.Name
				if t.server == "bare" {
					name += ".bare"
				}
				var err error
				if stopProfile, err = e.c.profile(name); err != nil {
					return err
				}
			}
			var before map[string]float64
			if t.server == "edge" {
				before = e.node.counters()
			}
			res, cpu, err := measure(ctx, e.rdb, func() loadgen.Result {
				return t.client.Run(ctx, t.reqs, first+e.c.Warmup, n)
			})
			if err = errors.Join(err, stopProfile()); err != nil {
				return err
			}
			run := ServerRun{Server: t.server, Addr: t.addr, Timing: newTiming(res, cpu)}
			if res.Calls > 0 {
				run.ProcessMicros = cpu.Process * res.Elapsed.Seconds() / float64(res.Calls) * 1e6
				run.RedisMicros = cpu.Redis * res.Elapsed.Seconds() / float64(res.Calls) * 1e6
			}
			if warm.Err != nil && res.Err == nil {
				run.FirstError = "warm-up: " + warm.Err.Error()
			}
			if t.server == "edge" {
				run.Node = countersBetween(before, e.node.counters())
			}
			if t.server == "bare" {
				bareRate, bareMicros, bareRedis = run.PerSecond, run.ProcessMicros, cpu.Redis
			}
			if bareRate > 0 {
				run.Ratio = run.PerSecond / bareRate
			}
			// Redis is charged only for what it did beyond its pace during
			// the bare run (which sends it nothing): other clients of a
			// shared Redis are not this path's cost.
			own := max(0, cpu.Redis-bareRedis) * res.Elapsed.Seconds() / float64(max(res.Calls, 1)) * 1e6
			if cost := run.ProcessMicros + own; cost > 0 {
				run.CPUBoundRatio = bareMicros / cost
			}
			out.Runs = append(out.Runs, run)
			if res.Cut {
				p.Rounds = append(p.Rounds, out)
				return fmt.Errorf("time cap reached after %d of %d requests to %s", res.Calls, n, t.server)
			}
		}
		p.Rounds = append(p.Rounds, out)
		edge, _ := out.run("edge")
		ratios = append(ratios, edge.Ratio)
		cpuRatios = append(cpuRatios, edge.CPUBoundRatio)
		if origin, ok := out.run("origin"); ok {
			originRatios = append(originRatios, origin.Ratio)
			overOrigin = append(overOrigin, edge.PerSecond/origin.PerSecond)
		}
	}
	p.Ratio, p.CPUBoundRatio = median(ratios), median(cpuRatios)
	p.OriginRatio, p.EdgeOverOrigin = median(originRatios), median(overOrigin)
	return nil
}

// pair is the usual target list: the bare handler, then the edge, both
// sent the same requests.
func (e *env) pair(reqs []httpload.Request) []target {
	return []target{
		{server: "bare", client: e.bareClient, addr: e.bare.addr, reqs: reqs},
		{server: "edge", client: e.edgeClient, addr: e.node.addr, reqs: reqs},
	}
}

// status: shoppers of a real line poll with the queue tokens their joins
// earned; the admission cursor has passed PollAdmitted of the line, so the
// answers mix admitted (each with a fresh admission token) and waiting.
func (e *env) status(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "status poll", Request: "GET /v1/sales/" + salePoll + "/queue/status", Expect: fasthttp.StatusOK, Goal: StatusGoal}
	f := newFiller(e.rdb, e.node.keys, c.FillWorkers)
	pos := make([]int64, c.PollLine)
	_, err := f.join(ctx, salePoll, e.node.startsAt(salePoll), groupPoll, 0, c.PollLine, func(i int, p int64) { pos[i] = p })
	f.close()
	if err != nil {
		return p, err
	}
	auth, err := build(c.PollLine, func(i int) ([]byte, error) {
		tok, _, err := e.issuer.Queue(salePoll, account(groupPoll, i), pos[i], false, e.endsAt)
		return []byte("Bearer " + tok), err
	})
	if err != nil {
		return p, err
	}
	// Place the cursor as if the sale had been admitting for a while; it
	// advances from there at the sale's rate.
	serving := int64(c.PollAdmitted * float64(c.PollLine))
	if err := e.rdb.HSet(ctx, e.node.keys.Cursor(salePoll), "now_serving", serving).Err(); err != nil {
		return p, fmt.Errorf("place the cursor: %w", err)
	}
	if err := e.waitServing(ctx, salePoll, serving); err != nil {
		return p, err
	}
	reqs := make([]httpload.Request, c.Rounds*(c.Warmup+c.Requests))
	for i := range reqs {
		reqs[i] = httpload.Request{Method: fasthttp.MethodGet, Path: "/v1/sales/" + salePoll + "/queue/status", Authorization: auth[i%len(auth)]}
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// waitServing waits until the node's view has the sale's cursor at least
// at serving.
func (e *env) waitServing(ctx context.Context, sale string, serving int64) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := e.node.app.Cursor.State(sale); ok && st.NowServing >= serving {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node never read sale %s's cursor at %d", sale, serving)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// join: every request a distinct shopper with a user token of the shop's.
func (e *env) join(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "join", Request: "POST /v1/sales/" + saleOpen + "/queue", Expect: fasthttp.StatusAccepted, Goal: JoinGoal}
	reqs, err := build(c.Rounds*(c.Warmup+c.Requests), func(i int) (httpload.Request, error) {
		tok, err := e.users.Issue(account(groupJoin, i))
		return httpload.Request{Method: fasthttp.MethodPost, Path: "/v1/sales/" + saleOpen + "/queue", Authorization: []byte("Bearer " + tok)}, err
	})
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// reserves builds reserve requests for sale, each a distinct shopper of
// group with a valid admission token and an idempotency key of its own.
func (e *env) reserves(sale string, group, n int) ([]httpload.Request, error) {
	return build(n, func(i int) (httpload.Request, error) {
		acct := account(group, i)
		tok, _, err := e.issuer.Admission(sale, acct, int64(i+1))
		return httpload.Request{
			Method: fasthttp.MethodPost, Path: "/v1/sales/" + sale + "/reserve", Authorization: []byte("Bearer " + tok),
			ContentType: "application/json", Body: fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k-%s"}`, sku, acct),
		}, err
	})
}

// soldOut: valid admission tokens for a sale the node's snapshot says is
// sold out; the edge answers 409 without calling the origin.
func (e *env) soldOut(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "sold-out reserve", Request: "POST /v1/sales/" + saleSoldOut + "/reserve", Expect: fasthttp.StatusConflict, Goal: SoldOutGoal}
	if s, _ := e.node.app.Snapshots.Get(saleSoldOut); !s.SoldOut {
		return p, fmt.Errorf("the node's snapshot of sale %s does not say sold out", saleSoldOut)
	}
	reqs, err := e.reserves(saleSoldOut, groupSoldOut, c.Rounds*(c.Warmup+c.Requests))
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// static: the shopper's page, as a client without a cached copy asks.
func (e *env) static(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "static page", Request: "GET /", Expect: fasthttp.StatusOK}
	reqs := make([]httpload.Request, c.Rounds*(c.Warmup+c.Requests))
	for i := range reqs {
		reqs[i] = httpload.Request{Method: fasthttp.MethodGet, Path: "/"}
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// proxied: admission tokens of a sale with stock; the edge checks each and
// forwards it to the origin, which takes a unit. The origin alone gets
// requests of other shoppers (a token is good for one reserve).
func (e *env) proxied(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "proxied reserve", Request: "POST /v1/sales/" + saleOpen + "/reserve", Expect: fasthttp.StatusCreated}
	n := c.Rounds * (c.Warmup + c.ProxyRequests)
	viaEdge, err := e.reserves(saleOpen, groupProxied, n)
	if err != nil {
		return p, err
	}
	alone, err := e.reserves(saleOpen, groupOrigin, n)
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.ProxyRequests, []target{
		{server: "bare", client: e.bareClient, addr: e.bare.addr, reqs: viaEdge},
		{server: "origin", client: e.originClient, addr: e.origin.Addr, reqs: alone},
		{server: "edge", client: e.edgeClient, addr: e.node.addr, reqs: viaEdge},
	})
}

// build makes n values with f from GOMAXPROCS goroutines: token signing is
// the shoppers' cost, done before any clock starts.
func build[T any](n int, f func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				v, err := f(i)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = v
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// profile starts a CPU profile into the file for a path, if profiles were
// asked for. The stop function it returns is never nil.
func (c Config) profile(path string) (stop func() error, err error) {
	if c.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	name := strings.NewReplacer(" ", "-", "/", "-").Replace(path)
	f, err := os.Create(c.CPUProfile + "." + name + ".pprof")
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			pprof.StopCPUProfile()
			err = f.Close()
		})
		return err
	}, nil
}
