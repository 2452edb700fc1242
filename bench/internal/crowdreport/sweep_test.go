package crowdreport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// stepRun is a run that answered in p99 seconds with the given 5xx,
// oversold units and simulator lag.
func stepRun(mode string, p99 float64, s5xx, oversold int, lag float64) *crowdsim.Result {
	r := &crowdsim.Result{Mode: mode, Requests: 1000, Answered: 990, Status5xx: s5xx, Oversold: oversold,
		Machine: "test machine", CrowdS: 4, CPU: map[string]float64{"edge": 1.5, "postgres": 0.5},
		CPUs: map[string]string{"crowd (the simulator)": "1", "edge": "0", "postgres": "0"}}
	r.Fates.Answered, r.Fates.AnswerP99 = 900, p99
	r.StartLag.P99 = lag
	r.Scenario.Shoppers = 900
	return r
}

var held = func(mode string) *crowdsim.Result { return stepRun(mode, 0.05, 0, 0, 0.01) }

func TestJudge(t *testing.T) {
	tests := []struct {
		name          string
		r             *crowdsim.Result
		held, trusted bool
		why           string
	}{
		{"kept", held("flashgate"), true, true, ""},
		{"at the promise exactly", stepRun("naive", 2, 0, 0, 0.1), true, true, ""},
		{"slow", stepRun("naive", 2.5, 0, 0, 0.01), false, true, "p99 answer 2.50 s > 2 s"},
		{"5xx", stepRun("flashgate", 0.1, 3, 0, 0.01), false, true, "3 5xx"},
		{"oversold", stepRun("naive", 0.1, 0, 1, 0.01), false, true, "1 oversold"},
		{"the simulator lagged", stepRun("flashgate", 0.1, 0, 0, 0.4), false, false, "simulator lagged (start p99 0.40 s > 0.1 s)"},
		{"lagged and slow", stepRun("naive", 9, 0, 0, 0.4), false, false, "simulator lagged (start p99 0.40 s > 0.1 s); p99 answer 9.00 s > 2 s"},
		{"no run", nil, false, false, "no run"},
		{"nobody answered", &crowdsim.Result{Requests: 10}, false, false, "no shopper answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(tt.r)
			if v.Held != tt.held || v.Trusted != tt.trusted || v.Why != tt.why {
				t.Errorf("Judge = %+v, want held %v, trusted %v, why %q", v, tt.held, tt.trusted, tt.why)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	slow := func(mode string) *crowdsim.Result { return stepRun(mode, 5, 0, 0, 0.01) }
	lagged := func(mode string) *crowdsim.Result { return stepRun(mode, 0.05, 0, 0, 0.5) }
	sweep := func(fg, nv []*crowdsim.Result) Sweep {
		var sw Sweep
		for i, r := range []float64{500, 1000, 2000, 4000, 8000, 16000, 32000}[:len(fg)] {
			sw.Steps = append(sw.Steps, Step{RatePerS: r, Flashgate: fg[i], Naive: nv[i]})
		}
		return sw
	}
	f, n := "flashgate", "naive"
	tests := []struct {
		name       string
		sw         Sweep
		fg, nv     string // Capacity.String()
		fgMissedAt float64
		verdict    Verdict
		measured   string
	}{
		{
			name: "flashgate holds at every rate, naive at the lowest: at least 16×, not known whether 20×",
			sw: sweep([]*crowdsim.Result{held(f), held(f), held(f), held(f), held(f)},
				[]*crowdsim.Result{held(n), slow(n), slow(n), slow(n), slow(n)}),
			fg: "≥ 8,000/s", nv: "500/s", verdict: NotMeasured,
			measured: "flashgate ≥ 8,000/s, naive 500/s = ≥ 16.0× (goal ≥ 20×)",
		},
		{
			name: "the sweep went on until flashgate missed: a ratio, not a bound",
			sw: sweep([]*crowdsim.Result{held(f), held(f), held(f), held(f), held(f), held(f), slow(f)},
				[]*crowdsim.Result{held(n), slow(n), nil, nil, nil, nil, nil}),
			fg: "16,000/s", nv: "500/s", fgMissedAt: 32000, verdict: Pass,
			measured: "flashgate 16,000/s, naive 500/s = 32.0× (goal ≥ 20×)",
		},
		{
			name: "a hole in the middle: capacity stops below it",
			sw: sweep([]*crowdsim.Result{held(f), slow(f), held(f), held(f)},
				[]*crowdsim.Result{held(n), slow(n), slow(n), slow(n)}),
			fg: "500/s", nv: "500/s", fgMissedAt: 1000, verdict: Miss,
			measured: "flashgate 500/s, naive 500/s = 1.0× (goal ≥ 20×)",
		},
		{
			name: "a lagged step does not count, even when its figures are good: the capacity is a lower bound",
			sw: sweep([]*crowdsim.Result{held(f), held(f), lagged(f), held(f)},
				[]*crowdsim.Result{held(n), held(n), slow(n), slow(n)}),
			fg: "≥ 1,000/s", nv: "1,000/s", fgMissedAt: 2000, verdict: NotMeasured,
			measured: "flashgate ≥ 1,000/s, naive 1,000/s = ≥ 1.0× (goal ≥ 20×)",
		},
		{
			name: "flashgate misses at a rate the simulator kept up with",
			sw: sweep([]*crowdsim.Result{held(f), held(f), held(f), slow(f)},
				[]*crowdsim.Result{held(n), slow(n), slow(n), slow(n)}),
			fg: "2,000/s", nv: "500/s", fgMissedAt: 4000, verdict: Miss,
			measured: "flashgate 2,000/s, naive 500/s = 4.0× (goal ≥ 20×)",
		},
		{
			name: "naive stopped by a lagged step: the ratio is an upper bound",
			sw: sweep([]*crowdsim.Result{held(f), held(f), slow(f)},
				[]*crowdsim.Result{held(n), lagged(n), slow(n)}),
			fg: "1,000/s", nv: "≥ 500/s", fgMissedAt: 2000, verdict: Miss,
			measured: "flashgate 1,000/s, naive ≥ 500/s = ≤ 2.0× (goal ≥ 20×)",
		},
		{
			name: "the lowest step lagged",
			sw: sweep([]*crowdsim.Result{lagged(f), held(f)},
				[]*crowdsim.Result{held(n), slow(n)}),
			fg: "unknown (the lowest rate was not trusted)", nv: "500/s", fgMissedAt: 500, verdict: NotMeasured,
			measured: "flashgate unknown (the lowest rate was not trusted), naive 500/s = not known (goal ≥ 20×)",
		},
		{
			name: "naive holds nowhere: the ratio is a lower bound",
			sw: sweep([]*crowdsim.Result{held(f), held(f), held(f), held(f), slow(f)},
				[]*crowdsim.Result{slow(n), slow(n), slow(n), slow(n), slow(n)}),
			fg: "4,000/s", nv: "< 500/s", fgMissedAt: 8000, verdict: NotMeasured,
			measured: "flashgate 4,000/s, naive < 500/s = > 8.0× (goal ≥ 20×)",
		},
		{
			name: "nothing passing",
			sw: sweep([]*crowdsim.Result{slow(f), slow(f)},
				[]*crowdsim.Result{slow(n), nil}),
			fg: "< 500/s", nv: "< 500/s", fgMissedAt: 500, verdict: NotMeasured,
			measured: "flashgate < 500/s, naive < 500/s: neither held at the lowest rate (goal ≥ 20×)",
		},
		{
			name: "flashgate holds nowhere, naive somewhere",
			sw: sweep([]*crowdsim.Result{slow(f), slow(f)},
				[]*crowdsim.Result{held(n), slow(n)}),
			fg: "< 500/s", nv: "500/s", fgMissedAt: 500, verdict: Miss,
			measured: "flashgate < 500/s, naive 500/s = 0.0× (goal ≥ 20×)",
		},
		{
			name: "flashgate at every rate but not yet 10×: sweep wider",
			sw: sweep([]*crowdsim.Result{held(f), held(f), held(f)},
				[]*crowdsim.Result{held(n), held(n), slow(n)}),
			fg: "≥ 2,000/s", nv: "1,000/s", verdict: NotMeasured,
			measured: "flashgate ≥ 2,000/s, naive 1,000/s = ≥ 2.0× (goal ≥ 20×)",
		},
		{
			name: "no steps", sw: Sweep{}, fg: "not measured", nv: "not measured", verdict: NotMeasured,
			measured: "no steps (goal ≥ 20×)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fg, nv := CapacityOf(tt.sw, "flashgate"), CapacityOf(tt.sw, "naive")
			if fg.String() != tt.fg || nv.String() != tt.nv || fg.MissedAt != tt.fgMissedAt {
				t.Errorf("capacities = flashgate %s (missed at %v), naive %s; want %s (missed at %v), %s",
					fg, fg.MissedAt, nv, tt.fg, tt.fgMissedAt, tt.nv)
			}
			g := CapacityGoal(tt.sw)
			if g.Verdict != tt.verdict || g.Measured != tt.measured {
				t.Errorf("CapacityGoal = %s %q, want %s %q", g.Verdict, g.Measured, tt.verdict, tt.measured)
			}
		})
	}
}

// Steps given out of order are judged in rate order.
func TestCapacityOrdersSteps(t *testing.T) {
	sw := Sweep{Steps: []Step{
		{RatePerS: 2000, Flashgate: stepRun("flashgate", 5, 0, 0, 0)},
		{RatePerS: 500, Flashgate: held("flashgate")},
		{RatePerS: 1000, Flashgate: held("flashgate")},
	}}
	if c := CapacityOf(sw, "flashgate"); c.RatePerS != 1000 || c.MissedAt != 2000 || c.LowestS != 500 {
		t.Errorf("CapacityOf = %+v, want 1,000/s, missed at 2,000/s, lowest 500", c)
	}
}

// The sweep's refinements are steps of one design alone: they count for it
// and say nothing of the other.
func TestCapacityWithRefinements(t *testing.T) {
	sw := Sweep{Steps: []Step{
		{RatePerS: 1000, Flashgate: held("flashgate"), Naive: held("naive")},
		{RatePerS: 2000, Flashgate: held("flashgate"), Naive: stepRun("naive", 5, 0, 0, 0)},
		{RatePerS: 4000, Flashgate: stepRun("flashgate", 5, 0, 0, 0)},
		{RatePerS: 3000, Flashgate: held("flashgate")},                // refinement of flashgate
		{RatePerS: 1500, Naive: held("naive")},                        // refinement of naive
		{RatePerS: 3500, Flashgate: stepRun("flashgate", 3, 0, 0, 0)}, // and again
	}}
	if c := CapacityOf(sw, "flashgate"); c.RatePerS != 3000 || c.MissedAt != 3500 || c.AtLeast {
		t.Errorf("flashgate = %+v, want 3,000/s, missed at 3,500/s", c)
	}
	if c := CapacityOf(sw, "naive"); c.RatePerS != 1500 || c.MissedAt != 2000 || c.AtLeast {
		t.Errorf("naive = %+v, want 1,500/s, missed at 2,000/s", c)
	}
}

// The sweep report: the verdict line, a row per step and design with the
// untrusted step marked, the pinning, the chart; JSON that reads back.
func TestSweepReport(t *testing.T) {
	sw := Sweep{
		Command: "make bench-capacity", Notes: []string{"Nobody pays: the answer is the promise."},
		Steps: []Step{
			{RatePerS: 500, Flashgate: held("flashgate"), Naive: held("naive")},
			{RatePerS: 1000, Flashgate: held("flashgate"), Naive: stepRun("naive", 4.2, 17, 0, 0.02),
				Discarded: map[string][]float64{"flashgate": {0.31, 0.2}}},
			{RatePerS: 2000, Flashgate: stepRun("flashgate", 0.3, 0, 0, 0.35), Naive: nil},
		},
	}
	sw.Scenario.Stock, sw.Scenario.BurstS, sw.Scenario.RatePerS = 500, 3, 2000
	dir := t.TempDir()
	chart, err := WriteSweepChart(dir, sw)
	if err != nil {
		t.Fatalf("WriteSweepChart = %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, chart)); err != nil || fi.Size() < 1000 {
		t.Errorf("chart %s: %v, %v", chart, fi, err)
	}
	var md bytes.Buffer
	if err := WriteSweepMarkdown(&md, sw, chart); err != nil {
		t.Fatalf("WriteSweepMarkdown = %v", err)
	}
	for _, want := range []string{
		"**N/A** — capacity at the promise: flashgate ≥ 1,000/s, naive 500/s = ≥ 2.0× (goal ≥ 20×)",
		"| 1,000 | flashgate | 900 | 900 | 0.05 s | 0 | 0 | 0 | 990 | 0.010 s | 3 (lag 0.31, 0.20 s) | kept |",
		"| 1,000 | naive | 900 | 900 | 4.20 s | 17 | 0 | 0 | 990 | 0.020 s | 1 | missed: p99 answer 4.20 s > 2 s; 17 5xx |",
		"| 2,000 | flashgate | 900 | 900 | 0.30 s | 0 | 0 | 0 | 990 | 0.350 s | 1 | not trusted: simulator lagged (start p99 0.35 s > 0.1 s) |",
		"| 2,000 | naive | — |",
		"- flashgate: pinned: the simulator on CPU 1; edge, postgres on CPU 0",
		"![p99 time to an answer and 5xx against the burst rate](capacity.png)",
		"- Nobody pays: the answer is the promise.",
		"`make bench-capacity`",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("capacity.md lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := WriteSweepJSON(&js, sw); err != nil {
		t.Fatalf("WriteSweepJSON = %v", err)
	}
	var back sweepReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("capacity.json does not read back: %v", err)
	}
	if len(back.Steps) != 3 || back.Goal.Verdict != NotMeasured || len(back.Capacities) != 2 || back.Capacities[0].RatePerS != 1000 ||
		len(back.Verdicts["naive"]) != 3 || back.Verdicts["naive"][2].Why != "no run" {
		t.Errorf("capacity.json read back as %d steps, goal %s, capacities %+v, naive verdicts %+v",
			len(back.Steps), back.Goal.Verdict, back.Capacities, back.Verdicts["naive"])
	}
	if got, want := SweepSummary(sw), "N/A   capacity at the promise: flashgate ≥ 1,000/s, naive 500/s = ≥ 2.0× (goal ≥ 20×)\n"; got != want {
		t.Errorf("SweepSummary = %q, want %q", got, want)
	}
}

// An empty sweep still draws (empty panels) and writes.
func TestSweepReportEmpty(t *testing.T) {
	if _, err := WriteSweepChart(t.TempDir(), Sweep{}); err != nil {
		t.Errorf("WriteSweepChart(empty) = %v", err)
	}
	var md bytes.Buffer
	if err := WriteSweepMarkdown(&md, Sweep{}, ""); err != nil || !strings.Contains(md.String(), "N/A") {
		t.Errorf("WriteSweepMarkdown(empty) = %v:\n%s", err, md.String())
	}
}
