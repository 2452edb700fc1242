package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The cost of timing the wait for a connection, for docs/BENCHMARKS.md
// ("Stage histograms: their cost"): a whole Forward over an in-memory
// connection with and without the api's observe of its wait, and the slot
// and the observe alone.
//
//	go test -run '^$' -bench . -benchmem ./edge/internal/proxy/
func BenchmarkForward(b *testing.B) {
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "wait_seconds", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"upstream"}).WithLabelValues("origin")
	for _, bc := range []struct {
		name    string
		observe bool
	}{{"unobserved", false}, {"observed", true}} {
		b.Run(bc.name, func(b *testing.B) {
			u, _ := newUpstream(b, Options{MaxConns: 64, Timeout: 5 * time.Second, QueueTimeout: time.Second})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				waited, err := forward(u, "/")
				if err != nil {
					b.Fatal(err)
				}
				if bc.observe {
					wait.Observe(waited.Seconds())
				}
			}
		})
	}
}

// BenchmarkSlot is what every proxied request now pays before it is sent:
// a free slot taken and given back.
func BenchmarkSlot(b *testing.B) {
	u, _ := newUpstream(b, Options{MaxConns: 64, Timeout: 5 * time.Second, QueueTimeout: time.Second})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := u.acquire(); err != nil {
				b.Error(err)
				return
			}
			u.release()
		}
	})
}

// BenchmarkObserveWait is the api's observe of one wait into its cached
// histogram child.
func BenchmarkObserveWait(b *testing.B) {
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "wait_seconds", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"upstream"}).WithLabelValues("origin")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			wait.Observe(0)
		}
	})
}
