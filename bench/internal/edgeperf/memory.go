package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/inproc"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// memory fills one sale's line to each of MemSizes in turn through the
// edge's Joiner and, at each size, has MemPolls polls made by shoppers
// spread over the whole line; then it reads the process's heap and the
// line's Redis bytes. Every request carries its own copy of its shopper's
// token, so the benchmark holds the same bytes of requests at every size
// while the polls run (the peak), and none when the heap is read.
//
// It runs first, on a node of its own, so that nothing another node left
// (limiter entries above all) is counted; the baseline is the process with
// the origin and this node started and nothing else.
func (e *env) memory(ctx context.Context, mem *Memory) (err error) {
	c := e.c
	*mem = Memory{Sale: saleLine, Polls: c.MemPolls, HeapGoal: HeapGoal, RedisGoal: RedisGoal}
	n, err := e.startNode(ctx)
	if err != nil {
		return err
	}
	client := loadgen.NewHTTP(loadgen.HTTPOptions{Addr: n.Addr, Conns: c.Conns})
	defer func() {
		client.Close()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, n.Stop(stopCtx))
	}()
	f := newFiller(e.rdb, n.Keys, c.FillWorkers)
	defer f.close()
	starts := n.StartsAt(saleLine)
	usedBefore, err := usedMemory(ctx, e.rdb)
	if err != nil {
		return err
	}
	mem.Baseline = procstat.ReadHeap()

	filled := 0
	for _, size := range c.MemSizes {
		z := MemSize{Shoppers: size}
		res, err := f.join(ctx, saleLine, starts, groupLine, filled, size, nil)
		if err != nil {
			return err
		}
		z.FillSeconds, z.FillPerSecond = res.Elapsed.Seconds(), res.PerSecond()
		filled = size
		if z.Redis, err = lineMemory(ctx, e.rdb, n.Keys, saleLine, size, float64(len(account(groupLine, 0))), meanDigits(size), usedBefore); err != nil {
			return err
		}

		z.DistinctPollers = min(c.MemPolls, size)
		shoppers := make([]int, z.DistinctPollers)
		for k := range shoppers {
			shoppers[k] = int(int64(k) * int64(size) / int64(z.DistinctPollers))
		}
		pos, err := positions(ctx, e.rdb, n.Keys, saleLine, groupLine, shoppers)
		if err != nil {
			return err
		}
		reqs, err := build(c.MemPolls, func(i int) (loadgen.HTTPRequest, error) {
			k := i % len(shoppers)
			tok, _, err := e.issuer.Queue(saleLine, account(groupLine, shoppers[k]), pos[k], false, e.endsAt)
			if err != nil {
				return loadgen.HTTPRequest{}, err
			}
			user, err := e.users.Issue(account(groupLine, shoppers[k]))
			return loadgen.HTTPRequest{Method: fasthttp.MethodGet, Path: "/v1/sales/" + saleLine + "/queue/status",
				Authorization: []byte("Bearer " + tok), UserToken: []byte(user)}, err
		})
		if err != nil {
			return err
		}
		shoppers, pos = nil, nil

		before := n.Counters()
		peak := procstat.SampleHeapPeak()
		res, cpu, err := procstat.Around(ctx, e.rdb, func() loadgen.Result { return client.Run(ctx, reqs, 0, c.MemPolls) })
		z.PeakInuseBytes = peak()
		if err != nil {
			return err
		}
		// The requests are the benchmark's, not the node's: released before
		// the heap is read, so what stays is what the node keeps.
		reqs = nil
		z.Heap = procstat.ReadHeap()
		z.Polls = benchreport.NewTiming(res, strconv.Itoa, cpu)
		z.Node = inproc.CountersBetween(before, n.Counters())
		mem.Sizes = append(mem.Sizes, z)
		if res.Cut {
			return fmt.Errorf("time cap reached after %d of %d polls", res.Calls, c.MemPolls)
		}
		// Each shopper polls MemPolls/size times in turn, so at a high enough
		// rate a short line's shoppers pass the per-account poll limit (3-S
		// as shipped). Those 429 rate_limited answers are the limiter doing
		// its job, and they keep the same limiter entry a 200 keeps; anything
		// else fails the phase.
		limited := res.Labels[fasthttp.StatusTooManyRequests]
		if res.Errors > 0 || res.Labels[fasthttp.StatusOK]+limited != res.Calls || limited != z.Node["rejected rate_limited"] {
			return fmt.Errorf("polls with %d shoppers in line answered %v, %d errors (first: %v)", size, res.Labels, res.Errors, res.Err)
		}
	}
	first, last := mem.Sizes[0], mem.Sizes[len(mem.Sizes)-1]
	mem.HeapRatio = float64(last.Heap.InuseBytes) / float64(first.Heap.InuseBytes)
	if extra := last.DistinctPollers - first.DistinctPollers; extra > 0 {
		mem.PerExtraPoller = (float64(last.Heap.InuseBytes) - float64(first.Heap.InuseBytes)) / float64(extra)
	}
	return nil
}

// meanDigits is the mean length of the decimal numbers 1 to n: the places
// of a line of n shoppers who all joined after the start.
func meanDigits(n int) float64 {
	if n < 1 {
		return 0
	}
	total, lo := 0, 1
	for d := 1; lo <= n; d++ {
		hi := min(lo*10-1, n)
		total += d * (hi - lo + 1)
		lo *= 10
	}
	return float64(total) / float64(n)
}
