package api

import (
	"math"
	"testing"
	"time"
)

// quantile interpolates within the bucket the rank falls in, from 0 for
// the first, and answers the highest bound past them all — as
// Prometheus's histogram_quantile does.
func TestQuantile(t *testing.T) {
	bounds := []float64{0.01, 0.1, 1}
	// 50 at or under 10 ms, 40 more under 100 ms, 10 more under 1 s.
	cumulative := []uint64{50, 90, 100}
	tests := []struct {
		q    float64
		want float64
	}{
		{0.25, 0.005},            // rank 25 of the first 50: halfway to 10 ms
		{0.5, 0.01},              // rank 50: the first bucket's top
		{0.7, 0.01 + 0.09*20/40}, // rank 70: 20 of the 40 between 10 and 100 ms
		{0.99, 0.1 + 0.9*9/10},   // rank 99: 9 of the 10 between 100 ms and 1 s
	}
	for _, tc := range tests {
		if got := quantile(tc.q, bounds, cumulative, 100); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	// Two of 102 observations above every bound: the p99 is the last one.
	if got := quantile(0.99, bounds, cumulative, 102); got != 1 {
		t.Errorf("quantile(0.99) past the buckets = %v, want the highest bound 1", got)
	}
}

// The overview measures the origin's latency over the last ten seconds:
// the first reading has nothing to measure from; later ones measure from
// the newest reading at least latencyWindow old, and the list keeps no
// reading older than that one, nor two within a second.
func TestLatencyWindow(t *testing.T) {
	var l latencyReadings
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	at := func(s float64, count uint64) histReading {
		return histReading{at: t0.Add(time.Duration(s * float64(time.Second))), count: count}
	}
	if _, ok := l.since(at(0, 0)); ok {
		t.Fatal("since on the first reading = ok, want nothing to measure from")
	}
	if from, ok := l.since(at(0.5, 5)); !ok || from.count != 0 {
		t.Errorf("since at 0.5 s = %+v %v, want the first reading", from, ok)
	}
	for s := 1.0; s <= 30; s++ {
		from, ok := l.since(at(s, uint64(s)*10))
		if want := max(s-latencyWindow.Seconds(), 0); !ok || from.at != t0.Add(time.Duration(want)*time.Second) {
			t.Fatalf("since at %v s = from %v, want from %v s", s, from.at.Sub(t0), want)
		}
	}
	if n := len(l.list); n > 11 {
		t.Errorf("kept %d readings after 30 s of one a second, want at most 11", n)
	}
	got := latencyOf(at(20, 100), histReading{at: t0.Add(30 * time.Second), count: 150,
		bounds: []float64{0.1, 1}, buckets: []uint64{140, 150}})
	if got.WindowS != 10 || got.Count != 50 || got.P50S == nil || *got.P50S > 0.1 {
		t.Errorf("latencyOf over 10 s = %+v, want 50 answers, p50 within the first bucket", got)
	}
}
