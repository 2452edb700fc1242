package crowdsim

import (
	"runtime/metrics"
	"time"
)

// schedLatencies is the Go runtime's histogram of how long the simulator's
// goroutines waited, runnable, before they ran: when its own CPU is short,
// replies sit unread and every latency the simulator records grows by that
// wait, which is not the system's.
const schedLatencies = "/sched/latencies:seconds"

// schedSnapshot reads the histogram so far.
func schedSnapshot() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedWait is the p50 and p99 of the waits between two snapshots (bucket
// upper bounds; the runtime's buckets are fine enough). Zero when the
// runtime does not keep the histogram.
func schedWait(before, after *metrics.Float64Histogram) (p50, p99 time.Duration) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, 0
	}
	counts := make([]uint64, len(after.Counts))
	var total uint64
	for i := range counts {
		counts[i] = after.Counts[i] - before.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return 0, 0
	}
	at := func(q float64) time.Duration {
		want := uint64(q * float64(total))
		var seen uint64
		for i, c := range counts {
			if seen += c; seen > want {
				// Buckets[i+1] is bucket i's upper bound; the last is +Inf.
				upper := after.Buckets[min(i+1, len(after.Buckets)-1)]
				if upper > 1e9 { // +Inf
					upper = after.Buckets[i]
				}
				return time.Duration(upper * float64(time.Second))
			}
		}
		return 0
	}
	return at(0.5), at(0.99)
}

// waitMs is a p50 and p99 in milliseconds.
func waitMs(p50, p99 time.Duration) [2]float64 {
	return [2]float64{float64(p50) / float64(time.Millisecond), float64(p99) / float64(time.Millisecond)}
}
