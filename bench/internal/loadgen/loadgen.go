// Package loadgen is the benchmarks' load generator: it runs a bounded number
// of calls from a fixed number of goroutines and measures them (how many ran,
// how long they took, what each answered). The reserve and edge benchmarks
// use it for calls in process and, through HTTPClient, for HTTP.
package loadgen

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Func makes call i and returns a label for its answer (an HTTP status, a
// reserve outcome) or an error. One Func belongs to one goroutine, so it may
// keep per-goroutine state such as a request object.
type Func func(ctx context.Context, i int) (label int, err error)

// Options bound one run.
type Options struct {
	// Workers is how many goroutines make calls at once; at least 1.
	Workers int
	// Calls is how many calls the run makes in all, numbered 0 to Calls-1.
	Calls int
	// First is added to every call number, so a warm-up and the timed run
	// can use different slices of pre-generated requests.
	First int
}

// Result is what a run measured.
type Result struct {
	Calls   int           // calls that returned, with or without an error
	Elapsed time.Duration // from the first call's start to the last call's end
	Labels  map[int]int   // count of each label among calls without an error
	Errors  int           // calls that returned an error
	Err     error         // the first error, if any
	P50     time.Duration // median latency of one call
	P99     time.Duration // 99th percentile latency of one call
	Max     time.Duration // slowest call
	Cut     bool          // ctx ended before every call was made
}

// PerSecond is calls per second over the run.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Run makes opts.Calls calls from opts.Workers goroutines, each made by its
// own Func from newFunc, and stops early when ctx ends. Latencies are kept
// in memory, 8 bytes per call.
func Run(ctx context.Context, opts Options, newFunc func() Func) Result {
	workers := max(opts.Workers, 1)
	funcs := make([]Func, workers)
	for w := range funcs {
		funcs[w] = newFunc() // before the clock starts
	}
	latencies := make([]time.Duration, opts.Calls)
	var next atomic.Int64
	type tally struct {
		labels map[int]int
		errors int
		err    error
	}
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := tally{labels: map[int]int{}}
			do := funcs[w]
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= opts.Calls {
					break
				}
				t0 := time.Now()
				label, err := do(ctx, opts.First+i)
				latencies[i] = time.Since(t0)
				if err != nil {
					t.errors++
					if t.err == nil {
						t.err = err
					}
					continue
				}
				t.labels[label]++
			}
			tallies[w] = t
		}()
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start), Labels: map[int]int{}}
	for _, t := range tallies {
		for l, n := range t.labels {
			res.Labels[l] += n
			res.Calls += n
		}
		res.Errors += t.errors
		res.Calls += t.errors
		if res.Err == nil {
			res.Err = t.err
		}
	}
	res.Cut = res.Calls < opts.Calls
	done := latencies[:0]
	for _, d := range latencies {
		if d > 0 {
			done = append(done, d)
		}
	}
	if len(done) > 0 {
		slices.Sort(done)
		res.P50 = done[len(done)/2]
		res.P99 = done[len(done)*99/100]
		res.Max = done[len(done)-1]
	}
	return res
}
