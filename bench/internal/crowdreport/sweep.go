package crowdreport

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// The capacity sweep's targets.
const (
	// CapacityFactorMin is how many times the naive baseline's capacity at
	// the promise flashgate's must be, at least.
	CapacityFactorMin = 20
	// MaxStartLagS is the simulator's own lag (p99 of how late it set
	// shoppers going) above which a step is not trusted: the crowd it
	// played was not the one asked for.
	MaxStartLagS = 0.1
)

// Sweep is a capacity sweep: at each burst arrival rate, a run of the
// flashgate stack (a fresh sale) and one of the naive baseline (its sale
// reset), on the same pinned CPUs.
type Sweep struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Wall    float64   `json:"wall_s"` // the whole sweep, in seconds
	// Scenario is every step's crowd but for its size, which is the step's
	// rate times BurstS.
	Scenario crowdsim.Scenario `json:"scenario"`
	Steps    []Step            `json:"steps"` // by rate, lowest first
	// Notes are sentences the report prints as they are (why the scenario
	// is what it is, what was cut short).
	Notes []string `json:"notes,omitempty"`
}

// Step is one rate's runs; a run that failed to happen is nil.
type Step struct {
	RatePerS  float64          `json:"rate_per_s"` // shoppers per second arriving in the burst
	Flashgate *crowdsim.Result `json:"flashgate,omitempty"`
	Naive     *crowdsim.Result `json:"naive,omitempty"`
	// Discarded are, by design, the simulator lags (start p99, seconds) of
	// earlier attempts at this step that were not trusted and were run
	// again; the results above are the last attempt's.
	Discarded map[string][]float64 `json:"discarded,omitempty"`
}

// Designs are the designs a sweep compares, in report order.
var Designs = []string{"flashgate", "naive"}

// Result is the step's run of design ("flashgate" or "naive"), nil when
// there is none.
func (s Step) Result(design string) *crowdsim.Result {
	if design == "naive" {
		return s.Naive
	}
	return s.Flashgate
}

// StepVerdict is how one design's run at one rate fared against the
// promise: p99 time to an honest answer ≤ AnswerTargetS, 0 5xx, 0 oversold.
type StepVerdict struct {
	// Held: the promise was kept and the step is trusted.
	Held bool `json:"held"`
	// Trusted: the run happened and the simulator kept up (start lag p99
	// ≤ MaxStartLagS); an untrusted step never counts as held.
	Trusted bool `json:"trusted"`
	// Why says what broke the promise or the trust; "" when held.
	Why string `json:"why,omitempty"`
}

// Judge holds one run to the promise.
func Judge(r *crowdsim.Result) StepVerdict {
	switch {
	case r == nil:
		return StepVerdict{Why: "no run"}
	case r.Requests == 0 || r.Fates.Answered == 0:
		return StepVerdict{Why: "no shopper answered"}
	}
	v := StepVerdict{Trusted: r.StartLag.P99 <= MaxStartLagS}
	var why []string
	if !v.Trusted {
		why = append(why, fmt.Sprintf("simulator lagged (start p99 %s s > %s s)", num(r.StartLag.P99, 2), num(MaxStartLagS, -1)))
	}
	if r.Fates.AnswerP99 > AnswerTargetS {
		why = append(why, fmt.Sprintf("p99 answer %s s > %d s", num(r.Fates.AnswerP99, 2), AnswerTargetS))
	}
	if r.Status5xx > 0 {
		why = append(why, count(r.Status5xx)+" 5xx")
	}
	if r.Oversold > 0 {
		why = append(why, count(r.Oversold)+" oversold")
	}
	v.Held, v.Why = len(why) == 0, strings.Join(why, "; ")
	return v
}

// Capacity is one design's capacity at the promise: the highest rate at
// which that step and every lower one held.
type Capacity struct {
	Design   string  `json:"design"`
	RatePerS float64 `json:"rate_per_s"` // 0: not even the lowest rate held
	// AtLeast: the capacity is RatePerS or more — every rate swept held,
	// or the first that did not was not trusted (the simulator lagged), so
	// what the stack would have done there is not known.
	AtLeast bool `json:"at_least"`
	// LowestS is the lowest rate swept: with RatePerS 0 the capacity is
	// below it.
	LowestS float64 `json:"lowest_rate_per_s"`
	// MissedAt is the lowest rate that did not hold, and Why why not.
	MissedAt float64 `json:"missed_at,omitempty"`
	Why      string  `json:"why,omitempty"`
}

// CapacityOf is design's capacity over the sweep's steps.
func CapacityOf(sw Sweep, design string) Capacity {
	c := Capacity{Design: design}
	steps := sortedSteps(sw)
	if len(steps) == 0 {
		return c
	}
	c.LowestS = steps[0].RatePerS
	for _, st := range steps {
		if st.Result(design) == nil {
			continue // not played for this design (above its first miss, or a refinement of the other's)
		}
		v := Judge(st.Result(design))
		if !v.Held {
			c.MissedAt, c.Why = st.RatePerS, v.Why
			c.AtLeast = !v.Trusted && st.Result(design) != nil && v.Why != "no shopper answered"
			return c
		}
		c.RatePerS = st.RatePerS
	}
	c.AtLeast = true
	return c
}

func sortedSteps(sw Sweep) []Step {
	steps := slices.Clone(sw.Steps)
	slices.SortStableFunc(steps, func(a, b Step) int {
		switch {
		case a.RatePerS < b.RatePerS:
			return -1
		case a.RatePerS > b.RatePerS:
			return 1
		}
		return 0
	})
	return steps
}

// String is the capacity as the report gives it: "4,000/s", "≥ 8,000/s"
// (held at every rate) or "< 500/s" (held at none).
func (c Capacity) String() string {
	switch {
	case c.LowestS == 0:
		return "not measured"
	case c.RatePerS == 0 && c.AtLeast:
		return "unknown (the lowest rate was not trusted)"
	case c.RatePerS == 0:
		return "< " + rate(c.LowestS) + "/s"
	case c.AtLeast:
		return "≥ " + rate(c.RatePerS) + "/s"
	}
	return rate(c.RatePerS) + "/s"
}

// CapacityGoal judges flashgate's capacity against CapacityFactorMin times
// the naive baseline's. Where a capacity is only bounded (held at every
// rate, or stopped by an untrusted step: at least; held at none: below the
// lowest rate) so is the ratio: the goal PASSes when even the ratio's lower
// bound reaches the factor, MISSes when even its upper bound falls short,
// and is NotMeasured between (sweep wider, or on a machine that can play
// the crowd).
func CapacityGoal(sw Sweep) Goal {
	fg, nv := CapacityOf(sw, "flashgate"), CapacityOf(sw, "naive")
	g := Goal{Name: "capacity at the promise", Verdict: NotMeasured}
	goal := fmt.Sprintf("(goal ≥ %d×)", CapacityFactorMin)
	switch {
	case fg.LowestS == 0:
		g.Measured = "no steps " + goal
		return g
	case fg.RatePerS == 0 && nv.RatePerS == 0:
		g.Measured = fmt.Sprintf("flashgate %s, naive %s: neither held at the lowest rate %s", fg, nv, goal)
		return g
	}
	inf := math.Inf(1)
	fgLo, fgHi := fg.RatePerS, fg.RatePerS
	if fg.AtLeast {
		fgHi = inf
	}
	nvLo, nvHi, strict := nv.RatePerS, nv.RatePerS, false
	switch {
	case nv.AtLeast:
		nvHi = inf
	case nv.RatePerS == 0: // below the lowest rate
		nvHi, strict = nv.LowestS, true
	}
	lower, upper := 0.0, inf
	if nvHi < inf {
		lower = fgLo / nvHi
	}
	if nvLo > 0 {
		upper = fgHi / nvLo
	}
	var ratio string
	switch {
	case lower == 0 && upper == inf:
		ratio = "not known"
	case lower == upper:
		ratio = times(lower)
	case upper == inf && strict:
		ratio = "> " + times(lower)
	case upper == inf:
		ratio = "≥ " + times(lower)
	case lower == 0:
		ratio = "≤ " + times(upper)
	default:
		ratio = times(lower) + "–" + times(upper)
	}
	g.Measured = fmt.Sprintf("flashgate %s, naive %s = %s %s", fg, nv, ratio, goal)
	switch {
	case lower >= CapacityFactorMin:
		g.Verdict = Pass
	case upper < CapacityFactorMin:
		g.Verdict = Miss
	}
	return g
}

// SweepSummary is the sweep's verdict in one line for the terminal.
func SweepSummary(sw Sweep) string {
	g := CapacityGoal(sw)
	return fmt.Sprintf("%-4s  %s: %s\n", g.Verdict, g.Name, g.Measured)
}

// sweepReport is capacity.json: the sweep, its verdicts and capacities.
type sweepReport struct {
	Sweep
	Goal       Goal                     `json:"goal"`
	Capacities []Capacity               `json:"capacities"`
	Verdicts   map[string][]StepVerdict `json:"verdicts"` // by design, one per step in Steps' order
}

// WriteSweepJSON writes the sweep with its verdicts as indented JSON.
func WriteSweepJSON(w io.Writer, sw Sweep) error {
	rep := sweepReport{Sweep: sw, Goal: CapacityGoal(sw), Verdicts: map[string][]StepVerdict{}}
	for _, d := range Designs {
		rep.Capacities = append(rep.Capacities, CapacityOf(sw, d))
		for _, st := range sw.Steps {
			rep.Verdicts[d] = append(rep.Verdicts[d], Judge(st.Result(d)))
		}
	}
	if err := benchreport.WriteJSON(w, rep); err != nil {
		return fmt.Errorf("report: write sweep json: %w", err)
	}
	return nil
}

// WriteSweepMarkdown writes capacity.md; chart is the chart's file name
// relative to it ("" for none).
func WriteSweepMarkdown(w io.Writer, sw Sweep, chart string) error {
	var b strings.Builder
	g := CapacityGoal(sw)
	b.WriteString("# Capacity at the promise\n\n")
	fmt.Fprintf(&b, "**%s** — %s: %s\n\n", g.Verdict, g.Name, g.Measured)
	fmt.Fprintf(&b, "Started %s, took %s s", started(sw.Started), num(sw.Wall, 0))
	if sw.Command != "" {
		fmt.Fprintf(&b, "; `%s`", sw.Command)
	}
	if r := firstResult(sw); r != nil && r.Machine != "" {
		fmt.Fprintf(&b, "; on %s", r.Machine)
	}
	b.WriteString(".\n\n")
	sc := sw.Scenario
	fmt.Fprintf(&b, "The promise: p99 time from a shopper's first click to an honest answer (in line, in, sold out) ≤ %d s, "+
		"0 5xx, 0 oversold. A design's capacity is the highest rate at which that step and every lower one kept it; "+
		"a step where the simulator set shoppers going more than %s s late (p99) is not trusted and does not count as kept.\n\n",
		AnswerTargetS, num(MaxStartLagS, -1))
	fmt.Fprintf(&b, "Each step: the rate × %s s shoppers arriving evenly over a %s s burst, no pre-queue, %s units, "+
		"admission %s/s, %s bots, pay probability %s, %s impatient, %s stay after a sold-out; the crowd stopped %s s after the open.\n\n",
		num(sc.BurstS, -1), num(sc.BurstS, -1), count(sc.Stock), rate(sc.RatePerS), count(sc.BotAccounts()),
		num(sc.PayProbability, -1), pct(sc.ImpatientShare), pct(sc.StayShare), num(sc.MaxDurationS, -1))
	b.WriteString("Where the processes ran:\n\n")
	for _, d := range Designs {
		fmt.Fprintf(&b, "- %s: %s\n", d, strings.Join(pinnings(sw, d), " / "))
	}
	b.WriteString("\n")
	writeCapacities(&b, sw)
	writeSweepSteps(&b, sw)
	writeSweepRequests(&b, sw)
	writeSweepCPU(&b, sw)
	if chart != "" {
		fmt.Fprintf(&b, "![p99 time to an answer and 5xx against the burst rate](%s)\n\n", filepath.ToSlash(chart))
	}
	writeSweepNotes(&b, sw)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: write sweep markdown: %w", err)
	}
	return nil
}

func firstResult(sw Sweep) *crowdsim.Result {
	for _, st := range sw.Steps {
		for _, d := range Designs {
			if r := st.Result(d); r != nil {
				return r
			}
		}
	}
	return nil
}

// pinnings are the distinct Pinning lines of design's runs.
func pinnings(sw Sweep, design string) []string {
	var out []string
	for _, st := range sw.Steps {
		if r := st.Result(design); r != nil && !slices.Contains(out, Pinning(r)) {
			out = append(out, Pinning(r))
		}
	}
	if len(out) == 0 {
		return []string{"no runs"}
	}
	return out
}

func writeCapacities(b *strings.Builder, sw Sweep) {
	header(b, "design", "capacity at the promise", "first rate missed", "why")
	for _, d := range Designs {
		c := CapacityOf(sw, d)
		missed := "—"
		if c.MissedAt > 0 {
			missed = rate(c.MissedAt) + "/s"
		}
		line(b, d, c.String(), missed, or(c.Why, "—"))
	}
	b.WriteString("\n")
}

func writeSweepSteps(b *strings.Builder, sw Sweep) {
	b.WriteString("## Steps\n\n")
	header(b, "shoppers/s", "design", "shoppers", "answered", "p99 to an answer", "5xx", "oversold", "timeouts",
		"requests answered", "simulator lag p99", "attempts", "promise")
	for _, st := range sortedSteps(sw) {
		for _, d := range Designs {
			r := st.Result(d)
			if r == nil {
				line(b, rate(st.RatePerS), d, "—", "—", "—", "—", "—", "—", "—", "—", attempts(st, d), "no run")
				continue
			}
			v := Judge(r)
			verdict := "kept"
			switch {
			case !v.Trusted:
				verdict = "not trusted: " + v.Why
			case !v.Held:
				verdict = "missed: " + v.Why
			}
			line(b, rate(st.RatePerS), d, count(r.Scenario.Shoppers+r.Scenario.BotAccounts()), count(r.Fates.Answered),
				num(r.Fates.AnswerP99, 2)+" s", count(r.Status5xx), count(r.Oversold), count(r.Timeouts),
				count(r.Answered), num(r.StartLag.P99, 3)+" s", attempts(st, d), verdict)
		}
	}
	b.WriteString("\n")
}

// attempts is how many times the step of design ran: "1", or "3 (lag 0.21,
// 0.35 s)" with the discarded attempts' simulator lags.
func attempts(st Step, design string) string {
	lags := st.Discarded[design]
	if len(lags) == 0 {
		return "1"
	}
	parts := make([]string, len(lags))
	for i, l := range lags {
		parts[i] = num(l, 2)
	}
	return fmt.Sprintf("%d (lag %s s)", len(lags)+1, strings.Join(parts, ", "))
}

// writeSweepRequests: per step and design, the request totals and each
// endpoint's p50 / p99, to read what slowed a design down.
func writeSweepRequests(b *strings.Builder, sw Sweep) {
	b.WriteString("## Requests\n\n")
	header(b, "shoppers/s", "design", "requests", "peak/s", "units taken (sold + held)", "endpoints: p50 / p99 ms")
	for _, st := range sortedSteps(sw) {
		for _, d := range Designs {
			r := st.Result(d)
			if r == nil {
				continue
			}
			var eps []string
			for _, e := range r.Endpoints {
				eps = append(eps, fmt.Sprintf("%s %s / %s", e.Name, num(e.P50Ms, 1), num(e.P99Ms, 1)))
			}
			line(b, rate(st.RatePerS), d, count(r.Requests), rate(r.PeakRPS), count(r.Sold+r.Held), strings.Join(eps, "; "))
		}
	}
	b.WriteString("\n")
}

// writeSweepCPU: CPU seconds per process group while each crowd ran, and
// the share of one core.
func writeSweepCPU(b *strings.Builder, sw Sweep) {
	var groups []string
	for _, st := range sw.Steps {
		for _, d := range Designs {
			if r := st.Result(d); r != nil {
				for g := range r.CPU {
					if !slices.Contains(groups, g) {
						groups = append(groups, g)
					}
				}
			}
		}
	}
	if len(groups) == 0 {
		return
	}
	slices.Sort(groups)
	b.WriteString("## Where the CPU went\n\nCPU seconds each process used while the crowd ran (from /proc), with the share of one core.\n\n")
	header(b, "shoppers/s", append([]string{"design", "crowd ran"}, groups...)...)
	for _, st := range sortedSteps(sw) {
		for _, d := range Designs {
			r := st.Result(d)
			if r == nil {
				continue
			}
			cells := []string{rate(st.RatePerS), d, num(r.CrowdS, 1) + " s"}
			for _, g := range groups {
				cells = append(cells, cpuCell(r, r.CPU[g]))
			}
			line(b, cells...)
		}
	}
	b.WriteString("\n")
}

func writeSweepNotes(b *strings.Builder, sw Sweep) {
	var notes []string
	for _, n := range sw.Notes {
		notes = append(notes, "- "+n)
	}
	for _, st := range sortedSteps(sw) {
		for _, d := range Designs {
			if r := st.Result(d); r != nil {
				for _, n := range r.Notes {
					notes = append(notes, fmt.Sprintf("- %s at %s/s: %s", d, rate(st.RatePerS), n))
				}
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("## Notes\n\n" + strings.Join(notes, "\n") + "\n")
	}
}

// SweepChart is the chart WriteSweepChart draws.
const SweepChart = "capacity.png"

// minAnswerS is where the chart's log time axis starts; faster answers
// are drawn there.
const minAnswerS = 0.001

// WriteSweepChart draws capacity.png into dir: p99 time to an answer
// against the burst rate for each design (log scales, the 2 s promise as a
// dashed line), and 5xx against the rate. A step the simulator lagged on
// is drawn as a ring, a trusted one as a dot. It returns the file's name.
func WriteSweepChart(dir string, sw Sweep) (string, error) {
	answer := newPlot("p99 time to an honest answer (dashed: the 2 s promise; rings: the simulator lagged)",
		"shoppers per second in the burst (log scale)", "seconds (log scale)")
	errs := newPlot("5xx answers", "shoppers per second in the burst (log scale)", "5xx")
	steps := sortedSteps(sw)
	var errList []error
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, d := range Designs {
		c := runColors[d]
		var p99, bad plotter.XYs
		var trusted, lagged plotter.XYs
		for _, st := range steps {
			r := st.Result(d)
			if r == nil || st.RatePerS <= 0 {
				continue
			}
			lo, hi = min(lo, st.RatePerS), max(hi, st.RatePerS)
			pt := plotter.XY{X: st.RatePerS, Y: max(r.Fates.AnswerP99, minAnswerS)}
			p99 = append(p99, pt)
			if Judge(r).Trusted {
				trusted = append(trusted, pt)
			} else {
				lagged = append(lagged, pt)
			}
			bad = append(bad, plotter.XY{X: st.RatePerS, Y: float64(r.Status5xx)})
		}
		drawn, err := addLine(answer, p99, c, nil)
		errList = append(errList, err, addPoints(answer, trusted, c, draw.CircleGlyph{}), addPoints(answer, lagged, c, draw.RingGlyph{}))
		if drawn {
			addLegend(answer, d, c)
		}
		drawn, err = addLine(errs, bad, c, nil)
		errList = append(errList, err, addPoints(errs, bad, c, draw.CircleGlyph{}))
		if drawn {
			addLegend(errs, d, c)
		}
	}
	if lo <= hi {
		if hi == lo {
			lo, hi = lo/2, hi*2
		}
		promise := plotter.XYs{{X: lo, Y: AnswerTargetS}, {X: hi, Y: AnswerTargetS}}
		_, err := addLine(answer, promise, color.Gray{Y: 0x60}, dashed)
		errList = append(errList, err)
		for _, p := range []*plot.Plot{answer, errs} {
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = rateTicks(steps)
			p.X.Min, p.X.Max = lo/1.2, hi*1.2
		}
		answer.Y.Scale = plot.LogScale{}
		answer.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		answer.Y.Min = minAnswerS
		if answer.Y.Max < 10*AnswerTargetS {
			answer.Y.Max = 10 * AnswerTargetS
		}
		answer.Y.Max *= 10 // room for the legend on a log axis
	}
	errs.Y.Min = 0
	if errs.Y.Max < 1 {
		errs.Y.Max = 1
	}
	raiseTop(errs)
	if err := errors.Join(errList...); err != nil {
		return "", fmt.Errorf("report: chart %s: %w", SweepChart, err)
	}
	if err := savePNG(filepath.Join(dir, SweepChart), panelHeight, []*plot.Plot{answer, errs}); err != nil {
		return "", fmt.Errorf("report: chart %s: %w", SweepChart, err)
	}
	return SweepChart, nil
}

// addPoints draws pts as glyphs in colour c.
func addPoints(p *plot.Plot, pts plotter.XYs, c color.Color, shape draw.GlyphDrawer) error {
	if len(pts) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: shape}
	p.Add(s)
	return nil
}

// rateTicks labels the x axis at the rates swept.
func rateTicks(steps []Step) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for _, st := range steps {
		if st.RatePerS > 0 && !slices.ContainsFunc(ts, func(t plot.Tick) bool { return t.Value == st.RatePerS }) {
			ts = append(ts, plot.Tick{Value: st.RatePerS, Label: rate(st.RatePerS)})
		}
	}
	return ts
}
