package autotune

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BackEnd reads the reserves answered and the Redis scripts run since its
// last read of the sale (none on a first read), their p99 from the
// histograms' buckets, the reserves answered 5xx as failed, and the
// writer's lag from the oldest pending intent.
func TestBackEnd(t *testing.T) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: requestSeconds,
		Buckets: []float64{.01, .1, .25, 1}}, []string{"route", "status"})
	scripts := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: scriptSeconds,
		Buckets: []float64{.001, .01, .1}}, []string{"script"})
	reg.MustRegister(requests, scripts)
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	b := &BackEnd{Gatherer: reg, Clock: func() time.Time { return now },
		Backlog: func(context.Context, string) (int64, int, time.Time, error) {
			return 70, 12, now.Add(-3 * time.Second), nil
		}}
	observe := func(route, status string, seconds float64, n int) {
		for range n {
			requests.WithLabelValues(route, status).Observe(seconds)
		}
	}
	observe("reserve", "201", 0.005, 50) // before the first read: not counted
	first, err := b.Read(context.Background(), "s1")
	if err != nil || first != (Reading{Available: 70, Pending: 12, WriterLag: 3 * time.Second}) {
		t.Fatalf("first Read = %+v, %v; want the books only", first, err)
	}
	observe("reserve", "201", 0.005, 97)
	observe("reserve", "201", 0.2, 1)
	observe("reserve", "503", 0.5, 2)
	observe("join", "202", 2, 40) // another route: not a reserve
	for range 10 {
		scripts.WithLabelValues("reserve").Observe(0.005)
	}
	r, err := b.Read(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	// 100 reserves: 98 at or under 0.25 s, so the 99th is in the 1 s bucket.
	want := Reading{Reserves: 100, Errors: 2, ReserveP99: time.Second, RedisP99: 10 * time.Millisecond,
		Available: 70, Pending: 12, WriterLag: 3 * time.Second}
	if r != want {
		t.Errorf("Read = %+v, want %+v", r, want)
	}
	if r, _ := b.Read(context.Background(), "s1"); r.Reserves != 0 || r.ReserveP99 != 0 {
		t.Errorf("Read with nothing new = %+v, want no reserves", r)
	}
	observe("reserve", "201", 5, 1) // above every bucket
	if r, _ := b.Read(context.Background(), "s1"); r.ReserveP99 != 2*time.Second {
		t.Errorf("p99 above the buckets = %v, want twice the last bound", r.ReserveP99)
	}
}
