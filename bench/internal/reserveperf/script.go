package reserveperf

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/testenv"
)

// scriptRequests returns n reserves of distinct shoppers numbered from
// first: account, token id and idempotency key each as long as what
// redis-benchmark sends once its substitution markers are filled.
func scriptRequests(first, n int) []reservescript.Request {
	reqs := make([]reservescript.Request, n)
	for i := range reqs {
		num := fmt.Sprintf("%012d", first+i)
		reqs[i] = reservescript.Request{
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
	sp := reservescript.New(rdb, prefix, retention)
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
	stopProfile, err := procstat.StartCPUProfile(c.CPUProfile, "script")
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
			_, res, cpu, err := timeReserver(ctx, c, rdb, sp.Reserver(opts), reqs, c.ScriptReserves, perReserve)
			if err != nil {
				return rep, err
			}
			run := ScriptRun{Round: round, ReserverOptions: opts, Timing: benchreport.NewTiming(res, reservescript.OutcomeName, cpu), Created: res.Labels[reservescript.Created]}
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
	rep.Ratio = benchreport.Median(headline)
	return rep, stopProfile()
}

// timeReserver makes c.Warmup untimed reserves with r, then n timed ones
// from reqs[c.Warmup:], each from c.ScriptWorkers goroutines, and closes r.
// The timed run's first error is the warm-up's when it has none of its own;
// Redis's foreign commands are those beyond perReserve per reserve.
func timeReserver(ctx context.Context, c Config, rdb *redis.Client, r *reservescript.Reserver, reqs []reservescript.Request, n, perReserve int) (warm, res loadgen.Result, cpu procstat.Usage, err error) {
	defer r.Close()
	warm = r.Run(ctx, loadgen.Options{Workers: c.ScriptWorkers, Calls: c.Warmup}, reqs)
	res, cpu, err = procstat.Around(ctx, rdb, func() loadgen.Result {
		return r.Run(ctx, loadgen.Options{Workers: c.ScriptWorkers, Calls: n, First: c.Warmup}, reqs)
	})
	if err != nil {
		return warm, res, cpu, err
	}
	if warm.Err != nil && res.Err == nil {
		res.Err = warm.Err
	}
	cpu.SetForeign(res.Calls*perReserve, res.Elapsed)
	return warm, res, cpu, nil
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
	res, cpu, err := procstat.Around(ctx, rdb, func() redisBenchmarkResult {
		var res redisBenchmarkResult
		res, rerr = execRedisBenchmark(ctx, c.RedisURL, rb, cmd...)
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
	out.CPU.Process = res.CPU.Seconds() / res.Elapsed.Seconds()
	out.CPU.SetForeign(max(rb.Requests, out.Created)*perReserve, res.Elapsed)
	return out, nil
}

func available(ctx context.Context, rdb *redis.Client, inventory string) (int64, error) {
	n, err := rdb.HGet(ctx, inventory, "available").Int64()
	if err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return n, nil
}
