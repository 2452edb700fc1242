package checkout

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Every reserve is observed once in flashgate_origin_redis_script_seconds,
// with its pipeline's round trip, however the reserves were batched.
func TestReserverObservesEachScriptRun(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	reg := prometheus.NewRegistry()
	r := NewReserver(s, ReserverOptions{Registerer: reg})
	t.Cleanup(r.Close)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := strconv.Itoa(i)
			if _, err := r.Reserve(context.Background(), ReserveRequest{Sale: "s1", SKU: "a", Account: "u" + id, TokenID: "j" + id, IdempotencyKey: "k" + id, HoldTTL: time.Hour}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got uint64
	var sum float64
	series := 0
	for _, mf := range mfs {
		if mf.GetName() != "flashgate_origin_redis_script_seconds" {
			continue
		}
		series = len(mf.GetMetric())
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetName() == "script" && l[0].GetValue() == "reserve" {
				got, sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	if got != n || sum <= 0 {
		t.Errorf("flashgate_origin_redis_script_seconds{script=reserve} after %d reserves = count %d, sum %g s; want count %d, sum > 0", n, got, sum, n)
	}
	if series != 1 {
		t.Errorf("flashgate_origin_redis_script_seconds has %d series, want 1 (script=reserve)", series)
	}
}

// BenchmarkObservePipeline is what a pipeline of 64 reserves now adds: two
// clock reads and an observe per reserve (for docs/BENCHMARKS.md, "Stage
// histograms: their cost"); ns/op is per pipeline.
func BenchmarkObservePipeline(b *testing.B) {
	o := newScriptTimes(prometheus.NewRegistry()).reserve
	b.ReportAllocs()
	for b.Loop() {
		sent := time.Now()
		rt := time.Since(sent).Seconds()
		for range 64 {
			o.Observe(rt)
		}
	}
}
