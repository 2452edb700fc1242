package autotune

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/clock"
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
	clk := clock.NewFake(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
	b := &BackEnd{Gatherer: reg, Clock: clk,
		Backlog: func(context.Context, string) (int64, int, time.Time, error) {
			return 70, 12, clk.Now().Add(-3 * time.Second), nil
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

// With the line to read, BackEnd reads what the edges did in the period:
// the places admitted, those still waiting, and whether an edge held
// (held_ms moved, whatever Redis's clock says against the origin's).
func TestBackEndReadsTheLine(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
	line := Line{Present: true, NowServing: 1000, Length: 9000, HeldMs: 5}
	b := &BackEnd{Gatherer: prometheus.NewRegistry(), Clock: clk,
		Backlog: func(context.Context, string) (int64, int, time.Time, error) { return 70, 0, time.Time{}, nil },
		Line:    func(context.Context, string) (Line, error) { return line, nil }}
	read := func() Reading {
		t.Helper()
		r, err := b.Read(context.Background(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); r.Period != 0 || r.Admitted != 0 || r.Waiting != 0 || r.EdgesHeld {
		t.Fatalf("first Read = %+v, want nothing of the line (no period behind it)", r)
	}
	clk.Advance(5 * time.Second)
	line.NowServing, line.Length = 3500, 9100
	if r := read(); r.Period != 5*time.Second || r.Admitted != 2500 || r.Waiting != 5600 || r.EdgesHeld {
		t.Errorf("Read = %+v, want 2500 admitted in 5s, 5600 waiting, no hold", r)
	}
	clk.Advance(5 * time.Second)
	line.HeldMs = 4 // an earlier hold than read before: no new one
	if r := read(); r.Admitted != 0 || r.EdgesHeld {
		t.Errorf("Read with held_ms not after the last = %+v, want no hold", r)
	}
	clk.Advance(5 * time.Second)
	line.HeldMs = 9
	if r := read(); !r.EdgesHeld {
		t.Errorf("Read after held_ms moved = %+v, want EdgesHeld", r)
	}
	// A line rebuilt below what was read (a restore puts the cursor at its
	// ceiling, never lower; this is Redis losing it): nothing admitted.
	clk.Advance(5 * time.Second)
	line.NowServing = 0
	if r := read(); r.Admitted != 0 {
		t.Errorf("Read after the cursor fell = %+v, want 0 admitted", r)
	}
	// Lost, then restored at its ceiling: neither period around the loss
	// is one (the cursor's jump back is no admission).
	clk.Advance(5 * time.Second)
	line = Line{}
	if r := read(); r.Period != 0 || r.Admitted != 0 {
		t.Errorf("Read with the line lost = %+v, want no period", r)
	}
	clk.Advance(5 * time.Second)
	line = Line{Present: true, NowServing: 40_000, Length: 50_000}
	if r := read(); r.Period != 0 || r.Admitted != 0 {
		t.Errorf("Read with the line restored = %+v, want no period", r)
	}
	clk.Advance(5 * time.Second)
	line.NowServing = 41_000
	if r := read(); r.Period != 5*time.Second || r.Admitted != 1000 {
		t.Errorf("Read a period after the restore = %+v, want 1000 admitted in 5s", r)
	}
	// A read long after the last (autotune off meanwhile): a first.
	b.MaxPeriod = 10 * time.Second
	clk.Advance(time.Minute)
	line.NowServing, line.HeldMs = 90_000, 99
	if r := read(); r.Period != 0 || r.Admitted != 0 || r.EdgesHeld {
		t.Errorf("Read a minute after the last = %+v, want no period", r)
	}
}
