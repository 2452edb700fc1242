package crowdreport

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// cdf is a made-up distribution's CDF: n points from lo to hi seconds.
func cdf(lo, hi float64, n int) [][2]float64 {
	out := make([][2]float64, n)
	for i := range out {
		f := float64(i+1) / float64(n)
		out[i] = [2]float64{lo + (hi-lo)*f*f, f}
	}
	return out
}

// timeline is a made-up run: a burst at the start, then a tail, selling out
// at soldOut seconds.
func timeline(secs int, peak float64, soldOut int, stock int64, queue bool) []crowdsim.Second {
	tl := make([]crowdsim.Second, secs)
	for i := range tl {
		t := float64(i)
		s := crowdsim.Second{T: t, Requests: int(peak * math.Exp(-t/10)), P99Ms: 40 + t}
		if i < soldOut {
			s.Available = stock - stock*int64(i)/int64(soldOut)
		}
		if queue {
			s.QueueLength = int64(max(0, 50000-2000*i))
			s.NowServing = int64(min(50000, 2000*i))
			s.CPU = map[string]float64{"edge": 0.8 * math.Exp(-t/10), "redis": 0.1, "an unnamed group": 0.05}
		}
		tl[i] = s
	}
	return tl
}

func scenario() crowdsim.Scenario {
	return crowdsim.Scenario{
		Shoppers: 50000, Stock: 1000, RatePerS: 2000,
		PreQueueS: 60, PreQueueShare: 0.3, BurstS: 10, BurstShare: 0.5, TailS: 120,
		PayProbability: 0.8, ImpatientShare: 0.1, Hammering: crowdsim.HammeringCohort(200), HoldTTLS: 300,
		MaxDurationS: 600, MaxRequests: 5000000,
	}
}

// fabricated is a realistic pair (and a ceiling) in which flashgate meets
// every goal.
func fabricated() Runs {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	fg := crowdsim.Result{
		Mode: "flashgate", Scenario: scenario(), Machine: "AMD EPYC 7B13 × 8, go1.26.8",
		Command: "go run ./bench/crowd -shoppers 50000", Started: start, Wall: 130,
		Stock: 1000, Sold: 800, Held: 0, Oversold: 0,
		Endpoints: []crowdsim.Endpoint{
			{Name: "snapshot", Count: 60000, ByStatus: map[string]int{"200": 60000}, P50Ms: 1.2, P99Ms: 9, MaxMs: 40},
			{Name: "join", Count: 50000, ByStatus: map[string]int{"202": 49800, "429": 200}, P50Ms: 2.5, P99Ms: 30, MaxMs: 120},
			{Name: "poll", Count: 400000, ByStatus: map[string]int{"200": 400000}, P50Ms: 1.1, P99Ms: 12, MaxMs: 90},
			{Name: "reserve", Count: 3000, ByStatus: map[string]int{"201": 1000, "409": 2000}, P50Ms: 4, P99Ms: 45, MaxMs: 150},
		},
		Fates: crowdsim.Fates{
			Reserved: crowdsim.Dist{Count: 1000, P50: 0.4, P90: 0.6, P99: 0.9, Max: 1.1, CDF: cdf(0.05, 1.1, 50)},
			SoldOut:  crowdsim.Dist{Count: 48800, P50: 0.7, P90: 1.2, P99: 1.6, Max: 2.4, CDF: cdf(0.2, 2.4, 50)},
			Paid:     800, Abandoned: 200, Unknown: 200, Answered: 49800, AnswerP99: 1.2,
		},
		Timeline: timeline(130, 40000, 5, 1000, true),
		Requests: 513000, Answered: 513000, Status4xx: 2200, PeakRPS: 40000, AnsweredRPS: 9000,
		BurstP99Ms: 85, BurstWindowS: [2]float64{0, 10},
		SoldOutNotice: crowdsim.Dist{Count: 48000, P50: 0.6, P90: 1.1, P99: 1.4, Max: 1.9},
		LastUnitAt:    4.2,
		SoldOutNews: &crowdsim.SoldOutNews{ZeroAtS: 9.5, ReturnedTailS: 5.3, CDNS: 0.4, ToldBefore: 300,
			Page:     crowdsim.Dist{Count: 47000, P50: 5.5, P90: 5.8, P99: 5.95, Max: 6.2},
			Pipeline: crowdsim.Dist{Count: 47000, P50: 0.5, P90: 0.8, P99: 0.95, Max: 1.2}, CDNLastS: 0.1,
			PageReads: 400000, PageReadsPerS: 1},
		Fairness: crowdsim.Fairness{RankCorrelation: 0.998, Compared: 35000, ObservedCorrelation: 0.97,
			ObservedCompared: 1000, BotUnits: 4, BotShare: 0.004, BotAccounts: 200},
		Ledger: []crowdsim.LedgerSKU{{SKU: "sku-1", Total: 1000,
			Redis: [3]int64{200, 0, 800}, Postgres: [3]int64{200, 0, 800}}},
		InvariantOK: true,
		Notes:       []string{"holds that expired after the run's end were not waited for"},
	}
	naive := crowdsim.Result{
		Mode: "naive", Scenario: scenario(), Machine: fg.Machine, Command: "go run ./bench/crowd -naive",
		Started: start.Add(time.Hour), Wall: 600,
		Stock: 1000, Sold: 1003, Oversold: 3,
		Endpoints: []crowdsim.Endpoint{
			{Name: "buy", Count: 90000, ByStatus: map[string]int{"200": 1003, "409": 20000, "500": 900, "timeout": 68097},
				P50Ms: 9000, P99Ms: 30000, MaxMs: 30000},
		},
		Fates: crowdsim.Fates{
			Reserved: crowdsim.Dist{Count: 1003, P50: 8, P90: 20, P99: 28, Max: 30, CDF: cdf(0.5, 30, 50)},
			SoldOut:  crowdsim.Dist{Count: 20000, P50: 12, P90: 25, P99: 29, Max: 30, CDF: cdf(2, 30, 50)},
			Unknown:  28997, Answered: 21003, AnswerP99: 29,
		},
		Timeline: timeline(600, 3000, 300, 1000, false),
		Requests: 90000, Answered: 21903, Status5xx: 900, Timeouts: 68097, PeakRPS: 3000, AnsweredRPS: 150,
		BurstP99Ms: 30000, BurstWindowS: [2]float64{0, 10}, LastUnitAt: 290,
		Fairness: crowdsim.Fairness{BotUnits: 300, BotShare: 0.3, BotAccounts: 200},
		Notes:    []string{"the client timeout was 30 s"},
	}
	ceiling := fg
	ceiling.Mode, ceiling.Scenario.RatePerS, ceiling.LastUnitAt = "flashgate", 0, 0.08
	ceiling.Notes = nil
	return Runs{Flashgate: fg, Naive: &naive, Ceiling: &ceiling}
}

func verdicts(goals []Goal) map[string]Verdict {
	m := make(map[string]Verdict, len(goals))
	for _, g := range goals {
		m[g.Name] = g.Verdict
	}
	return m
}

func TestGoals(t *testing.T) {
	names := make([]string, 0, 12)
	for _, g := range Goals(fabricated()) {
		names = append(names, g.Name)
	}
	if len(names) != 12 {
		t.Fatalf("Goals() gave %d goals, want 12", len(names))
	}
	oversold, fivexx, burst, notice, rank, answerTime, answeredRate, promise := names[0], names[1], names[2], names[3], names[4], names[5], names[6], names[7]
	botGoals := names[8:] // no run with the defences on: not measured (TestBotGoals judges them)

	tests := []struct {
		name   string
		change func(*Runs)
		want   map[string]Verdict // goals not listed must PASS
	}{
		{"all met", func(*Runs) {}, nil},
		{"5xx", func(r *Runs) { r.Flashgate.Status5xx = 3 }, map[string]Verdict{fivexx: Miss}},
		{"oversold", func(r *Runs) { r.Flashgate.Oversold = 2 }, map[string]Verdict{oversold: Miss}},
		{"slow burst", func(r *Runs) { r.Flashgate.BurstP99Ms = 200 }, map[string]Verdict{burst: Miss}},
		{"no burst window", func(r *Runs) { r.Flashgate.BurstWindowS = [2]float64{} }, map[string]Verdict{burst: NotMeasured}},
		{"late sold-out news", func(r *Runs) { r.Flashgate.SoldOutNews.Pipeline.P99 = 1.01 }, map[string]Verdict{notice: Miss}},
		{"news at exactly 1 s", func(r *Runs) { r.Flashgate.SoldOutNews.Pipeline.P99 = 1 }, nil},
		{"everyone told before the last zero", func(r *Runs) { r.Flashgate.SoldOutNews.Pipeline = crowdsim.Dist{} }, map[string]Verdict{notice: NotMeasured}},
		{"late from the last unit only", func(r *Runs) { r.Flashgate.SoldOutNotice.P99 = 9 }, nil},
		{"did not sell out", func(r *Runs) { r.Flashgate.LastUnitAt = 0 }, map[string]Verdict{notice: NotMeasured}},
		{"no zero in the ledger", func(r *Runs) { r.Flashgate.SoldOutNews = nil }, map[string]Verdict{notice: NotMeasured}},
		{"unfair", func(r *Runs) { r.Flashgate.Fairness.RankCorrelation = 0.95 }, map[string]Verdict{rank: Miss}},
		{"nobody compared", func(r *Runs) { r.Flashgate.Fairness.Compared = 0 }, map[string]Verdict{rank: NotMeasured}},
		{"answer time only 10x", func(r *Runs) { r.Flashgate.Fates.AnswerP99 = 2.9 }, map[string]Verdict{answerTime: Miss, promise: Miss}},
		{"answer p99 over 2 s", func(r *Runs) { r.Flashgate.Fates.AnswerP99 = 2.01; r.Naive.Fates.AnswerP99 = 41 }, map[string]Verdict{promise: Miss}},
		{"answer p99 at exactly 2 s", func(r *Runs) { r.Flashgate.Fates.AnswerP99 = 2; r.Naive.Fates.AnswerP99 = 40 }, nil},
		{"answer rate only 10x", func(r *Runs) { r.Flashgate.AnsweredRPS = 1500 }, map[string]Verdict{answeredRate: Miss}},
		{"naive answered nothing per second", func(r *Runs) { r.Naive.AnsweredRPS = 0 }, nil},
		{"no naive run", func(r *Runs) { r.Naive = nil },
			map[string]Verdict{answerTime: NotMeasured, answeredRate: NotMeasured}},
		{"empty", func(r *Runs) { *r = Runs{} }, map[string]Verdict{
			oversold: NotMeasured, fivexx: NotMeasured, burst: NotMeasured, notice: NotMeasured,
			rank: NotMeasured, answerTime: NotMeasured, answeredRate: NotMeasured, promise: NotMeasured}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := fabricated()
			tt.change(&runs)
			goals := Goals(runs)
			got := verdicts(goals)
			for _, name := range names {
				want, ok := tt.want[name]
				if !ok {
					want = Pass
					if slices.Contains(botGoals, name) {
						want = NotMeasured
					}
				}
				if got[name] != want {
					t.Errorf("goal %q = %s, want %s", name, got[name], want)
				}
			}
			if missed := Missed(goals); missed != (len(tt.want) > 0 && containsMiss(tt.want)) {
				t.Errorf("Missed() = %v", missed)
			}

			// The Markdown's goal table says the same.
			var md bytes.Buffer
			if err := WriteMarkdown(&md, runs, nil); err != nil {
				t.Fatalf("WriteMarkdown: %v", err)
			}
			for _, g := range goals {
				row := goalRow(md.String(), g.Name)
				if !strings.Contains(row, "**"+string(g.Verdict)+"**") || !strings.Contains(row, g.Measured) {
					t.Errorf("goal row = %q, want %s with %q", row, g.Verdict, g.Measured)
				}
			}
		})
	}
}

func containsMiss(m map[string]Verdict) bool {
	for _, v := range m {
		if v == Miss {
			return true
		}
	}
	return false
}

// goalRow is the Markdown table row of the named goal.
func goalRow(md, name string) string {
	for l := range strings.Lines(md) {
		if strings.HasPrefix(l, "| "+name+" |") {
			return l
		}
	}
	return ""
}

func TestGoalFigures(t *testing.T) {
	runs := fabricated()
	runs.Flashgate.Status5xx = 3
	goals := Goals(runs)
	tests := []struct {
		goal int
		want string
	}{
		{1, "3 of 513,000 requests"},
		{2, "85.0 ms over 0.0–10.0 s"},
		{5, "naive 29.00 s (21,003 answered) ÷ flashgate 1.20 s (49,800 answered) = 24.2×"},
		{6, "9,000/s ÷ naive 150/s = 60.0×"},
		{7, "1.20 s (49,800 answered; CPUs not known (no /proc))"},
	}
	for _, tt := range tests {
		if got := goals[tt.goal].Measured; !strings.Contains(got, tt.want) {
			t.Errorf("Goals()[%d].Measured = %q, want it to contain %q", tt.goal, got, tt.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	runs := fabricated()
	runs.Naive.Scenario.Shoppers = 40000
	var b bytes.Buffer
	if err := WriteMarkdown(&b, runs, []string{"timeline.png", "stock.png"}); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	md := b.String()
	for _, want := range []string{
		"# Flash sale: flashgate vs the naive baseline",
		"## Scenario", "## Goals", "## The naive baseline", "## Totals", "## Endpoints",
		"## Fates", "## Fairness", "## Final ledger", "## Charts", "## Notes",
		"oversold 3.",            // the baseline's own figures, in words
		"68,097 timed out",       //
		"**Its scenario differs", // different crowds are called out
		"| flashgate | join | 50,000 | 202: 49,800, 429: 200 | 2.5 | 30.0 | 120.0 |",
		"| naive | bought | 1,003 |", // naive's reservations are buys
		"| flashgate | sku-1 | 1,000 | 200 / 0 / 800 | 200 / 0 / 800 | 0 / 0 / 0 | 0 |",
		"flashgate **OK**, naive **not OK**",
		"| holds granted/s | 238 | 3 | 12,500 |",
		"### Sold-out news", "| flashgate | 5.30 | 0.40 | 5.50 / 5.95 / 6.20 | 0.10 | 0.50 / 0.95 / 1.20 | 300 | 0 | — | 400,000 | 1.00 |",
		"![Requests, 5xx and errors per second; queue length and now serving](timeline.png)",
		"- flashgate: holds that expired", "- naive: the client timeout was 30 s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// A run across two regions gets a table per region, and a line each in
// the summary.
func TestRegions(t *testing.T) {
	runs := fabricated()
	if md := markdown(t, runs); strings.Contains(md, "## Regions") {
		t.Errorf("a one-region run has a Regions section:\n%s", md)
	}
	runs.Flashgate.Regions = []crowdsim.Region{
		{Name: "home", EdgeURL: "http://127.0.0.1:7000", Shoppers: 30000, Answered: 29990,
			Answer: crowdsim.Dist{Count: 30000, P50: 0.012, P90: 0.05, P99: 0.4, Max: 1.2},
			Join:   crowdsim.Dist{Count: 29990, P50: 0.01, P90: 0.04, P99: 0.3, Max: 1.1}},
		{Name: "far", EdgeURL: "http://127.0.0.1:7001", Shoppers: 20000, Answered: 19995,
			Answer:        crowdsim.Dist{Count: 20000, P50: 0.135, P90: 0.2, P99: 0.6, Max: 1.4},
			Reserve:       crowdsim.Dist{Count: 400, P50: 0.13, P90: 0.16, P99: 0.3, Max: 0.5},
			SoldOutNotice: crowdsim.Dist{Count: 50, P50: 0.8, P90: 1.1, P99: 1.5, Max: 1.6}},
	}
	md := markdown(t, runs)
	for _, want := range []string{
		"## Regions",
		"| flashgate, home | answered | 29,990 of 30,000 |",
		"| flashgate, far | answer | 20,000 | 0.14 | 0.20 | 0.60 | 1.40 |",
		"| flashgate, far | reserve | 400 | 0.13 |",
		"| flashgate, home | reserve | 0 | — |",
		"| flashgate, far | sold-out notice | 50 | 0.80 | 1.10 | 1.50 | 1.60 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	s := Summary(runs)
	for _, want := range []string{"region home: 29,990 of 30,000 answered, answer p50 0.012 s", "region far: 19,995 of 20,000 answered, answer p50 0.135 s"} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() lacks %q:\n%s", want, s)
		}
	}
}

func markdown(t *testing.T, runs Runs) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, runs, nil); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	return b.String()
}

func TestSummary(t *testing.T) {
	s := Summary(fabricated())
	if n := strings.Count(s, "\n"); n < 8 || n > 18 {
		t.Errorf("Summary() has %d lines, want 8 to 18:\n%s", n, s)
	}
	for _, want := range []string{"flashgate: 513,000 requests", "naive: 90,000 requests", "ceiling (unthrottled): 12,500 reserves/s", "PASS  5xx = 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() lacks %q:\n%s", want, s)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	full := fabricated()
	alone := fabricated()
	alone.Naive, alone.Ceiling = nil, nil
	tests := []struct {
		name string
		runs Runs
	}{
		{"with naive and ceiling", full},
		{"flashgate alone", alone},
		{"empty", Runs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteJSON(&b, tt.runs); err != nil {
				t.Fatalf("WriteJSON: %v", err)
			}
			if !strings.Contains(b.String(), "\n  \"flashgate\": {") {
				t.Errorf("WriteJSON is not indented:\n%.200s", b.String())
			}
			var got Runs
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.runs) {
				t.Errorf("round trip = %+v, want %+v", got, tt.runs)
			}
		})
	}
}

func TestWriteCharts(t *testing.T) {
	alone := fabricated()
	alone.Naive, alone.Ceiling = nil, nil
	single := fabricated()
	single.Flashgate.Timeline = single.Flashgate.Timeline[:1]
	single.Flashgate.Fates.Reserved.CDF = [][2]float64{{0, 1}}
	single.Flashgate.Fates.SoldOut.CDF = [][2]float64{{math.NaN(), 1}}
	tests := []struct {
		name string
		runs Runs
	}{
		{"with naive and ceiling", fabricated()},
		{"flashgate alone", alone},
		{"one point each", single},
		{"empty", Runs{}},
		{"all empty", Runs{Naive: &crowdsim.Result{}, Ceiling: &crowdsim.Result{}}},
	}
	want := []string{"timeline.png", "latency.png", "fates.png", "stock.png", "cpu.png"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			names, err := WriteCharts(dir, tt.runs)
			if err != nil {
				t.Fatalf("WriteCharts: %v", err)
			}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("WriteCharts = %q, want %q", names, want)
			}
			for _, name := range names {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 1000 {
					t.Errorf("%s: %d bytes starting %q, want a PNG", name, len(data), data[:min(8, len(data))])
				}
			}
		})
	}
}

// A folder that cannot be made (a file is in the way) fails the charts.
func TestWriteChartsBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCharts(filepath.Join(file, "charts"), fabricated()); err == nil {
		t.Error("WriteCharts under a plain file: no error")
	}
}

func TestEmptyRuns(t *testing.T) {
	for _, runs := range []Runs{{}, {Naive: &crowdsim.Result{}, Ceiling: &crowdsim.Result{}}} {
		var b bytes.Buffer
		if err := WriteMarkdown(&b, runs, nil); err != nil {
			t.Errorf("WriteMarkdown: %v", err)
		}
		if strings.Contains(b.String(), "**PASS**") || strings.Contains(b.String(), "NaN") {
			t.Errorf("empty runs: Markdown has a PASS or a NaN:\n%s", b.String())
		}
		if s := Summary(runs); strings.Contains(s, "PASS") {
			t.Errorf("empty runs: Summary has a PASS:\n%s", s)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-1234, "-1,234"}}
	for _, tt := range tests {
		if got := count(tt.n); got != tt.want {
			t.Errorf("count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestPinning(t *testing.T) {
	for _, c := range []struct {
		cpus map[string]string
		want string
	}{
		{map[string]string{"crowd (the simulator)": "1", "edge": "0", "origin": "0", "redis": "0"},
			"pinned: the simulator on CPU 1; edge, origin, redis on CPU 0"},
		{map[string]string{"crowd (the simulator)": "0-1", "edge": "0"},
			"not pinned: the simulator on CPU 0-1 shares it with edge on CPU 0"},
		{map[string]string{"crowd (the simulator)": "2-3", "edge": "0-1", "postgres": "0,1 | 0-3"},
			"not pinned: the simulator on CPU 2-3 shares it with postgres on CPU 0,1 | 0-3; edge on CPU 0-1"},
		{nil, "CPUs not known (no /proc)"},
	} {
		if got := Pinning(&crowdsim.Result{CPUs: c.cpus}); got != c.want {
			t.Errorf("Pinning(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
	niced := &crowdsim.Result{
		CPUs: map[string]string{"crowd (the simulator)": "1", "edge": "0", "redis": "0", "origin": "0", "postgres": "0"},
		Nice: map[string]string{"crowd (the simulator)": "0", "edge": "0", "redis": "0", "origin": "10", "postgres": "10"},
	}
	if got, want := Pinning(niced), "pinned: the simulator on CPU 1; edge, redis on CPU 0; origin, postgres on CPU 0 at nice 10"; got != want {
		t.Errorf("Pinning(niced checkout) = %q, want %q", got, want)
	}
	niced.CPUs["sandbox gateway"] = "1"
	if got, want := Pinning(niced), "pinned: the simulator on CPU 1; edge, redis on CPU 0; origin, postgres on CPU 0 at nice 10; "+
		"outside the stack, sandbox gateway on CPU 1"; got != want {
		t.Errorf("Pinning(gateway with the simulator) = %q, want %q", got, want)
	}
}

func TestCoreLoops(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]float64
		want          string
	}{
		{"two cores, the stack's slowed", map[string]float64{"1": 39.6, "0": 40.4}, map[string]float64{"0": 61.2, "1": 40},
			"a fixed loop took 40 → 61 ms on CPU 0, 40 → 40 ms on CPU 1"},
		{"numeric order", map[string]float64{"10": 41, "2": 42}, nil, "a fixed loop took 42 ms on CPU 2, 41 ms on CPU 10"},
		{"not timed", nil, nil, ""},
	}
	for _, tt := range tests {
		r := &crowdsim.Result{CoreLoopMs: [2]map[string]float64{tt.before, tt.after}}
		if got := CoreLoops(r); got != tt.want {
			t.Errorf("%s: CoreLoops = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The open's table shows the burst's seconds only, each endpoint's
// requests and p99, and the simulator's cores apart from the stack's.
func TestOpenSecondBySecond(t *testing.T) {
	runs := fabricated()
	runs.Flashgate.BurstWindowS = [2]float64{0, 2}
	tl := runs.Flashgate.Timeline
	tl[0].Endpoints = map[string]crowdsim.SecondEndpoint{"join": {Requests: 9000, P99Ms: 450}, "status": {Requests: 3000, P99Ms: 380}}
	tl[0].CPU = map[string]float64{crowdsim.SimulatorCPU: 0.9, "edge": 0.6, "redis": 0.1}
	tl[1].Endpoints = map[string]crowdsim.SecondEndpoint{"reserve": {Requests: 120, P99Ms: 1500}}
	tl[1].CPU = nil
	md := markdown(t, runs)
	for _, want := range []string{
		"## The open, second by second",
		"| second | requests | 5xx | p99 ms | join | status | reserve | order_create | simulator cores | stack cores |",
		"| 0 | 40,000 | 0 | 40 | 9,000 / 450 | 3,000 / 380 | — | — | 0.90 | 0.70 |",
		"| 1 | 36,193 | 0 | 41 | — | — | 120 / 1500 | — | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "| 2 | ") {
		t.Error("the open's table goes past the burst window")
	}
	if t.Failed() {
		t.Log(md)
	}
}
