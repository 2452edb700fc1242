package crowdsim

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSpearman(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		want float64
	}{
		{"same order", []float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{"reversed", []float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		{"monotone, not linear", []float64{1, 2, 3, 4}, []float64{1, 8, 27, 1000}, 1},
		{"one swap of five", []float64{1, 2, 3, 4, 5}, []float64{1, 2, 4, 3, 5}, 0.9},
		{"ties", []float64{1, 1, 2, 2}, []float64{1, 1, 2, 2}, 1},
		{"no variation", []float64{1, 1, 1}, []float64{1, 2, 3}, 0},
		{"too few", []float64{1}, []float64{1}, 0},
	}
	for _, tt := range tests {
		if got := spearman(tt.x, tt.y); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: spearman = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDist(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(100 - i) // 100 … 1, unsorted
	}
	d := dist(v)
	if d.Count != 100 || d.P50 != 50 || d.P90 != 90 || d.P99 != 99 || d.Max != 100 {
		t.Errorf("dist(1..100) = %+v, want p50 50, p90 90, p99 99, max 100", d)
	}
	if len(d.CDF) != 50 || d.CDF[49] != [2]float64{100, 1} {
		t.Errorf("CDF = %v…, want 50 points ending at (100, 1)", d.CDF[len(d.CDF)-1])
	}
	if got := dist(nil); got.Count != 0 || got.CDF != nil {
		t.Errorf("dist(nil) = %+v, want empty", got)
	}
}

func TestCacheSeconds(t *testing.T) {
	for _, c := range []struct {
		cc, directive string
		want          time.Duration
	}{
		{"public, max-age=1, stale-while-revalidate=2", "max-age=", time.Second},
		{"public, max-age=1, stale-while-revalidate=2", "stale-while-revalidate=", 2 * time.Second},
		{"max-age=30", "max-age=", 30 * time.Second},
		{"max-age=30", "stale-while-revalidate=", 0},
		{"no-store", "max-age=", 0},
		{"", "max-age=", 0},
		{"max-age=abc", "max-age=", 0},
	} {
		if got := cacheSeconds([]byte(c.cc), c.directive); got != c.want {
			t.Errorf("cacheSeconds(%q, %q) = %v, want %v", c.cc, c.directive, got, c.want)
		}
	}
}

// The crowd arrives as the scenario says: shares in each window, bots at
// the open, sorted by arrival, the same for the same seed.
func TestCrowdArrivals(t *testing.T) {
	sc := DefaultScenario()
	sc.Shoppers, sc.Hammering.Accounts = 20_000, 100
	s := &sim{cfg: Config{Scenario: sc, Seed: 7}}
	shoppers := s.crowd()
	if len(shoppers) != 20_100 {
		t.Fatalf("crowd() = %d shoppers, want 20100", len(shoppers))
	}
	var pre, burst, tail, bots int
	for i, sh := range shoppers {
		if i > 0 && sh.arrival < shoppers[i-1].arrival {
			t.Fatalf("shoppers not sorted by arrival at %d", i)
		}
		switch {
		case sh.bot:
			bots++
			if sh.arrival < 0 || sh.arrival > 200*time.Millisecond {
				t.Errorf("bot arrives at %v, want within 200 ms of the open", sh.arrival)
			}
		case sh.arrival < 0:
			pre++
			if sh.arrival < -time.Duration(sc.PreQueueS*float64(time.Second)) {
				t.Errorf("pre-queue arrival %v is earlier than the pre-queue window", sh.arrival)
			}
		case sh.arrival < time.Duration(sc.BurstS*float64(time.Second)):
			burst++
		default:
			tail++
		}
	}
	share := func(n int) float64 { return float64(n) / float64(sc.Shoppers) }
	if bots != 100 || math.Abs(share(pre)-sc.PreQueueShare) > 0.02 || math.Abs(share(burst)-sc.BurstShare) > 0.02 {
		t.Errorf("pre %d, burst %d, tail %d, bots %d; want shares %.2f / %.2f and 100 bots", pre, burst, tail, bots, sc.PreQueueShare, sc.BurstShare)
	}
	again := (&sim{cfg: Config{Scenario: sc, Seed: 7}}).crowd()
	for i := range shoppers {
		if again[i].account != shoppers[i].account || again[i].arrival != shoppers[i].arrival {
			t.Fatalf("crowd() differs for the same seed at %d", i)
		}
	}
}

// With a far region the crowd arrives as it does with one: the same
// shoppers at the same times, FarShare of them (never a bot) sent far.
func TestCrowdAcrossTwoRegions(t *testing.T) {
	sc := DefaultScenario()
	sc.Shoppers, sc.Hammering.Accounts = 20_000, 100
	one := (&sim{cfg: Config{Scenario: sc, Seed: 7}}).crowd()
	s := &sim{cfg: Config{Scenario: sc, Seed: 7, FarEdgeURL: "http://127.0.0.1:1", FarShare: 0.3}}
	two := s.crowd()
	far := 0
	for i, sh := range two {
		if sh.account != one[i].account || sh.arrival != one[i].arrival {
			t.Fatalf("shopper %d: %s at %v with two regions, %s at %v with one", i, sh.account, sh.arrival, one[i].account, one[i].arrival)
		}
		if one[i].far {
			t.Fatalf("%s is far with one region", one[i].account)
		}
		if sh.far {
			far++
			if sh.bot {
				t.Errorf("bot %s sent to the far region", sh.account)
			}
		}
	}
	if share := float64(far) / float64(sc.Shoppers); math.Abs(share-0.3) > 0.02 {
		t.Errorf("%d of %d shoppers far (%.3f), want about 0.3", far, sc.Shoppers, share)
	}
	if got := (Config{FarEdgeURL: "http://127.0.0.1:1"}).withDefaults().FarShare; got != 0.5 {
		t.Errorf("FarShare defaults to %v, want 0.5", got)
	}
}

// The CDN asks the edge once per max-age however many pages load the
// snapshot at once, and counts the rest as hits.
func TestCDNCollapsesAndCaches(t *testing.T) {
	var fetches atomic.Int64
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		time.Sleep(20 * time.Millisecond) // a slow edge: misses pile up behind one fetch
		w.Header().Set("Cache-Control", "public, max-age=1")
		_, _ = w.Write([]byte(`{"sold_out":false}`))
	}))
	defer edge.Close()
	c, err := newClient(edge.URL, 64, time.Second, newRecorder(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	cdn := newCDN(c, "/v1/sales/s")
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, _ := cdn.get(); r.status != 200 {
				t.Errorf("get() = %d, want 200", r.status)
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("edge fetches for 200 concurrent loads = %d, want 1", n)
	}
	if h := cdn.hits.Load(); h != 199 {
		t.Errorf("hits = %d, want 199", h)
	}
	time.Sleep(1100 * time.Millisecond) // past max-age
	cdn.get()
	if n := fetches.Load(); n != 2 {
		t.Errorf("edge fetches after max-age = %d, want 2", n)
	}
}

// Past max-age, within stale-while-revalidate, a page gets the stale copy at
// once while one fetch refreshes it in the background, as a CDN serves it:
// a slow edge does not hold up the page. Past both, the page waits for the
// fetch.
func TestCDNServesStaleWhileRevalidating(t *testing.T) {
	var fetches atomic.Int64
	slow := make(chan struct{})
	var release sync.Once
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := fetches.Add(1)
		if n == 2 {
			<-slow // the refresh: held until the test has read the stale copy
		}
		w.Header().Set("Cache-Control", "public, max-age=1, stale-while-revalidate=4")
		_, _ = fmt.Fprintf(w, `{"now_serving":%d}`, n)
	}))
	defer edge.Close()
	defer release.Do(func() { close(slow) }) // before Close: a failed test leaves no handler waiting
	c, err := newClient(edge.URL, 64, 5*time.Second, newRecorder(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	cdn := newCDN(c, "/v1/sales/s")
	if _, f := cdn.get(); f.NowServing != 1 {
		t.Fatalf("first get: now_serving %d, want 1", f.NowServing)
	}
	time.Sleep(1100 * time.Millisecond) // past max-age, within stale-while-revalidate
	start := time.Now()
	for range 10 {
		if _, f := cdn.get(); f.NowServing != 1 {
			t.Fatalf("get while refreshing: now_serving %d, want the stale 1", f.NowServing)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stale gets took %v, want them at once (the refresh is held)", took)
	}
	release.Do(func() { close(slow) })
	cdn.wait()
	if n, r := fetches.Load(), cdn.refreshes.Load(); n != 2 || r != 1 {
		t.Errorf("edge fetches = %d, refreshes %d; want 2 and 1 (one refresh for ten stale loads)", n, r)
	}
	if _, f := cdn.get(); f.NowServing != 2 {
		t.Errorf("get after the refresh: now_serving %d, want 2", f.NowServing)
	}
	if s := cdn.stale.Load(); s != 10 {
		t.Errorf("stale hits = %d, want 10", s)
	}
	time.Sleep(5100 * time.Millisecond) // past both: the page waits for a fetch
	if _, f := cdn.get(); f.NowServing != 3 {
		t.Errorf("get past stale-while-revalidate: now_serving %d, want a fresh 3", f.NowServing)
	}
}

// CoreSpeeds times the loop on every online CPU of the machine, those the
// process may not use included, each a positive time well under a second
// on anything this runs on.
func TestCoreSpeeds(t *testing.T) {
	for _, tt := range []struct {
		list string
		want []int
	}{{"0-1", []int{0, 1}}, {"0", []int{0}}, {"0-2,5,7-8", []int{0, 1, 2, 5, 7, 8}}, {"x,3", []int{3}}, {"", nil}} {
		if got := parseCPUList(tt.list); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseCPUList(%q) = %v, want %v", tt.list, got, tt.want)
		}
	}
	// Every online CPU, from the kernel's list, not runtime.NumCPU (the
	// CPUs the process may use: one, for the pinned simulator).
	got := CoreSpeeds()
	if len(got) != len(onlineCPUs()) || len(got) == 0 {
		t.Fatalf("CoreSpeeds = %v, want one time for each of the online CPUs %v", got, onlineCPUs())
	}
	for cpu, ms := range got {
		if ms <= 0 || ms > 5000 {
			t.Errorf("CPU %s: the loop took %v ms, want (0, 5000]", cpu, ms)
		}
	}
	t.Logf("core loop: %v ms", got)
}
