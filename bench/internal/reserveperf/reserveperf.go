// Package reservebench measures the origin's reserve path twice over, each
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
//     server without any.
//
// It works in a Redis key prefix and a Postgres schema of its own and
// removes both at the end.
package reserveperf

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/httpload"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/originside"
	"github.com/flashgate/flashgate/bench/internal/redisbench"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
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

	ScriptReserves int                          // timed reserves per Reserver setting, and redis-benchmark's -n
	ScriptWorkers  int                          // goroutines calling Reserve at once
	Reserver       []originside.ReserverOptions // settings to measure; the first is the headline and the HTTP origin's
	RedisBenchmark redisbench.Options           // Requests is set from ScriptReserves

	HTTPRequests  int  // timed requests per server
	HTTPConns     int  // load-generator connections per server
	OriginWork    bool // start the origin's order writer, sweeper and catalog refresh during the HTTP run
	HTTPNoJournal bool // also measure an origin with its reserve journal off

	DurabilityReserves int           // timed reserves per durability option
	WaitTimeout        time.Duration // WAIT's timeout for the wait option
	RedisServer        string        // the redis-server executable the durability phase starts

	Warmup     int           // untimed calls before each timed run
	Rounds     int           // times each path is measured, its runs alternating with their ceiling's; ratios are medians
	Prime      bool          // before the script path, an untimed redis-benchmark pass of the same size readies Redis's memory
	Timeout    time.Duration // cap on the whole run, setup included; the final cleanup has a budget of its own
	CPUProfile string        // if set, CPU profiles go to CPUProfile+".script.pprof" (the timed rounds of the script path) and ".origin.pprof" (the first timed origin run)
	Log        *slog.Logger  // the origin's log
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case !c.Script && !c.HTTP && len(c.Durability) == 0:
		return errors.New("nothing to run: choose script, durability, http or some of them")
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
			err = fmt.Errorf("%w (the run reached its %s cap: raise -timeout, or lower -n and -http-n)", err, c.Timeout)
		}
	}()
	ropts, err := redis.ParseURL(c.RedisURL)
	if err != nil {
		return Report{}, fmt.Errorf("redis url: %w", err)
	}
	ropts.ContextTimeoutEnabled = true
	ropts.PoolSize = 64 // as the origin's app.New
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return Report{}, fmt.Errorf("redis: %w", err)
	}
	prefix := testenv.Name("reservebench") + ":"
	rep.Prefix = prefix
	defer func() {
		// A fresh budget: the run's may be spent, or the run interrupted.
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		n, cerr := testenv.DeleteKeys(cleanCtx, rdb, prefix)
		rep.Cleanup.RedisKeys = n
		err = errors.Join(err, cerr)
	}()

	rep.Machine, err = describeMachine(ctx, rdb, c.PostgresURL)
	if err != nil {
		return rep, err
	}
	src, err := originside.ReserveScriptSource()
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
	return rep, nil
}

func describeMachine(ctx context.Context, rdb *redis.Client, pgURL string) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil { // Linux only; elsewhere left empty
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return m, fmt.Errorf("redis: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			m.Redis = v
		}
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return m, fmt.Errorf("postgres (the database must exist: make bench-reserve creates flashgate_bench): %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres); err != nil {
		return m, fmt.Errorf("postgres: %w", err)
	}
	return m, nil
}

// scriptRequests returns n reserves of distinct shoppers numbered from
// first: account, token id and idempotency key each as long as what
// redis-benchmark sends once its substitution markers are filled.
func scriptRequests(first, n int) []originside.Request {
	reqs := make([]originside.Request, n)
	for i := range reqs {
		num := fmt.Sprintf("%012d", first+i)
		reqs[i] = originside.Request{
			Sale: scriptSale, SKU: sku, HoldTTL: holdTTL,
			Account:        "a" + num,          // as "a" + __rand_int__
			TokenID:        "j000000000" + num, // 22 characters, as a real jti
			IdempotencyKey: "k" + num,          // as "k" + __rand_int__
		}
	}
	return reqs
}

// commandsPerReserve is how many commands Redis counts for one reserve that
// creates a hold: the EVALSHA and every redis.call in the script, all of
// which run on that path.
func commandsPerReserve(src string) int { return 1 + strings.Count(src, "redis.call(") }

func runScript(ctx context.Context, c Config, rdb *redis.Client, prefix, src string) (*ScriptReport, error) {
	perReserve := commandsPerReserve(src)
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	sp, err := originside.NewScriptPath(rdb, prefix, retention)
	if err != nil {
		return nil, err
	}
	rep := &ScriptReport{Workers: c.ScriptWorkers, Reserves: c.ScriptReserves, Warmup: c.Warmup, Primed: c.Prime, ScriptSHA1: sha, Goal: ScriptGoal}
	// Every run starts from an empty prefix and a fresh stock key of the
	// same name, so no run pays for the keys of the ones before it.
	reset := func(stock int) error {
		if _, err := testenv.DeleteKeys(ctx, rdb, prefix); err != nil {
			return err
		}
		return sp.Load(ctx, scriptSale, sku, int64(stock))
	}
	// The Go path numbers its shoppers from KeySpace up, above every number
	// redis-benchmark draws, so neither ever meets the other's keys.
	next := c.RedisBenchmark.KeySpace
	perRun := c.Warmup + c.ScriptReserves
	if c.Prime {
		// Redis grows its memory on the first run after being idle, which
		// costs that run a fifth or more of its rate: an untimed pass of
		// the same size lets every timed run find its memory ready.
		if err := reset(c.ScriptReserves + slack); err != nil {
			return rep, err
		}
		if _, err := runRedisBenchmark(ctx, c, rdb, prefix, src, sha, perReserve); err != nil {
			return rep, fmt.Errorf("prime: %w", err)
		}
	}
	stopProfile, err := c.profile("script")
	if err != nil {
		return rep, err
	}
	defer stopProfile()
	for round := 1; round <= c.Rounds; round++ {
		first := len(rep.Runs)
		for _, opts := range c.Reserver {
			if err := reset(perRun + slack); err != nil {
				return rep, err
			}
			reqs := scriptRequests(next, perRun) // before the clock starts
			next += perRun
			r := sp.Reserver(opts)
			warm := r.Run(ctx, loadgen.Options{Workers: c.ScriptWorkers, Calls: c.Warmup}, reqs)
			res, cpu, err := measure(ctx, rdb, func() loadgen.Result {
				return r.Run(ctx, loadgen.Options{Workers: c.ScriptWorkers, Calls: c.ScriptReserves, First: c.Warmup}, reqs)
			})
			r.Close()
			if err != nil {
				return rep, err
			}
			if warm.Err != nil && res.Err == nil {
				res.Err = warm.Err
			}
			cpu.setForeign(res.Calls*perReserve, res.Elapsed)
			run := ScriptRun{Round: round, ReserverOptions: opts, Timing: newTiming(res, sp.OutcomeName, cpu), Created: res.Labels[sp.Created()]}
			run.Other = run.Calls - run.Created
			rep.Runs = append(rep.Runs, run)
			if res.Cut {
				return rep, fmt.Errorf("time cap reached after %d of %d reserves", res.Calls, c.ScriptReserves)
			}
		}
		if err := reset(c.ScriptReserves + slack); err != nil {
			return rep, err
		}
		rb, err := runRedisBenchmark(ctx, c, rdb, prefix, src, sha, perReserve)
		if err != nil {
			return rep, err
		}
		rb.Round = round
		rep.RedisBenchmark = append(rep.RedisBenchmark, rb)
		for i := first; i < len(rep.Runs); i++ {
			rep.Runs[i].Ratio = rep.Runs[i].PerSecond / rb.PerSecond
		}
	}
	var headline []float64 // the first setting's ratio in each round
	for _, run := range rep.Runs {
		if run.ReserverOptions == c.Reserver[0] {
			headline = append(headline, run.Ratio)
		}
	}
	rep.Ratio = median(headline)
	return rep, stopProfile()
}

// sameScript checks that reserve.lua as read from the tree is the script the
// Reserver ran (as checkout embeds it): after a Reserver has run, its SHA1
// must be in the script cache. It then loads it for redis-benchmark's EVALSHA.
func sameScript(ctx context.Context, rdb *redis.Client, src, sha string) error {
	exists, err := rdb.ScriptExists(ctx, sha).Result()
	if err != nil {
		return fmt.Errorf("script exists: %w", err)
	}
	if !exists[0] {
		return fmt.Errorf("reserve.lua read from the tree (sha1 %s) is not the script the Reserver ran: rebuild from this tree", sha)
	}
	got, err := rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		return fmt.Errorf("script load: %w", err)
	}
	if got != sha {
		return fmt.Errorf("script load: sha1 %s, want %s", got, sha)
	}
	return nil
}

// runRedisBenchmark runs reserve.lua through redis-benchmark with the keys
// and arguments the Reserver sends (see reserveCommand), every shopper part
// a __rand_int__, and counts the units it took from the stock key.
func runRedisBenchmark(ctx context.Context, c Config, rdb *redis.Client, prefix, src, sha string, perReserve int) (RedisBenchmarkRun, error) {
	rb := c.RedisBenchmark
	rb.Requests = c.ScriptReserves
	cmd, err := reserveCommand(ctx, c, prefix, sha)
	if err != nil {
		return RedisBenchmarkRun{}, err
	}
	if err := sameScript(ctx, rdb, src, sha); err != nil {
		return RedisBenchmarkRun{}, err
	}
	inventory := cmd[3] // KEYS[1]
	out := RedisBenchmarkRun{Requests: rb.Requests, Clients: rb.Clients, Pipeline: rb.Pipeline}
	before, err := available(ctx, rdb, inventory)
	if err != nil {
		return out, err
	}
	var rerr error
	res, cpu, err := measure(ctx, rdb, func() redisbench.Result {
		var res redisbench.Result
		res, rerr = redisbench.Run(ctx, c.RedisURL, rb, cmd...)
		return res
	})
	if err = errors.Join(rerr, err); err != nil {
		return out, err
	}
	after, err := available(ctx, rdb, inventory)
	if err != nil {
		return out, err
	}
	out.Args = res.Args
	out.PerSecond, out.P50Millis, out.P99Millis = res.PerSecond, res.P50Millis, res.P99Millis
	// redis-benchmark may finish its last pipelines past -n, so a few more
	// units than requests can go.
	out.Created = int(before - after)
	out.Other = max(0, rb.Requests-out.Created)
	out.CPU = cpu
	out.CPU.Bench = res.CPU.Seconds() / res.Elapsed.Seconds()
	out.CPU.setForeign(max(rb.Requests, out.Created)*perReserve, res.Elapsed)
	return out, nil
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

// profile starts a CPU profile of this process into the file for phase,
// if profiles were asked for. The stop function it returns is never nil and
// may be called more than once.
func (c Config) profile(phase string) (stop func() error, err error) {
	if c.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(c.CPUProfile + "." + phase + ".pprof")
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

func available(ctx context.Context, rdb *redis.Client, inventory string) (int64, error) {
	n, err := rdb.HGet(ctx, inventory, "available").Int64()
	if err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return n, nil
}

func runHTTP(ctx context.Context, c Config, rdb *redis.Client, prefix string, perReserve int) (_ *HTTPReport, err error) {
	perRound := c.Warmup + c.HTTPRequests
	total := c.Rounds * perRound
	rep := &HTTPReport{Conns: c.HTTPConns, Requests: c.HTTPRequests, Warmup: c.Warmup, OriginWorkers: c.OriginWork, Goal: HTTPGoal}

	// Tokens and bodies first: signing is the shopper's cost, not the origin's.
	issuer := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{AdmissionTTL: c.Timeout + 10*time.Minute})
	reqs := make([]httpload.Request, total)
	path := "/v1/sales/" + httpSale + "/reserve"
	for i := range reqs {
		account := fmt.Sprintf("a%012d", i)
		tok, _, err := issuer.Admission(httpSale, account, int64(i+1))
		if err != nil {
			return rep, err
		}
		reqs[i] = httpload.Request{
			Method: fasthttp.MethodPost, Path: path, Authorization: []byte("Bearer " + tok),
			ContentType: "application/json",
			Body:        fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k%012d"}`, sku, i),
		}
	}

	schema := strings.TrimSuffix(prefix, ":") // lowercase letters, digits and _
	pgURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, schema)
	if err != nil {
		return rep, err
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, drop(dropCtx))
	}()
	origin, err := originside.StartOrigin(ctx, originside.OriginConfig{
		RedisURL: c.RedisURL, PostgresURL: pgURL, RedisPrefix: prefix + "origin:",
		Sale: httpSale, SKU: sku, Stock: total + slack,
		TokenKeys: tokenstest.KeySet().String(), UserSecret: string(tokenstest.UserSecret()),
		Reserver: c.Reserver[0], Workers: c.OriginWork, Log: c.Log,
	})
	if err != nil {
		return rep, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		err = errors.Join(err, origin.Stop(stopCtx))
	}()
	// The same origin with its reserve journal off, in a schema and key
	// prefix of its own, gets the same requests: what the journal costs.
	var noJournal *originside.Origin
	if c.HTTPNoJournal {
		pgURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, schema+"_nojournal")
		if err != nil {
			return rep, err
		}
		defer func() {
			dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			err = errors.Join(err, drop(dropCtx))
		}()
		noJournal, err = originside.StartOrigin(ctx, originside.OriginConfig{
			RedisURL: c.RedisURL, PostgresURL: pgURL, RedisPrefix: prefix + "nojournal:",
			Sale: httpSale, SKU: sku, Stock: total + slack,
			TokenKeys: tokenstest.KeySet().String(), UserSecret: string(tokenstest.UserSecret()),
			Reserver: c.Reserver[0], Workers: c.OriginWork, NoJournal: true, Log: quiet(c.Log),
		})
		if err != nil {
			return rep, err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			err = errors.Join(err, noJournal.Stop(stopCtx))
		}()
	}
	bare, err := startBare()
	if err != nil {
		return rep, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		err = errors.Join(err, bare.stop(stopCtx))
	}()

	originClient := httpload.New(httpload.Options{Addr: origin.Addr, Conns: c.HTTPConns})
	defer originClient.Close()
	bareClient := httpload.New(httpload.Options{Addr: bare.addr, Conns: c.HTTPConns})
	defer bareClient.Close()
	var noJournalClient *httpload.Client
	if noJournal != nil {
		noJournalClient = httpload.New(httpload.Options{Addr: noJournal.Addr, Conns: c.HTTPConns})
		defer noJournalClient.Close()
	}
	var ratios, journalRatios []float64
	for round := 1; round <= c.Rounds; round++ {
		// Each round sends every server the same slice of requests: an
		// origin must never see a token twice, the bare handler does not
		// care, and each origin has a Redis prefix of its own.
		first := (round - 1) * perRound
		out := HTTPRound{Round: round}
		type target struct {
			client  *httpload.Client
			addr    string
			profile string
			out     *HTTPRun
		}
		targets := []target{{originClient, origin.Addr, "origin", &out.Origin}}
		if noJournal != nil {
			out.OriginNoJournal = &HTTPRun{}
			targets = append(targets, target{noJournalClient, noJournal.Addr, "", out.OriginNoJournal})
		}
		for _, target := range append(targets, target{bareClient, bare.addr, "", &out.Bare}) {
			warm := target.client.Run(ctx, reqs, first, c.Warmup)
			stopProfile := func() error { return nil }
			if target.profile != "" && round == 1 {
				if stopProfile, err = c.profile(target.profile); err != nil {
					return rep, err
				}
			}
			res, cpu, err := measure(ctx, rdb, func() loadgen.Result {
				return target.client.Run(ctx, reqs, first+c.Warmup, c.HTTPRequests)
			})
			err = errors.Join(err, stopProfile())
			if err != nil {
				return rep, err
			}
			own := 0
			if target.out != &out.Bare {
				own = res.Calls * perReserve
			}
			cpu.setForeign(own, res.Elapsed)
			if warm.Err != nil && res.Err == nil {
				res.Err = warm.Err
			}
			*target.out = HTTPRun{Addr: target.addr, Timing: newTiming(res, strconv.Itoa, cpu), Created: res.Labels[fasthttp.StatusCreated]}
			target.out.Other = target.out.Calls - target.out.Created
			if res.Cut {
				rep.Rounds = append(rep.Rounds, out)
				return rep, fmt.Errorf("time cap reached after %d of %d requests to %s", res.Calls, c.HTTPRequests, target.addr)
			}
		}
		out.Ratio = out.Origin.PerSecond / out.Bare.PerSecond
		ratios = append(ratios, out.Ratio)
		if out.OriginNoJournal != nil && out.OriginNoJournal.PerSecond > 0 {
			out.JournalRatio = out.Origin.PerSecond / out.OriginNoJournal.PerSecond
			journalRatios = append(journalRatios, out.JournalRatio)
		}
		rep.Rounds = append(rep.Rounds, out)
	}
	rep.Ratio = median(ratios)
	rep.JournalRatio = median(journalRatios)
	return rep, nil
}

// quiet passes on only the errors of log: the origin with its journal off
// warns about it at start, which the benchmark asked for.
func quiet(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(levelFloor{log.Handler(), slog.LevelError})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(attrs), h.min}
}

func (h levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(name), h.min}
}

// bareBody is what the bare handler answers: the size and shape of the
// origin's 201.
var bareBody = []byte(`{"reservation_id":"r_0123456789abcdef_http","sale_id":"http","sku":"unit","status":"held","expires_at":"2030-01-01T12:10:00.123Z"}`)

type bareServer struct {
	addr string
	stop func(context.Context) error
}

// startBare serves the ceiling: a fasthttp handler that reads the body and
// answers a fixed 201, on a server with the origin's limits and timeouts.
func startBare() (bareServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return bareServer{}, fmt.Errorf("bare server: listen: %w", err)
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if len(ctx.PostBody()) == 0 {
				ctx.SetStatusCode(fasthttp.StatusBadRequest)
				return
			}
			ctx.SetStatusCode(fasthttp.StatusCreated)
			ctx.SetContentType("application/json")
			ctx.SetBody(bareBody)
		},
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    64 << 10,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return bareServer{addr: ln.Addr().String(), stop: func(ctx context.Context) error {
		err := srv.ShutdownWithContext(ctx)
		return errors.Join(err, <-served)
	}}, nil
}
