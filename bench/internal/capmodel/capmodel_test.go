package capmodel

import (
	"math"
	"strings"
	"testing"
)

// Round figures, so that every expectation below can be worked by hand.
func testCosts() Costs {
	return Costs{
		EdgeJoinMicros: 20, EdgePollMicros: 10, EdgeSoldOutMicros: 5, EdgeProxiedMicros: 100,
		RedisJoinMicros: 5, RedisReserveMicros: 50, RedisBytesPerShopper: 50, RedisBestJoinsPerS: 200_000,
		OriginReserveMicros: 100, PostgresReserveMicros: 20, OriginUnitMicros: 1000, PostgresUnitMicros: 2000,
		ProxiedPerUnit: 4, WriterIntentsPerS: 10_000, IntentsPerUnit: 3, JoinsPerArrival: 1, CDNFetchesPerCachePerS: 0.5,
	}
}

func testPage() Page {
	return Page{SnapshotPeriodS: 1, FilesPerArrival: 4, MinPollS: 2, MaxPollS: 60, FarPollMinS: 45}
}

func testPlan() Plan {
	return Plan{Headroom: 0.5, EdgeCoresPerNode: 0.25, OriginCoresPerNode: 2, MinNodes: 2, CDNCaches: 100}
}

// 600,000 shoppers in 30 s: 20,000 arrivals a second; 3,000 units over
// the 30 s: 100 admissions a second.
func testSeed() Seed { return Seed{Name: "test", Shoppers: 600_000, WindowS: 30, Stock: 3_000} }

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, math.Abs(want)) }

func TestComputeHandWorked(t *testing.T) {
	f, err := Compute(testCosts(), testPage(), testPlan(), testSeed())
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	// The front of the line: 100/s × (2 + 2 ln(60/2)) polls, plus one
	// admitted poll per admission: 100 × (3 + 2 × 3.4011973817) = 980.2394763.
	front := 980.2394763324312
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"arrivals/s", f.ArrivalsPerS, 20_000},
		{"admissions/s", f.AdmissionPerS, 100},
		// The window (30 s) is shorter than the first far-back poll (45 s):
		// no far-back polls yet, only the front.
		{"arrivals: joins/s", f.Arrivals.JoinsPerS, 20_000},
		{"arrivals: polls/s", f.Arrivals.PollsPerS, front},
		{"arrivals: proxied/s", f.Arrivals.ProxiedPerS, 400}, // 100 × 4
		{"arrivals: fetches/s", f.Arrivals.FetchesPerS, 50},  // 100 caches × 0.5
		{"arrivals: requests/s", f.Arrivals.RequestsPerS, 20_000 + front + 400 + 50},
		// (20,000 × 20 + (980.24 + 50) × 10 + 400 × 100) µs = 0.4503 cores
		{"arrivals: cores", f.Arrivals.Cores, 0.4503023947633243},
		// The whole line far back: 600,000 × ln(60/45)/15 = 11,507.28, plus the front.
		{"line: polls/s", f.Line.PollsPerS, 11_507.282898071 + front},
		{"line: cores", f.Line.Cores, 0.16537522374403663},
		{"peak cores", f.Peak.Cores, f.Arrivals.Cores},
		// CDN: 600,000 snapshot loads + 80,000 page files − 50 fetches, of
		// those plus the edge's 21,430.24 requests.
		{"snapshot loads/s", f.SnapshotLoadsPerS, 600_000},
		{"page files/s", f.PageFilesPerS, 80_000},
		{"CDN share", f.CDNShare, 679_950 / (679_950 + 20_000 + front + 450)},
		// Redis: 20,000 joins × 5 µs = 0.1; 100 reserves × 50 µs = 0.005.
		{"line Redis cores", f.LineRedisCores, 0.1},
		{"stock Redis cores", f.StockRedisCores, 0.005},
		{"join spread s", f.JoinSpreadS, 6}, // 600,000 × 5 µs ÷ 0.5
		{"Redis bytes", f.RedisBytes, 30e6},
		{"origin cores low", f.OriginCoresLow, 0.01}, // 100 × 100 µs
		{"origin cores high", f.OriginCoresHigh, 0.1},
		{"Postgres cores low", f.PostgresCoresLow, 0.004}, // 100 × 20 µs ÷ 0.5
		{"Postgres cores high", f.PostgresCoresHigh, 0.4},
		{"best rate use", f.BestRateUse, 0.1},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("Compute: %s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if f.Peak.Name != "arrivals" {
		t.Errorf("Compute: peak phase = %q, want arrivals", f.Peak.Name)
	}
	// 0.4503 cores on nodes of 0.25 cores at 0.5: 3.6 → 4.
	if f.EdgeNodes != 4 || f.OriginNodesLow != 2 || f.OriginNodesHigh != 2 || f.RedisPrimaries != 1 || !f.LineFits {
		t.Errorf("Compute: edge %d, origin %d–%d, Redis %d (line fits %v); want 4, 2–2, 1 (true)",
			f.EdgeNodes, f.OriginNodesLow, f.OriginNodesHigh, f.RedisPrimaries, f.LineFits)
	}
	// Limits at 0.5: line 100,000 joins/s (use 0.2), stock 10,000
	// reserves/s (0.01), writer 5,000 intents/s against 300 (0.06).
	wantLimits := []Limit{
		{Demand: 20_000, Capacity: 100_000}, {Demand: 100, Capacity: 10_000}, {Demand: 300, Capacity: 5_000},
	}
	for i, w := range wantLimits {
		if l := f.Limits[i]; !near(l.Demand, w.Demand) || !near(l.Capacity, w.Capacity) {
			t.Errorf("Compute: limit %d (%s) = %v of %v, want %v of %v", i, l.Resource, l.Demand, l.Capacity, w.Demand, w.Capacity)
		}
	}
	if f.First.Resource != f.Limits[0].Resource || !near(f.First.Use(), 0.2) {
		t.Errorf("Compute: first to stop %q at %v, want the line slot at 0.2", f.First.Resource, f.First.Use())
	}
}

func TestComputeRedisAndFirstLimit(t *testing.T) {
	for _, tc := range []struct {
		name          string
		change        func(c *Costs)
		wantFits      bool
		wantPrimaries int
		wantFirst     int // index in Limits
		wantUse       float64
	}{
		{
			// 20,000 joins × 50 µs = 1.0 thread, twice the 0.5 planned: two
			// primaries were the line split, one for the stock.
			name: "line does not fit", change: func(c *Costs) { c.RedisJoinMicros = 50 },
			wantFits: false, wantPrimaries: 3, wantFirst: 0, wantUse: 2,
		},
		{
			// line 0.4 and stock 100 × 2,000 µs = 0.2: each fits, not both.
			name: "slots on two primaries", change: func(c *Costs) { c.RedisJoinMicros = 20; c.RedisReserveMicros = 2000 },
			wantFits: true, wantPrimaries: 2, wantFirst: 0, wantUse: 0.8,
		},
		{
			// 300 intents/s against 0.5 × 500.
			name: "the order writer first", change: func(c *Costs) { c.WriterIntentsPerS = 500 },
			wantFits: true, wantPrimaries: 1, wantFirst: 2, wantUse: 1.2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCosts()
			tc.change(&c)
			f, err := Compute(c, testPage(), testPlan(), testSeed())
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if f.LineFits != tc.wantFits || f.RedisPrimaries != tc.wantPrimaries {
				t.Errorf("Compute: line fits %v, primaries %d; want %v, %d", f.LineFits, f.RedisPrimaries, tc.wantFits, tc.wantPrimaries)
			}
			if f.First.Resource != f.Limits[tc.wantFirst].Resource || !near(f.First.Use(), tc.wantUse) {
				t.Errorf("Compute: first to stop %q at %v, want %q at %v", f.First.Resource, f.First.Use(), f.Limits[tc.wantFirst].Resource, tc.wantUse)
			}
		})
	}
}

func TestComputeAdmissionSetAndLinePeak(t *testing.T) {
	s := testSeed()
	s.AdmissionPerS = 50
	s.WindowS = 120 // 5,000 arrivals a second, past the longest poll interval
	c := testCosts()
	c.EdgePollMicros = 30 // a poll dearer than a join: the line's polls then outweigh the arrivals' joins
	f, err := Compute(c, testPage(), testPlan(), s)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	if f.AdmissionPerS != 50 {
		t.Errorf("Compute: admissions/s = %v, want the seed's 50", f.AdmissionPerS)
	}
	// Arrivals: 5,000 × farShare(120) = 6,507.28 far-back polls; the line:
	// 600,000 × ln(60/45)/15 = 11,507.28. Past the longest interval the
	// difference is the arrivals a second: 5,000.
	front := 50*(2+2*math.Log(30)) + 50
	if got, want := f.Arrivals.PollsPerS-front, 5_000*1.3014565796142468; !near(got, want) {
		t.Errorf("Compute: arrival-phase far-back polls = %v, want %v", got, want)
	}
	if got := f.Line.PollsPerS - f.Arrivals.PollsPerS; !near(got, 5_000) {
		t.Errorf("Compute: line − arrival polls = %v, want 5,000", got)
	}
	// Cores differ by 5,000 × (30 − 20) µs = 0.05 in the line's favour.
	if f.Peak.Name != "line" || !near(f.Line.Cores-f.Arrivals.Cores, 0.05) {
		t.Errorf("Compute: peak %q, line − arrivals = %v cores; want line, 0.05", f.Peak.Name, f.Line.Cores-f.Arrivals.Cores)
	}
}

func TestPollShares(t *testing.T) {
	p := testPage()
	for _, tc := range []struct {
		t, want float64
	}{
		{30, 0},                   // nobody has waited 45 s yet
		{45, 0},                   // the first far-back poll is due only now
		{60, 0.1507282898071234},  // (60 ln(60/45) − 15) ÷ 15
		{120, 1.3014565796142468}, // (120 ln(60/45) − 15) ÷ 15
	} {
		if got := p.farShare(tc.t); !near(got, tc.want) {
			t.Errorf("farShare(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	// Past the longest interval every shopper polls: t × E[1/P] − 1.
	if got, want := p.farShare(300), 300*p.farMeanRate()-1; !near(got, want) {
		t.Errorf("farShare(300) = %v, want %v", got, want)
	}
	if got, want := p.farMeanRate(), math.Log(60.0/45)/15; !near(got, want) {
		t.Errorf("farMeanRate = %v, want ln(60/45)/15 = %v", got, want)
	}
	if got, want := p.frontShare(), 2+2*math.Log(30); !near(got, want) {
		t.Errorf("frontShare = %v, want 2 + 2 ln 30 = %v", got, want)
	}
}

func TestNodes(t *testing.T) {
	for _, tc := range []struct {
		cores, perNode, headroom float64
		least, want              int
	}{
		{2.4, 2, 0.6, 1, 2},  // exactly 2 nodes at 60 %
		{2.41, 2, 0.6, 1, 3}, // a little more takes a third
		{0.1, 2, 0.6, 2, 2},  // the floor
		{0, 2, 0.6, 1, 1},
	} {
		if got := Nodes(tc.cores, tc.perNode, tc.headroom, tc.least); got != tc.want {
			t.Errorf("Nodes(%v, %v, %v, %d) = %d, want %d", tc.cores, tc.perNode, tc.headroom, tc.least, got, tc.want)
		}
	}
	if got := PerNode(20, 2, 0.5); got != 50_000 {
		t.Errorf("PerNode(20 µs, 2 cores, 0.5) = %v, want 50,000", got)
	}
}

func TestChecks(t *testing.T) {
	c := testCosts()
	// 1,000 joins × 20 µs + 2,000 other requests × 10 µs = 0.04 s.
	ch := EdgeCheck{AddedRequests: 3_000, AddedJoins: 1_000, AddedEdgeCPUS: 0.08}
	if got := c.Predict(ch); !near(got, 0.04) {
		t.Errorf("Predict(%+v) = %v, want 0.04", ch, got)
	}
	if got := Error(c.Predict(ch), ch.AddedEdgeCPUS); !near(got, -0.5) {
		t.Errorf("Error(0.04, 0.08) = %v, want -0.5", got)
	}
	// 3,000 units × (1,000 + 2,000) µs = 9 s.
	if got := c.PredictCheckout(CheckoutCheck{Stock: 3_000}); !near(got, 9) {
		t.Errorf("PredictCheckout(3,000 units) = %v, want 9", got)
	}
}

func TestValidate(t *testing.T) {
	c := testCosts()
	c.RedisJoinMicros = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Redis join µs") {
		t.Errorf("Costs.Validate() with no Redis join cost = %v, want an error naming it", err)
	}
	p := testPage()
	p.FarPollMinS = 70
	if err := p.Validate(); err == nil {
		t.Error("Page.Validate() with the far-back interval past the cap = nil, want an error")
	}
	pl := testPlan()
	pl.Headroom = 1.5
	if err := pl.Validate(); err == nil {
		t.Error("Plan.Validate() with headroom 1.5 = nil, want an error")
	}
	if _, err := Compute(testCosts(), testPage(), testPlan(), Seed{Name: "empty"}); err == nil {
		t.Error("Compute with an empty seed = nil error, want one")
	}
}
