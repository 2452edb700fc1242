package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/inproc"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// target is one server a path's requests go to.
type target struct {
	server string // "bare", "origin" or "edge"
	client *loadgen.HTTPClient
	addr   string
	reqs   []loadgen.HTTPRequest
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
				if stopProfile, err = procstat.StartCPUProfile(e.c.CPUProfile, name); err != nil {
					return err
				}
			}
			var before map[string]float64
			if t.server == "edge" {
				before = e.node.Counters()
			}
			res, cpu, err := procstat.Around(ctx, e.rdb, func() loadgen.Result {
				return t.client.Run(ctx, t.reqs, first+e.c.Warmup, n)
			})
			if err = errors.Join(err, stopProfile()); err != nil {
				return err
			}
			run := ServerRun{Server: t.server, Addr: t.addr, Timing: benchreport.NewTiming(res, strconv.Itoa, cpu)}
			if res.Calls > 0 {
				run.ProcessMicros = cpu.Process * res.Elapsed.Seconds() / float64(res.Calls) * 1e6
				run.RedisMicros = cpu.Redis * res.Elapsed.Seconds() / float64(res.Calls) * 1e6
			}
			if warm.Err != nil && res.Err == nil {
				run.FirstError = "warm-up: " + warm.Err.Error()
			}
			if t.server == "edge" {
				run.Node = inproc.CountersBetween(before, e.node.Counters())
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
	p.Ratio, p.CPUBoundRatio = benchreport.Median(ratios), benchreport.Median(cpuRatios)
	p.OriginRatio, p.EdgeOverOrigin = benchreport.Median(originRatios), benchreport.Median(overOrigin)
	return nil
}

// pair is the usual target list: the bare handler, then the edge, both
// sent the same requests.
func (e *env) pair(reqs []loadgen.HTTPRequest) []target {
	return []target{
		{server: "bare", client: e.bareClient, addr: e.bare.addr, reqs: reqs},
		{server: "edge", client: e.edgeClient, addr: e.node.Addr, reqs: reqs},
	}
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
