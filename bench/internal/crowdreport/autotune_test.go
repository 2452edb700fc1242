package crowdreport

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// samplesOf are a sample a second from second from on, at the rates
// given, the cursor admitting each second's rate.
func samplesOf(from float64, rates ...float64) []crowdsim.RateSample {
	var out []crowdsim.RateSample
	var admitted int64
	for i, r := range rates {
		out = append(out, crowdsim.RateSample{T: from + float64(i), RatePerS: r, AdmittedTotal: admitted, Autotune: true})
		admitted += int64(r)
	}
	return out
}

func step(t, before, after float64, why string) crowdsim.RateChange {
	return crowdsim.RateChange{T: t, Actor: "autotune: " + why, BeforeRatePerS: before, AfterRatePerS: after, Autotune: true}
}

// tunedRun is an autotune run that climbed from 300/s to 1,500/s, met a
// limit at 10 s and sawed about 1,200/s until its last unit went at 20 s.
func tunedRun() *crowdsim.Result {
	r := &crowdsim.Result{Mode: "flashgate", LastUnitAt: 20}
	r.Scenario.RatePerS = 300
	r.Admission = &crowdsim.Admission{
		Autotune: crowdsim.Autotune{MinRatePerS: 100, MaxRatePerS: 8000},
		// -2 … 22 s: 300 until 2 s, up by 400 every 2 s to 1,500 at 8 s,
		// down to 1,050 at 10 s, up to 1,450 at 14 s, down to 1,015 at 16 s.
		Samples: samplesOf(-2, 300, 300, 300, 300, 700, 700, 1100, 1100, 1500, 1500, 1500, 1500,
			1050, 1050, 1050, 1050, 1450, 1450, 1015, 1015, 1015, 1015, 1015, 1015, 1015),
		Changes: []crowdsim.RateChange{
			{T: -12, Actor: "admin token 0a1b2c3d from 127.0.0.1", BeforeRatePerS: 100, AfterRatePerS: 300, Autotune: true},
			step(2, 300, 700, "healthy"), step(4, 700, 1100, "healthy"), step(6, 1100, 1500, "healthy"),
			step(10, 1500, 1050, "reserve p99 300ms over 250ms"), step(14, 1050, 1450, "healthy"),
			step(16, 1450, 1015, "12 of 900 reserves failed"),
		},
	}
	return r
}

func TestSettledRate(t *testing.T) {
	got, ok := SettledRate(tunedRun())
	// 10–14 s at 1,050, 14–16 s at 1,450, 16–20 s at 1,015: (4,200 + 2,900 + 4,060) / 10.
	want := Settled{RatePerS: 1116, FromS: 10, ToS: 20, Found: true, AdmittedPerS: 1116, PeakRatePerS: 1500, Ups: 4, Downs: 2,
		FirstDownS: 10, FirstDownWhy: "reserve p99 300ms over 250ms"}
	if !ok || got != want {
		t.Errorf("SettledRate = %+v, %v\nwant %+v", got, ok, want)
	}

	climbing := tunedRun()
	climbing.Admission.Changes = climbing.Admission.Changes[:4]
	climbing.Admission.Samples = samplesOf(-2, 300, 300, 300, 300, 700, 700, 1100, 1100, 1500, 1500, 1500, 1500)
	climbing.LastUnitAt = 0 // the stock outlasted the crowd: up to the last sample, 9 s
	got, ok = SettledRate(climbing)
	// The second half of 0–9 s: 4.5–6 s at 1,100, 6–9 s at 1,500.
	if !ok || got.Found || got.FromS != 4.5 || got.ToS != 9 || math.Abs(got.RatePerS-(1.5*1100+3*1500)/4.5) > 1e-9 || got.Downs != 0 || got.Ups != 3 {
		t.Errorf("SettledRate(never decreased) = %+v, %v; want not found, 4.5–9 s at %.1f/s", got, ok, (1.5*1100+3*1500)/4.5)
	}

	for name, r := range map[string]*crowdsim.Result{
		"nil":                     nil,
		"no admission":            {LastUnitAt: 5},
		"no samples":              {LastUnitAt: 5, Admission: &crowdsim.Admission{}},
		"stopped before the open": {Admission: &crowdsim.Admission{Samples: samplesOf(-1, 300)}},
	} {
		if _, ok := SettledRate(r); ok {
			t.Errorf("SettledRate(%s) = ok, want not measured", name)
		}
	}
}

func TestMeanRate(t *testing.T) {
	s := []crowdsim.RateSample{{T: 0, RatePerS: 100}, {T: 2, RatePerS: 300}, {T: 3, RatePerS: 0}}
	tests := []struct {
		from, to, want float64
	}{
		{0, 2, 100},
		{0, 3, (200 + 300) / 3.0},
		{1, 2.5, (100 + 150) / 1.5},
		{-1, 1, 100}, // before the first sample: the first sample's rate
		{2.5, 5, 150 / 2.5},
		{4, 6, 0},
		{2, 2, 0}, // no window
	}
	for _, tt := range tests {
		if got := meanRate(s, tt.from, tt.to); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("meanRate(%g, %g) = %g, want %g", tt.from, tt.to, got, tt.want)
		}
	}
	if got := meanRate(nil, 0, 1); got != 0 {
		t.Errorf("meanRate(no samples) = %g, want 0", got)
	}
}

func TestAdmittedAt(t *testing.T) {
	s := []crowdsim.RateSample{{T: 0, AdmittedTotal: 0}, {T: 1, AdmittedTotal: 100}, {T: 3, AdmittedTotal: 500}}
	for _, tt := range []struct{ t, want float64 }{{-1, 0}, {0, 0}, {0.5, 50}, {1, 100}, {2, 300}, {3, 500}, {9, 500}} {
		if got := admittedAt(s, tt.t); got != tt.want {
			t.Errorf("admittedAt(%g) = %g, want %g", tt.t, got, tt.want)
		}
	}
}

// reserving is a run whose reserves were answered with the statuses
// given, their client p99 and the origin's handler's (0: not read), the
// last unit going at soldOut.
func reserving(byStatus map[string]int, clientP99, originP99, soldOut float64) *crowdsim.Result {
	r := &crowdsim.Result{Mode: "flashgate", LastUnitAt: soldOut, Stock: 1000, Sold: 0, Held: 1000, ReservesPerS: 900,
		Endpoints: []crowdsim.Endpoint{
			{Name: "status", Count: 5000, ByStatus: map[string]int{"200": 4990, "503": 10}, P99Ms: 30},
			{Name: "reserve", ByStatus: byStatus, P99Ms: clientP99},
		}}
	r.Status5xx = 10 + byStatus["503"] + byStatus["500"]
	r.Fates.AnswerP99, r.Fates.Reserved.P50, r.Fates.Reserved.P99, r.Fates.SoldOut.P99 = 0.4, 2, 9, 12
	if originP99 > 0 {
		r.Stages = []crowdsim.Stage{{Path: "reserve", Name: "client: reserve", P99Ms: clientP99},
			{Path: "reserve", Name: "origin: reserve handler", P99Ms: originP99}}
	}
	return r
}

func TestFiguresOf(t *testing.T) {
	calm := reserving(map[string]int{"201": 1000, "409": 400, "503": 5, "timeout": 3}, 180, 40, 21)
	f := FiguresOf(Compared{Kind: KindTooLow, Round: 1, Result: calm}, 1, 1000)
	if f.Label != "too low" || f.ReserveAnswers != 1405 || f.ReservePleaseWait != 5 || f.ReserveOther5xx != 0 || f.PleaseWait != 15 ||
		f.Other5xx != 0 || f.ReserveP99Ms != 180 || f.OriginReserveP99Ms != 40 || f.JudgedP99Ms() != 40 || f.Overloaded ||
		f.SoldOutS != 21 || f.UnitsTaken != 1000 || f.HoldP99S != 9 || f.Settled != nil {
		t.Errorf("FiguresOf(calm) = %+v", f)
	}

	hot := reserving(map[string]int{"201": 1000, "503": 40, "500": 2}, 2400, 0, 30)
	f = FiguresOf(Compared{Kind: KindTooHigh, Round: 2, Result: hot}, 2, 1000)
	if f.Label != "too high (round 2)" || f.ReservePleaseWait != 40 || f.ReserveOther5xx != 2 || f.JudgedP99Ms() != 2400 || !f.Overloaded ||
		f.Why != "4.0 % of reserves answered please_wait or 5xx, reserve p99 2400 ms" {
		t.Errorf("FiguresOf(hot) = %+v; want overloaded on both signs, judged on the client's p99", f)
	}

	tuned := tunedRun()
	f = FiguresOf(Compared{Kind: KindAutotune, Round: 1, Result: tuned}, 1, 1200)
	if f.Settled == nil || f.Settled.RatePerS != 1116 || math.Abs(f.SettledRatio-0.93) > 1e-9 || f.RatePerS != 300 {
		t.Errorf("FiguresOf(autotune) = settled %+v, ratio %g, rate %g; want 1,116/s = 0.93× from 300/s", f.Settled, f.SettledRatio, f.RatePerS)
	}
	if f := FiguresOf(Compared{Kind: KindAutotune, Round: 1}, 1, 1200); f.Label != "autotune" || f.Settled != nil {
		t.Errorf("FiguresOf(no result) = %+v, want the label and nothing else", f)
	}
}

// comparison is a whole comparison: autotune settled at 0.93× a capacity
// of 1,200/s without overload, too high overloaded, too low sold out later.
func comparison() Comparison {
	at := tunedRun()
	at.ReservesPerS = 800
	at.Endpoints = reserving(map[string]int{"201": 1000, "409": 300, "503": 2}, 200, 60, 20).Endpoints
	at.Stages = reserving(nil, 200, 60, 0).Stages
	hi := reserving(map[string]int{"201": 1000, "503": 300}, 3000, 900, 14)
	hi.Scenario.RatePerS = 3600
	lo := reserving(map[string]int{"201": 1000}, 30, 10, 70)
	lo.Scenario.RatePerS = 300
	ceil := &crowdsim.Result{Mode: "ceiling", ReservesPerS: 1200}
	ceil.Scenario.Shoppers, ceil.Scenario.BurstS = 20000, 2
	sc := crowdsim.DefaultScenario()
	sc.Shoppers, sc.Stock, sc.RatePerS = 30000, 24000, 300
	return Comparison{Command: "make bench-autotune", Scenario: sc, Autotune: crowdsim.Autotune{MinRatePerS: 100, MaxRatePerS: 8000},
		TooHighPerS: 3600, TooLowPerS: 300, AutotunePeriod: "2s", CapacityPerS: 1200, Ceiling: ceil,
		Runs: []Compared{{KindAutotune, 1, at}, {KindTooHigh, 1, hi}, {KindTooLow, 1, lo}}, Notes: []string{"A note."}}
}

func TestComparisonGoals(t *testing.T) {
	verdicts := func(c Comparison) string {
		var v []string
		for _, g := range ComparisonGoals(c) {
			v = append(v, string(g.Verdict))
		}
		return strings.Join(v, " ")
	}
	never := comparison()
	never.Runs[0].Result.Admission.Changes = never.Runs[0].Result.Admission.Changes[:4]
	far := comparison()
	far.CapacityPerS = 3000
	safe := comparison()
	safe.Runs[1].Result = reserving(map[string]int{"201": 1000}, 240, 50, 15)
	slowAt, neverLow := comparison(), comparison()
	slowAt.Runs[2].Result.LastUnitAt = 15
	neverLow.Runs[2].Result.LastUnitAt = 0
	hotAt := comparison()
	hotAt.Runs[0].Result.Stages[1].P99Ms = 400
	// The rate too high's cursor admitted 1,000/s, or 600/s: the capacity
	// under the crowd, which autotune's 1,116/s is judged against.
	crowd, crowded := comparison(), comparison()
	crowd.Runs[1].Result.Admission = &crowdsim.Admission{Samples: samplesOf(0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)}
	crowded.Runs[1].Result.Admission = &crowdsim.Admission{Samples: samplesOf(0, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600, 600)}
	tests := []struct {
		name string
		c    Comparison
		want string
	}{
		{"autotune near the capacity, calm; too high overloaded; too low slower", comparison(), "PASS PASS PASS PASS"},
		{"autotune never met a limit", never, "MISS PASS PASS PASS"},
		{"autotune far below the capacity", far, "MISS PASS PASS PASS"},
		{"the stack kept the rate too high safe by itself", safe, "PASS PASS MISS PASS"},
		{"autotune sold out after too low", slowAt, "PASS PASS PASS MISS"},
		{"too low never sold out", neverLow, "PASS PASS PASS PASS"},
		{"autotune overloaded", hotAt, "PASS MISS PASS PASS"},
		{"autotune near the capacity under the crowd", crowd, "PASS PASS PASS PASS"},
		{"autotune far above the capacity under the crowd", crowded, "MISS PASS PASS PASS"},
		{"nothing played", Comparison{}, ""},
		{"only the capacity", Comparison{CapacityPerS: 1000, Runs: []Compared{{KindAutotune, 1, nil}}}, "N/A N/A N/A N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdicts(tt.c); got != tt.want {
				t.Errorf("verdicts = %q, want %q\n%+v", got, tt.want, ComparisonGoals(tt.c))
			}
		})
	}
	g := ComparisonGoals(comparison())
	if want := "admitted 1,116/s over 10.0–20.0 s (from its first decrease) = 0.93× the capacity unthrottled (the ceiling run's holds/s) 1,200/s, " +
		"at a rate set of 1,116/s (0.93×) (goal 0.7–1.3× admitted after a decrease)"; g[0].Measured != want {
		t.Errorf("settled goal measured %q, want %q", g[0].Measured, want)
	}
	// The rate too high's slow start is not its capacity: 300/s for 12 s,
	// then 1,000/s to its last unit at 24 s.
	ramped := comparison()
	ramped.Runs[1].Result.LastUnitAt = 24
	ramped.Runs[1].Result.Admission = &crowdsim.Admission{Samples: samplesOf(0, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300,
		1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)}
	if got, _ := ramped.CapacityAt(1); got != 1000 {
		t.Errorf("CapacityAt with a slow start = %v, want 1000 (from 12 s on)", got)
	}
	if g := ComparisonGoals(crowd); !strings.HasPrefix(g[0].Measured, "admitted 1,116/s over 10.0–20.0 s (from its first decrease) = 1.12× the capacity under this crowd (the rate too high's admitted/s after its slow start) 1,000/s") {
		t.Errorf("settled goal against the crowd's capacity measured %q", g[0].Measured)
	}
	if want := "autotune sold out at 20.0 s, too low at 70.0 s (3.5× as long)"; g[3].Measured != want {
		t.Errorf("sell-out goal measured %q, want %q", g[3].Measured, want)
	}
	two := comparison()
	for _, x := range comparison().Runs {
		x.Round = 2
		two.Runs = append(two.Runs, x)
	}
	if g := ComparisonGoals(two); len(g) != 8 || !strings.HasPrefix(g[4].Name, "round 2: ") {
		t.Errorf("two rounds: %d goals, the fifth %q; want 8, the second round's named", len(g), g[4].Name)
	}
}

// A run whose cursor admitted well below the rate set is named (the edge's
// hold bounded it, not the rate), and the most holds granted per second
// under the crowd is set against the ceiling's capacity and autotune's.
func TestComparisonFindings(t *testing.T) {
	c := comparison()
	hi := c.Runs[1].Result
	hi.LastUnitAt = 10
	hi.Admission = &crowdsim.Admission{Samples: samplesOf(-1, 0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)}
	for i := range hi.Admission.Samples {
		hi.Admission.Samples[i].RatePerS = 3600
	}
	got := ComparisonFindings(c)
	want := []string{
		"too high: the cursor admitted 1,000/s from the open to the end while the rate set averaged 3,600/s (27.8 %): the edge's own hold " +
			"(a tick admits no one while the checkout's quickest requests are slow) bounded admission there, not the rate.",
		"Under this crowd the most holds granted per second was 900/s (too high) — 0.75× the capacity the ceiling run measured; " +
			"autotune granted 800/s, 0.89× that.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ComparisonFindings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := ComparisonFindings(Comparison{}); len(got) != 0 {
		t.Errorf("ComparisonFindings(nothing) = %q, want none", got)
	}
}

func TestDownSignals(t *testing.T) {
	changes := []crowdsim.RateChange{
		step(1, 100, 500, "healthy"), step(3, 500, 350, "Redis p99 100ms over 50ms"), step(5, 350, 245, "reserve p99 300ms over 250ms"),
		step(7, 245, 171.5, "Redis p99 250ms over 50ms"), step(9, 171.5, 120, "order writer 6s behind, over 5s"),
		{T: 10, Actor: "admin token ab from 127.0.0.1", BeforeRatePerS: 120, AfterRatePerS: 50},
	}
	want := []string{"2 × Redis p99", "1 × reserve p99", "1 × order writer lag"}
	if got := downSignals(changes); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("downSignals = %q, want %q", got, want)
	}
}

func TestComparisonReport(t *testing.T) {
	c := comparison()
	var md bytes.Buffer
	if err := WriteComparisonMarkdown(&md, c, ComparisonChart); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- **PASS** — autotune settles near the capacity: admitted 1,116/s",
		"`make bench-autotune`",
		"**Capacity**: 1,200/s — the ceiling run's",
		"FLASHGATE_AUTOTUNE_PERIOD=2s",
		"| autotune | 100–8,000/s from 300/s | 1,068/s | 1,116/s (0.93×) | 1,116/s (0.93×) |",
		"| too high | 3,600/s | — | — |",
		"- Under this crowd the most holds granted per second was 900/s (too high) — 0.75× the capacity the ceiling run measured; autotune granted 800/s, 0.89× that.",
		"the decreases' signals: 1 × reserve p99, 1 × reserves failed.",
		"yes: 23.1 % of reserves answered please_wait or 5xx, reserve p99 900 ms",
		"| 10.0 | 1,500 → 1,050 | autotune: reserve p99 300ms over 250ms |",
		"![the admission rate, the reserve p99 and the units left over time, per run](autotune.png)",
		"- A note.",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("autotune.md lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := WriteComparisonJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Comparison
		Figures []Figures `json:"figures"`
		Goals   []Goal    `json:"goals"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 3 || back.Runs[0].Result.Admission == nil || len(back.Figures) != 3 || back.Figures[0].Settled == nil ||
		len(back.Goals) != 4 || back.CapacityPerS != 1200 || back.Figures[0].AdmittedPerS != 1068 {
		t.Errorf("autotune.json read back: %d runs, %d figures, %d goals, capacity %g", len(back.Runs), len(back.Figures), len(back.Goals), back.CapacityPerS)
	}
	if s := ComparisonSummary(c); !strings.Contains(s, "capacity (admission unthrottled): 1,200 holds granted/s") ||
		!strings.Contains(s, "autotune: rate 300/s → settled 1,116/s, admitting 1,116/s (0.93× the capacity, 4 up, 2 down)") || !strings.Contains(s, "PASS  autotune settles") {
		t.Errorf("summary:\n%s", s)
	}

	for name, c := range map[string]Comparison{"whole": comparison(), "empty": {}, "a run without samples": {Runs: []Compared{{KindTooLow, 1, &crowdsim.Result{}}}}} {
		dir := t.TempDir()
		file, err := WriteComparisonChart(dir, c)
		if err != nil {
			t.Fatalf("%s: WriteComparisonChart = %v", name, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if file != ComparisonChart || !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 1000 {
			t.Errorf("%s: %s is %d bytes starting %q, want a PNG", name, file, len(data), data[:min(8, len(data))])
		}
	}
}
