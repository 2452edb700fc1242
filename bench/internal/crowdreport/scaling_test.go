package crowdreport

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// scalingRun is a run whose processes used cpu (CPU seconds by group) and
// whose edge answered the given requests.
func scalingRun(mode string, shoppers, answered int, cpu map[string]float64) *crowdsim.Result {
	r := &crowdsim.Result{Mode: mode, Requests: answered, Answered: answered, Machine: "test machine", CrowdS: 90, CPU: cpu,
		CPUs: map[string]string{"crowd (the simulator)": "1", "edge": "0", "origin": "0", "postgres": "0"}}
	r.Scenario.Shoppers = shoppers
	return r
}

// scaling is two sizes, 20,000 and 100,000 shoppers, of flashgate runs
// whose origin and Postgres used fgLo and fgHi CPU seconds (split evenly)
// and naive runs whose naive server and Postgres used nvLo and nvHi; a
// negative figure leaves that run out.
func scaling(fgLo, fgHi, nvLo, nvHi float64) Scaling {
	sc := Scaling{Command: "test", Scenario: crowdsim.DefaultScenario()}
	for i, n := range []int{100_000, 20_000} { // out of order: the report sorts
		fg, nv := []float64{fgHi, fgLo}[i], []float64{nvHi, nvLo}[i]
		sz := Size{Shoppers: n}
		if fg >= 0 {
			sz.Flashgate = scalingRun("flashgate", n, n*2, map[string]float64{"origin": fg / 2, "postgres": fg / 2,
				"edge": float64(n) / 4000, "redis": 2, "crowd (the simulator)": float64(n) / 2000})
		}
		if nv >= 0 {
			sz.Naive = scalingRun("naive", n, n, map[string]float64{"naive server": nv / 2, "postgres": nv / 2, "edge": 0.4})
		}
		sc.Sizes = append(sc.Sizes, sz)
	}
	return sc
}

func TestScalingGoal(t *testing.T) {
	tests := []struct {
		name     string
		sc       Scaling
		verdict  Verdict
		measured string
	}{
		{
			name: "the checkout stays flat, naive grows", sc: scaling(20, 24, 10, 50), verdict: Pass,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = 1.20× (goal ≤ 1.3×); naive server + postgres 5.00×",
		},
		{
			name: "exactly at the goal", sc: scaling(10, 13, 10, 50), verdict: Pass,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = 1.30× (goal ≤ 1.3×); naive server + postgres 5.00×",
		},
		{
			name: "the checkout grows with the crowd", sc: scaling(10, 30, 10, 50), verdict: Miss,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = 3.00× (goal ≤ 1.3×); naive server + postgres 5.00×",
		},
		{
			name: "no naive runs", sc: scaling(10, 11, -1, -1), verdict: Pass,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = 1.10× (goal ≤ 1.3×); naive server + postgres not measured",
		},
		{
			name: "the largest flashgate run missing", sc: scaling(10, -1, 10, 50), verdict: NotMeasured,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = — (goal ≤ 1.3×); naive server + postgres 5.00×",
		},
		{
			name: "no CPU at the smallest", sc: scaling(0, 10, 10, 50), verdict: NotMeasured,
			measured: "origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = — (goal ≤ 1.3×); naive server + postgres 5.00×",
		},
		{
			name: "one size", sc: Scaling{Sizes: scaling(10, 11, 1, 1).Sizes[:1]}, verdict: NotMeasured,
			measured: "two crowd sizes at least are needed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := ScalingGoal(tt.sc)
			if g.Verdict != tt.verdict || g.Measured != tt.measured {
				t.Errorf("ScalingGoal = %s %q, want %s %q", g.Verdict, g.Measured, tt.verdict, tt.measured)
			}
		})
	}
}

func TestCPURows(t *testing.T) {
	rows := CPURows(scaling(20, 24, 10, 50), "flashgate")
	byName := map[string]ScalingRow{}
	for _, r := range rows {
		byName[r.Process] = r
	}
	tests := []struct {
		process string
		cpu     []float64
		per1000 []float64
		ratio   float64
	}{
		{"origin + postgres", []float64{20, 24}, []float64{1, 0.24}, 1.2},
		{"origin", []float64{10, 12}, []float64{0.5, 0.12}, 1.2},
		{"edge", []float64{5, 25}, []float64{0.25, 0.25}, 5},
		{"redis", []float64{2, 2}, []float64{0.1, 0.02}, 1},
		{"naive server", []float64{0, 0}, []float64{0, 0}, 0}, // none used at the smallest: no ratio
		// origin, postgres, edge, redis: the simulator left out.
		{"all but the simulator", []float64{27, 51}, []float64{1.35, 0.51}, 51.0 / 27},
		{"crowd (the simulator)", []float64{10, 50}, []float64{0.5, 0.5}, 5},
	}
	for _, tt := range tests {
		r, ok := byName[tt.process]
		if !ok {
			t.Errorf("no row %q in %+v", tt.process, rows)
			continue
		}
		if !near(r.CPUS, tt.cpu) || !near(r.Per1000, tt.per1000) || math.Abs(r.Ratio-tt.ratio) > 1e-9 {
			t.Errorf("row %s = %v s, %v per 1,000, ratio %v; want %v, %v, %v", tt.process, r.CPUS, r.Per1000, r.Ratio, tt.cpu, tt.per1000, tt.ratio)
		}
	}
	if rows[0].Process != "origin + postgres" || CPURows(scaling(20, 24, 10, 50), "naive")[0].Process != "naive server + postgres" {
		t.Errorf("first rows %q, %q; want each design's checkout first", rows[0].Process, CPURows(scaling(20, 24, 10, 50), "naive")[0].Process)
	}
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func TestEdgeMicrosPerAnswered(t *testing.T) {
	r := scalingRun("flashgate", 1000, 50_000, map[string]float64{"edge": 1.5})
	if got := EdgeMicrosPerAnswered(r); math.Abs(got-30) > 1e-9 {
		t.Errorf("EdgeMicrosPerAnswered(1.5 s over 50,000) = %v µs, want 30", got)
	}
	for _, r := range []*crowdsim.Result{nil, {CPU: map[string]float64{"edge": 1}}} {
		if got := EdgeMicrosPerAnswered(r); got != 0 {
			t.Errorf("EdgeMicrosPerAnswered(%v) = %v, want 0", r, got)
		}
	}
}

func TestEdgeMicrosPerAddedRequest(t *testing.T) {
	sc := scaling(20, 24, 10, 50)
	// 20,000: 5 s for 40,000 requests; 100,000: 25 s for 200,000. Make the
	// smallest 7 s: 2 s of it beyond the 125 µs a request.
	sc.Sizes[1].Flashgate.CPU["edge"] = 7
	us, fixed, ok := EdgeMicrosPerAddedRequest(sc)
	if !ok || math.Abs(us-112.5) > 1e-9 || math.Abs(fixed-2.5) > 1e-9 {
		t.Errorf("EdgeMicrosPerAddedRequest = %v µs, %v s, %v; want 112.5, 2.5, true", us, fixed, ok)
	}
	if _, _, ok := EdgeMicrosPerAddedRequest(scaling(20, -1, 10, 50)); ok {
		t.Error("EdgeMicrosPerAddedRequest without the largest run: ok")
	}
}

func TestScalingReport(t *testing.T) {
	sc := scaling(20, 24, 10, 50)
	sc.Notes = []string{"a note of the run"}
	sc.Sizes[1].Origin = []OriginCount{{Kind: "route", Name: "sale", Count: 400}, {Kind: "route", Name: "reserve", Count: 5000},
		{Kind: "route", Name: "healthz", Count: 0}}
	sc.Sizes[0].Origin = []OriginCount{{Kind: "route", Name: "sale", Count: 800}, {Kind: "route", Name: "reserve", Count: 5100},
		{Kind: "postgres op", Name: "order", Count: 7}}
	sc.Sizes[1].Postgres = map[string]PostgresActivity{"flashgate": {Transactions: 1000}, "naive": {Transactions: 20_000}}
	sc.Sizes[0].Postgres = map[string]PostgresActivity{"flashgate": {Transactions: 1100}, "naive": {Transactions: 100_000}}
	var md bytes.Buffer
	if err := WriteScalingMarkdown(&md, sc); err != nil {
		t.Fatal(err)
	}
	t.Logf("scaling.md:\n%s", md.String())
	for _, want := range []string{
		"**PASS** — scaling law: origin + postgres CPU at 100,000 ÷ at 20,000 shoppers = 1.20× (goal ≤ 1.3×)",
		"| process | CPU s at 20,000 | CPU s at 100,000 | per 1,000 at 20,000 | per 1,000 at 100,000 | 100,000 ÷ 20,000 |",
		"| origin + postgres | 20.0 | 24.0 | 1.000 | 0.240 | 1.20× |",
		"| naive server + postgres | 10.0 | 50.0 | 0.500 | 0.500 | 5.00× |",
		"| edge | 5.0 | 25.0 | 0.250 | 0.250 | 5.00× |",
		"| 20,000 | 5.0 s | 40,000 | 125.0 |", // edge µs per answered request
		"bare fasthttp handler",
		"the edge answered 160,000 more requests for 20.0 CPU s more: 125.0 µs per added request",
		"| route | `sale` | 400 | 800 | 2.00× |",
		"| route | `reserve` | 5,000 | 5,100 | 1.02× |",
		"| postgres op | `order` | 0 | 7 | — |",
		"| naive | transactions | 20,000 | 100,000 | 5.00× |",
		"- flashgate: pinned", // Pinning's line
		"- a note of the run",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("scaling.md lacks %q", want)
		}
	}

	if strings.Contains(md.String(), "healthz") {
		t.Error("scaling.md shows a route that saw no request at any size")
	}

	var js bytes.Buffer
	if err := WriteScalingJSON(&js, sc); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Scaling
		Goal Goal                    `json:"goal"`
		CPU  map[string][]ScalingRow `json:"cpu"`
		Edge []float64               `json:"edge_us_per_answered_request"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("scaling.json does not decode: %v", err)
	}
	if back.Goal.Verdict != Pass || len(back.Sizes) != 2 || back.CPU["flashgate"][0].Ratio != 1.2 || !near(back.Edge, []float64{125, 125}) {
		t.Errorf("scaling.json: goal %v, %d sizes, flashgate checkout ratio %v, edge µs %v; want PASS, 2, 1.2, [125 125]",
			back.Goal.Verdict, len(back.Sizes), back.CPU["flashgate"][0].Ratio, back.Edge)
	}
	if got := ScalingSummary(sc); !strings.HasPrefix(got, "PASS  scaling law: origin + postgres CPU at 100,000") {
		t.Errorf("ScalingSummary = %q", got)
	}
}
