package crowdreport

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// The comparison's targets. The overload ones are the admission
// controller's own (origin/internal/autotune DefaultTargets), held over a
// whole run.
const (
	// SettledRatioMin and SettledRatioMax bound "near the capacity": what
	// the cursor admitted while autotune settled over the capacity under
	// the comparison's crowd (Comparison.CapacityAt). The controller cuts
	// to 70–90 % of a rate that tripped, so a mean near 0.7 is a rate kept
	// too low, and one past the capacity a rate the edges' hold reined in.
	SettledRatioMin = 0.7
	SettledRatioMax = 1.3
	// ReserveErrorShareMax is the share of reserve answers that may be
	// please_wait or another 5xx before a run counts as overloaded.
	ReserveErrorShareMax = 0.01
	// ReserveP99TargetMs is the reserve p99 above which a run counts as
	// overloaded: the origin's reserve handler's, or the client's where
	// the origin's was not read.
	ReserveP99TargetMs = 250
)

// The comparison's kinds of run.
const (
	KindAutotune = "autotune"
	KindTooHigh  = "too high"
	KindTooLow   = "too low"
)

// Kinds are the kinds of run a comparison round plays, in the order it
// plays them.
var Kinds = []string{KindAutotune, KindTooHigh, KindTooLow}

// Comparison is make bench-autotune: the same scenario played with the
// origin's admission controller on and with a fixed rate set too high and
// too low, each a fresh sale on one stack, round after round, beside the
// stack's capacity measured with admission unthrottled.
type Comparison struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Wall    float64   `json:"wall_s"` // the whole comparison, in seconds
	// Scenario is every run's crowd; its RatePerS is the autotune run's
	// starting rate.
	Scenario crowdsim.Scenario `json:"scenario"`
	// Autotune is the controller's bounds in the autotune runs.
	Autotune crowdsim.Autotune `json:"autotune"`
	// TooHighPerS and TooLowPerS are the fixed rates of the other runs.
	TooHighPerS float64 `json:"too_high_rate_per_s"`
	TooLowPerS  float64 `json:"too_low_rate_per_s"`
	// AutotunePeriod is FLASHGATE_AUTOTUNE_PERIOD as the stack was
	// started with it; "" when unset (the origin's default, 5 s).
	AutotunePeriod string `json:"autotune_period,omitempty"`
	// CapacityPerS is the stack's holds granted per second with admission
	// unthrottled: the Ceiling run's, or given when Ceiling is nil.
	CapacityPerS float64          `json:"capacity_per_s"`
	Ceiling      *crowdsim.Result `json:"ceiling,omitempty"`
	Runs         []Compared       `json:"runs"` // in the order played
	// Notes are sentences the report prints as they are (how the scenario
	// was sized, what was cut short).
	Notes []string `json:"notes,omitempty"`
}

// Compared is one run of the comparison.
type Compared struct {
	Kind   string           `json:"kind"`  // KindAutotune, KindTooHigh or KindTooLow
	Round  int              `json:"round"` // from 1
	Result *crowdsim.Result `json:"result"`
}

// Label names the run as the report does: its kind, and its round when
// there are several.
func (c Compared) Label(rounds int) string {
	if rounds > 1 {
		return fmt.Sprintf("%s (round %d)", c.Kind, c.Round)
	}
	return c.Kind
}

// Rounds is how many rounds the comparison played.
func (c Comparison) Rounds() int {
	n := 0
	for _, r := range c.Runs {
		n = max(n, r.Round)
	}
	return n
}

// CapacityAt is the capacity round's autotune run is judged against, and
// what it is: the stack's admissions a second under this crowd — the rate
// too high's admitted/s once its slow start is over (capacityFromS after
// the open, or half its selling time if shorter), a rate that never bound:
// the edges' own hold paced it — or, without that run, the ceiling run's
// holds granted per second (a smaller crowd, in one burst: it asks the
// stack less).
func (c Comparison) CapacityAt(round int) (float64, string) {
	if r := c.Run(KindTooHigh, round); r != nil && r.Admission != nil && len(r.Admission.Samples) > 0 {
		s := r.Admission.Samples
		end := r.LastUnitAt
		if end <= 0 {
			end = s[len(s)-1].T
		}
		if from := min(capacityFromS, end/2); end > from {
			if perS := (admittedAt(s, end) - admittedAt(s, from)) / (end - from); perS > 0 {
				return perS, "under this crowd (the rate too high's admitted/s after its slow start)"
			}
		}
	}
	return c.CapacityPerS, "unthrottled (the ceiling run's holds/s)"
}

// capacityFromS is when a sale's slow start is over: six seconds of ramp,
// then six in which its bound on the checkout's answer rate fades
// (edge/internal/admission/advance.lua).
const capacityFromS = 12

// Run is the comparison's run of kind in round, nil when there is none.
func (c Comparison) Run(kind string, round int) *crowdsim.Result {
	for _, r := range c.Runs {
		if r.Kind == kind && r.Round == round {
			return r.Result
		}
	}
	return nil
}

// Settled is the rate an autotune run settled at: the set rate's mean over
// the window from the controller's first decrease (it met a limit) to the
// last unit going (or the last sample, when the stock lasted), weighted by
// time. A run whose controller never decreased is measured over the second
// half of its selling time, and not Found.
type Settled struct {
	RatePerS float64 `json:"rate_per_s"`
	FromS    float64 `json:"from_s"`
	ToS      float64 `json:"to_s"`
	// Found: the controller decreased the rate at least once.
	Found bool `json:"found"`
	// AdmittedPerS is who the cursor let through per second over the
	// window: below the set rate while the edge held ticks or ramped.
	AdmittedPerS float64 `json:"admitted_per_s"`
	// PeakRatePerS is the highest rate the edge was sampled at (a step
	// undone before the edge heard of it is not seen).
	PeakRatePerS float64 `json:"peak_rate_per_s"`
	Ups          int     `json:"ups"`   // the controller's increases over the run
	Downs        int     `json:"downs"` // and decreases
	// FirstDownS is when it first decreased, and FirstDownWhy why.
	FirstDownS   float64 `json:"first_down_s,omitempty"`
	FirstDownWhy string  `json:"first_down_why,omitempty"`
}

// SettledRate is where the autotune run r settled; false when r has no
// rate samples in a window of positive length.
func SettledRate(r *crowdsim.Result) (Settled, bool) {
	if r == nil || r.Admission == nil || len(r.Admission.Samples) == 0 {
		return Settled{}, false
	}
	a := r.Admission
	var st Settled
	for _, c := range a.Changes {
		if !c.ByController() {
			continue
		}
		switch {
		case c.AfterRatePerS > c.BeforeRatePerS:
			st.Ups++
		case c.AfterRatePerS < c.BeforeRatePerS:
			if st.Downs == 0 {
				st.FirstDownS, st.FirstDownWhy = c.T, c.Why()
			}
			st.Downs++
		}
	}
	st.ToS = r.LastUnitAt
	if st.ToS <= 0 {
		st.ToS = a.Samples[len(a.Samples)-1].T
	}
	st.Found = st.Downs > 0 && st.FirstDownS < st.ToS
	st.FromS = st.ToS / 2
	if st.Found {
		st.FromS = max(st.FirstDownS, 0)
	}
	for _, s := range a.Samples {
		if s.T >= 0 && s.T <= st.ToS {
			st.PeakRatePerS = max(st.PeakRatePerS, s.RatePerS)
		}
	}
	if st.ToS <= st.FromS {
		return st, false
	}
	st.RatePerS = meanRate(a.Samples, st.FromS, st.ToS)
	st.AdmittedPerS = (admittedAt(a.Samples, st.ToS) - admittedAt(a.Samples, st.FromS)) / (st.ToS - st.FromS)
	return st, true
}

// meanRate is the time-weighted mean of the set rate over [from, to], the
// rate at each moment being the last sample's at or before it (the first
// sample's before any).
func meanRate(samples []crowdsim.RateSample, from, to float64) float64 {
	if len(samples) == 0 || to <= from {
		return 0
	}
	var area float64
	for i, s := range samples {
		start := s.T
		if i == 0 {
			start = from
		}
		end := to
		if i+1 < len(samples) {
			end = samples[i+1].T
		}
		lo, hi := max(start, from), min(end, to)
		if hi > lo {
			area += s.RatePerS * (hi - lo)
		}
	}
	return area / (to - from)
}

// admittedAt is how many places the cursor had admitted at t, linear
// between the samples around it, the nearest sample's outside them.
func admittedAt(samples []crowdsim.RateSample, t float64) float64 {
	i, _ := slices.BinarySearchFunc(samples, t, func(s crowdsim.RateSample, t float64) int {
		switch {
		case s.T < t:
			return -1
		case s.T > t:
			return 1
		}
		return 0
	})
	switch {
	case i == 0:
		return float64(samples[0].AdmittedTotal)
	case i == len(samples):
		return float64(samples[len(samples)-1].AdmittedTotal)
	}
	a, b := samples[i-1], samples[i]
	if b.T <= a.T {
		return float64(b.AdmittedTotal)
	}
	return float64(a.AdmittedTotal) + float64(b.AdmittedTotal-a.AdmittedTotal)*(t-a.T)/(b.T-a.T)
}

// Figures are one run's figures as the comparison's table gives them.
type Figures struct {
	Label string `json:"label"`
	Kind  string `json:"kind"`
	// RatePerS is the rate set: the fixed one, or autotune's start.
	RatePerS float64 `json:"rate_per_s"`
	// Settled is where autotune settled (nil for the fixed runs, and when
	// it could not be measured); SettledRatio is its rate set, and
	// AdmittedRatio what the cursor admitted meanwhile, over the capacity
	// (CapacityAt). The rate set runs above what is admitted: after each
	// hold an edge's slow start admits under the rate for seconds.
	Settled       *Settled `json:"settled,omitempty"`
	SettledRatio  float64  `json:"settled_ratio,omitempty"`
	AdmittedRatio float64  `json:"admitted_ratio,omitempty"`
	// ReserveAnswers are the reserves answered at all; of them
	// ReservePleaseWait answered 503 (please_wait) and ReserveOther5xx
	// another 5xx. PleaseWait counts 503s on every endpoint.
	ReserveAnswers    int `json:"reserve_answers"`
	ReservePleaseWait int `json:"reserve_please_wait"`
	ReserveOther5xx   int `json:"reserve_other_5xx"`
	PleaseWait        int `json:"please_wait"`
	Other5xx          int `json:"other_5xx"` // every endpoint's 5xx but please_wait
	Timeouts          int `json:"timeouts"`
	// ReserveP99Ms is the client's; OriginReserveP99Ms the origin's
	// reserve handler's over the crowd (0: not read).
	ReserveP99Ms       float64 `json:"reserve_p99_ms"`
	OriginReserveP99Ms float64 `json:"origin_reserve_p99_ms"`
	// AdmittedPerS is who the cursor let through per second from the
	// open to the last unit going (or the last sample), whatever the rate
	// set: the edge holds ticks while the checkout is behind.
	AdmittedPerS float64 `json:"admitted_per_s"`
	// SoldOutS is when the last unit went (0: the stock outlasted the
	// crowd); UnitsTaken the units held or sold at the end.
	SoldOutS   float64 `json:"sold_out_s"`
	UnitsTaken int     `json:"units_taken"`
	HoldsPerS  float64 `json:"holds_per_s"`
	// AnswerP99S is the shoppers' p99 time from the click to an honest
	// answer; HoldP50S and HoldP99S to a hold, SoldOutP99S to "sold out".
	AnswerP99S  float64 `json:"answer_p99_s"`
	HoldP50S    float64 `json:"hold_p50_s"`
	HoldP99S    float64 `json:"hold_p99_s"`
	SoldOutP99S float64 `json:"sold_out_p99_s"`
	// Overloaded: reserve errors past ReserveErrorShareMax or the reserve
	// p99 past ReserveP99TargetMs; Why says which.
	Overloaded bool   `json:"overloaded"`
	Why        string `json:"why,omitempty"`
}

// ErrorShare is the share of reserve answers that were please_wait or
// another 5xx.
func (f Figures) ErrorShare() float64 {
	if f.ReserveAnswers == 0 {
		return 0
	}
	return float64(f.ReservePleaseWait+f.ReserveOther5xx) / float64(f.ReserveAnswers)
}

// JudgedP99Ms is the reserve p99 overload is judged by: the origin's
// handler's (what the controller reads), else the client's.
func (f Figures) JudgedP99Ms() float64 {
	if f.OriginReserveP99Ms > 0 {
		return f.OriginReserveP99Ms
	}
	return f.ReserveP99Ms
}

// FiguresOf are run x's figures against the capacity.
func FiguresOf(x Compared, rounds int, capacity float64) Figures {
	r := x.Result
	f := Figures{Label: x.Label(rounds), Kind: x.Kind}
	if r == nil {
		return f
	}
	f.RatePerS = r.Scenario.RatePerS
	if a := r.Admission; a != nil && len(a.Samples) > 0 {
		end := r.LastUnitAt
		if end <= 0 {
			end = a.Samples[len(a.Samples)-1].T
		}
		if end > 0 {
			f.AdmittedPerS = (admittedAt(a.Samples, end) - admittedAt(a.Samples, 0)) / end
		}
	}
	if x.Kind == KindAutotune {
		if st, ok := SettledRate(r); ok {
			f.Settled = &st
			if capacity > 0 {
				f.SettledRatio, f.AdmittedRatio = st.RatePerS/capacity, st.AdmittedPerS/capacity
			}
		}
	}
	for _, e := range r.Endpoints {
		f.PleaseWait += e.ByStatus["503"]
		if e.Name != "reserve" {
			continue
		}
		f.ReserveP99Ms = e.P99Ms
		for status, n := range e.ByStatus {
			code, err := strconv.Atoi(status)
			if err != nil {
				continue // "timeout", "error": no answer
			}
			f.ReserveAnswers += n
			switch {
			case code == http.StatusServiceUnavailable:
				f.ReservePleaseWait += n
			case code >= 500:
				f.ReserveOther5xx += n
			}
		}
	}
	for _, s := range r.Stages {
		if s.Path == "reserve" && s.Name == "origin: reserve handler" {
			f.OriginReserveP99Ms = s.P99Ms
		}
	}
	f.Other5xx, f.Timeouts = max(0, r.Status5xx-f.PleaseWait), r.Timeouts
	f.SoldOutS, f.UnitsTaken, f.HoldsPerS = r.LastUnitAt, r.Sold+r.Held, reservesPerS(r)
	f.AnswerP99S, f.HoldP50S, f.HoldP99S, f.SoldOutP99S = r.Fates.AnswerP99, r.Fates.Reserved.P50, r.Fates.Reserved.P99, r.Fates.SoldOut.P99
	var why []string
	if share := f.ErrorShare(); share > ReserveErrorShareMax {
		why = append(why, fmt.Sprintf("%s of reserves answered please_wait or 5xx", pct(share)))
	}
	if p99 := f.JudgedP99Ms(); p99 > ReserveP99TargetMs {
		why = append(why, fmt.Sprintf("reserve p99 %s ms", num(p99, 0)))
	}
	f.Overloaded, f.Why = len(why) > 0, strings.Join(why, ", ")
	return f
}

// ComparisonGoals judges each round: autotune settles near the capacity,
// without overload, and sells out sooner than the rate too low; and the
// rate too high overloads the stack (the comparison's premise: a stack
// that keeps a rate too high safe by itself shows autotune nothing to
// avoid).
func ComparisonGoals(c Comparison) []Goal {
	var goals []Goal
	rounds := c.Rounds()
	for round := 1; round <= rounds; round++ {
		prefix := ""
		if rounds > 1 {
			prefix = fmt.Sprintf("round %d: ", round)
		}
		capacity, which := c.CapacityAt(round)
		fig := func(kind string) *Figures {
			r := c.Run(kind, round)
			if r == nil {
				return nil
			}
			f := FiguresOf(Compared{Kind: kind, Round: round, Result: r}, rounds, capacity)
			return &f
		}
		at, hi, lo := fig(KindAutotune), fig(KindTooHigh), fig(KindTooLow)
		for _, g := range []Goal{settledGoal(at, capacity, which), calmGoal(at), overloadGoal(hi), fasterGoal(at, lo)} {
			g.Name = prefix + g.Name
			goals = append(goals, g)
		}
	}
	return goals
}

func settledGoal(at *Figures, capacity float64, which string) Goal {
	g := Goal{Name: "autotune settles near the capacity", Verdict: NotMeasured}
	goal := fmt.Sprintf("(goal %s–%s× admitted after a decrease)", num(SettledRatioMin, 1), num(SettledRatioMax, 1))
	switch {
	case at == nil:
		g.Measured = "no autotune run"
		return g
	case at.Settled == nil:
		g.Measured = "no rate samples to measure it by"
		return g
	case capacity <= 0:
		g.Measured = "no capacity measured"
		return g
	}
	st := at.Settled
	where := fmt.Sprintf("admitted %s/s over %s–%s s", rate(st.AdmittedPerS), num(st.FromS, 1), num(st.ToS, 1))
	if st.Found {
		where += " (from its first decrease)"
	} else {
		where += fmt.Sprintf(" (it never decreased: peak %s/s)", rate(st.PeakRatePerS))
	}
	ratio := st.AdmittedPerS / capacity
	g.Measured = fmt.Sprintf("%s = %s the capacity %s %s/s, at a rate set of %s/s (%s) %s",
		where, ratio2(ratio), which, rate(capacity), rate(st.RatePerS), ratio2(st.RatePerS/capacity), goal)
	g.Verdict = verdict(st.Found && ratio >= SettledRatioMin && ratio <= SettledRatioMax)
	return g
}

func calmGoal(at *Figures) Goal {
	g := Goal{Name: "autotune without overload", Verdict: NotMeasured}
	if at == nil || at.ReserveAnswers == 0 {
		g.Measured = "no reserves answered in an autotune run"
		return g
	}
	g.Measured = overloadMeasured(at)
	g.Verdict = verdict(!at.Overloaded)
	return g
}

func overloadGoal(hi *Figures) Goal {
	g := Goal{Name: "a fixed rate too high overloads the stack", Verdict: NotMeasured}
	if hi == nil || hi.ReserveAnswers == 0 {
		g.Measured = "no reserves answered in a too-high run"
		return g
	}
	g.Measured = overloadMeasured(hi)
	g.Verdict = verdict(hi.Overloaded)
	return g
}

// overloadMeasured states a run's overload signs against the targets.
func overloadMeasured(f *Figures) string {
	which := "origin"
	if f.OriginReserveP99Ms <= 0 {
		which = "client"
	}
	return fmt.Sprintf("%s please_wait and %s other 5xx of %s reserves (%s; goal ≤ %s), reserve p99 %s ms (%s; goal ≤ %d ms)",
		count(f.ReservePleaseWait), count(f.ReserveOther5xx), count(f.ReserveAnswers), pct(f.ErrorShare()), pct(ReserveErrorShareMax),
		num(f.JudgedP99Ms(), 0), which, ReserveP99TargetMs)
}

func fasterGoal(at, lo *Figures) Goal {
	g := Goal{Name: "autotune sells out sooner than a fixed rate too low", Verdict: NotMeasured}
	switch {
	case at == nil || lo == nil:
		g.Measured = "no autotune or too-low run"
		return g
	case at.SoldOutS <= 0 && lo.SoldOutS <= 0:
		g.Measured = fmt.Sprintf("neither sold out: autotune took %s units, too low %s", count(at.UnitsTaken), count(lo.UnitsTaken))
		return g
	case at.SoldOutS <= 0:
		g.Measured = fmt.Sprintf("autotune did not sell out (%s units taken), too low did at %s s", count(at.UnitsTaken), num(lo.SoldOutS, 1))
		g.Verdict = Miss
		return g
	case lo.SoldOutS <= 0:
		g.Measured = fmt.Sprintf("autotune sold out at %s s, too low did not within the run (%s units taken)", num(at.SoldOutS, 1), count(lo.UnitsTaken))
		g.Verdict = Pass
		return g
	}
	g.Measured = fmt.Sprintf("autotune sold out at %s s, too low at %s s (%s as long)", num(at.SoldOutS, 1), num(lo.SoldOutS, 1), times(lo.SoldOutS/at.SoldOutS))
	g.Verdict = verdict(at.SoldOutS < lo.SoldOutS)
	return g
}

// boundShare is the share of the set rate below which a run's cursor is
// said to have been held back: the edge's own hold, not the rate, set how
// many it let through.
const boundShare = 0.8

// ComparisonFindings are sentences on what the figures say beyond the
// goals: a run whose cursor admitted well below the rate set (the rate
// did not bind), and the most holds per second the stack granted under
// this crowd (the rate too high's) against the ceiling run's capacity.
func ComparisonFindings(c Comparison) []string {
	var out []string
	rounds := c.Rounds()
	var most Figures
	for _, x := range c.Runs {
		f := FiguresOf(x, rounds, c.CapacityPerS)
		set, admitted, over := f.RatePerS, f.AdmittedPerS, "from the open to the end"
		if st := f.Settled; st != nil {
			set, admitted, over = st.RatePerS, st.AdmittedPerS, fmt.Sprintf("over %s–%s s", num(st.FromS, 1), num(st.ToS, 1))
		}
		if x.Result != nil && set > 0 && admitted > 0 && admitted < boundShare*set {
			out = append(out, fmt.Sprintf("%s: the cursor admitted %s/s %s while the rate set averaged %s/s (%s): the edge's own hold "+
				"(a tick admits no one while the checkout's quickest requests are slow) bounded admission there, not the rate.",
				f.Label, rate(admitted), over, rate(set), pct(admitted/set)))
		}
		if f.HoldsPerS > most.HoldsPerS {
			most = f
		}
	}
	if most.HoldsPerS > 0 && c.CapacityPerS > 0 {
		line := fmt.Sprintf("Under this crowd the most holds granted per second was %s/s (%s) — %s the capacity the ceiling run measured",
			rate(most.HoldsPerS), most.Label, ratio2(most.HoldsPerS/c.CapacityPerS))
		for _, x := range c.Runs {
			if f := FiguresOf(x, rounds, c.CapacityPerS); x.Kind == KindAutotune && f.HoldsPerS > 0 && f.Label != most.Label {
				line += fmt.Sprintf("; %s granted %s/s, %s that", f.Label, rate(f.HoldsPerS), ratio2(f.HoldsPerS/most.HoldsPerS))
			}
		}
		out = append(out, line+".")
	}
	return out
}

// comparisonRuns are the comparison's present runs with their labels, in
// the order played, and the ceiling run last.
func comparisonRuns(c Comparison) []run {
	var out []run
	for _, x := range c.Runs {
		if x.Result != nil {
			out = append(out, run{x.Label(c.Rounds()), x.Result})
		}
	}
	if c.Ceiling != nil {
		out = append(out, run{"ceiling", c.Ceiling})
	}
	return out
}

// ComparisonSummary is the comparison in a few lines for the terminal:
// the capacity, each run's figures, then the goals.
func ComparisonSummary(c Comparison) string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity (admission unthrottled): %s holds granted/s\n", orDash(c.CapacityPerS > 0, rate(c.CapacityPerS)))
	rounds := c.Rounds()
	for _, x := range c.Runs {
		capacity, _ := c.CapacityAt(x.Round)
		f := FiguresOf(x, rounds, capacity)
		fmt.Fprintf(&b, "%s: rate %s/s", f.Label, rate(f.RatePerS))
		if st := f.Settled; st != nil {
			fmt.Fprintf(&b, " → settled %s/s, admitting %s/s (%s the capacity, %d up, %d down)",
				rate(st.RatePerS), rate(st.AdmittedPerS), ratio2(f.AdmittedRatio), st.Ups, st.Downs)
		}
		fmt.Fprintf(&b, "; please_wait %s (reserve %s), other 5xx %s, reserve p99 %s ms (origin %s ms); sold out %s; answer p99 %s s, hold p99 %s s\n",
			count(f.PleaseWait), count(f.ReservePleaseWait), count(f.Other5xx), num(f.ReserveP99Ms, 0), num(f.OriginReserveP99Ms, 0),
			soldOutCell(f), num(f.AnswerP99S, 2), num(f.HoldP99S, 2))
	}
	for _, g := range ComparisonGoals(c) {
		fmt.Fprintf(&b, "%-4s  %s: %s\n", g.Verdict, g.Name, g.Measured)
	}
	return b.String()
}

func soldOutCell(f Figures) string {
	if f.SoldOutS <= 0 {
		return "not (" + count(f.UnitsTaken) + " units taken)"
	}
	return "at " + num(f.SoldOutS, 1) + " s"
}

// comparisonReport is autotune.json: the comparison, each run's figures
// and the goals.
type comparisonReport struct {
	Comparison
	Figures  []Figures `json:"figures"` // in Runs' order
	Goals    []Goal    `json:"goals"`
	Findings []string  `json:"findings,omitempty"`
}

// WriteComparisonJSON writes the comparison with its figures and goals as
// indented JSON.
func WriteComparisonJSON(w io.Writer, c Comparison) error {
	rep := comparisonReport{Comparison: c, Goals: ComparisonGoals(c), Findings: ComparisonFindings(c)}
	for _, x := range c.Runs {
		capacity, _ := c.CapacityAt(x.Round)
		rep.Figures = append(rep.Figures, FiguresOf(x, c.Rounds(), capacity))
	}
	if err := benchreport.WriteJSON(w, rep); err != nil {
		return fmt.Errorf("report: write autotune json: %w", err)
	}
	return nil
}

// WriteComparisonMarkdown writes autotune.md; chart is the chart's file
// name relative to it ("" for none).
func WriteComparisonMarkdown(w io.Writer, c Comparison, chart string) error {
	var b strings.Builder
	b.WriteString("# Admission that tunes itself: autotune against a fixed rate too high and too low\n\n")
	for _, g := range ComparisonGoals(c) {
		fmt.Fprintf(&b, "- **%s** — %s: %s\n", g.Verdict, g.Name, g.Measured)
	}
	if findings := ComparisonFindings(c); len(findings) > 0 {
		b.WriteString("\nWhat else the figures say:\n\n")
		for _, f := range findings {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	fmt.Fprintf(&b, "\nStarted %s, took %s s", started(c.Started), num(c.Wall, 0))
	if c.Command != "" {
		fmt.Fprintf(&b, "; `%s`", c.Command)
	}
	if rs := comparisonRuns(c); len(rs) > 0 && rs[0].r.Machine != "" {
		fmt.Fprintf(&b, "; on %s", rs[0].r.Machine)
	}
	b.WriteString(".\n\n")
	writeComparisonSetUp(&b, c)
	writeComparisonRuns(&b, c)
	writeAutotuneSteps(&b, c)
	if chart != "" {
		fmt.Fprintf(&b, "![the admission rate, the reserve p99 and the units left over time, per run](%s)\n\n", filepath.ToSlash(chart))
	}
	rs := comparisonRuns(c)
	writeCPU(&b, rs)
	writeEndpoints(&b, rs)
	writeComparisonNotes(&b, c, rs)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: write autotune markdown: %w", err)
	}
	return nil
}

func writeComparisonSetUp(b *strings.Builder, c Comparison) {
	period := "FLASHGATE_AUTOTUNE_PERIOD unset: the origin's default, 5 s"
	if c.AutotunePeriod != "" {
		period = "FLASHGATE_AUTOTUNE_PERIOD=" + c.AutotunePeriod
	}
	capacity := "given (-capacity), not measured in this run"
	if cl := c.Ceiling; cl != nil {
		capacity = fmt.Sprintf("the ceiling run's holds granted per second: %s shoppers for as many units, all arriving in a %s s burst, "+
			"admission unthrottled, nobody paying; %s 5xx, %s timeouts",
			count(cl.Scenario.Shoppers), num(cl.Scenario.BurstS, -1), count(cl.Status5xx), count(cl.Timeouts))
	}
	sc := c.Scenario
	fmt.Fprintf(b, "**Capacity**: %s/s — %s.\n\n", orDash(c.CapacityPerS > 0, rate(c.CapacityPerS)), capacity)
	fmt.Fprintf(b, "**The runs**, each a fresh sale on the same stack, in this order every round: "+
		"*autotune* — the origin's controller on, between %s/s and %s/s, starting at %s/s (%s); "+
		"*too high* — fixed at %s/s (%s the capacity); *too low* — fixed at %s/s (%s the capacity).\n\n",
		rate(c.Autotune.MinRatePerS), rate(c.Autotune.MaxRatePerS), rate(sc.RatePerS), period,
		rate(c.TooHighPerS), ratio2(ratioOf(c.TooHighPerS, c.CapacityPerS)), rate(c.TooLowPerS), ratio2(ratioOf(c.TooLowPerS, c.CapacityPerS)))
	fmt.Fprintf(b, "**Each run's crowd**: %s shoppers for %s units — %s of them in a pre-queue over %s s before the open, %s in a %s s burst, "+
		"%s over a %s s tail; %s bots; each presses Buy %s s (mean) after its turn; pay probability %s, %s impatient, %s stay after a sold-out; "+
		"holds last %d s; the crowd stopped %s s after the open.\n\n",
		count(sc.Shoppers), count(sc.Stock), pct(sc.PreQueueShare), num(sc.PreQueueS, -1), pct(sc.BurstShare), num(sc.BurstS, -1),
		pct(max(0, 1-sc.PreQueueShare-sc.BurstShare)), num(sc.TailS, -1), count(sc.BotAccounts()), num(sc.ReactionS, -1),
		num(sc.PayProbability, -1), pct(sc.ImpatientShare), pct(sc.StayShare), sc.HoldTTLS, num(sc.MaxDurationS, -1))
	fmt.Fprintf(b, "A run counts as **overloaded** when more than %s of its reserves were answered please_wait (503) or another 5xx, "+
		"or its reserve p99 — the origin's reserve handler's, which the controller reads, else the client's — was over %d ms: "+
		"the controller's own targets, over the whole run. Autotune's **settled rate** is its set rate's time-weighted mean from its "+
		"first decrease (it met a limit) to the last unit going, and what the cursor admitted over that window is judged against "+
		"the **capacity under this crowd**: the rate too high's admitted/s, a rate that never bound (the edges' own hold paced it); "+
		"the ceiling's figure, from a smaller crowd in one burst, sizes the runs.\n\n",
		pct(ReserveErrorShareMax), ReserveP99TargetMs)
}

// ratio2 formats a ratio with two decimals: "0.93×".
func ratio2(r float64) string { return num(r, 2) + "×" }

func ratioOf(v, of float64) float64 {
	if of <= 0 {
		return 0
	}
	return v / of
}

func writeComparisonRuns(b *strings.Builder, c Comparison) {
	b.WriteString("## Runs\n\n")
	header(b, "run", "rate set", "admitted/s, open → end", "settled rate (× capacity)", "admitted/s over that window (× capacity)", "reserves answered", "please_wait (reserve / all)",
		"other 5xx", "timeouts", "reserve p99 client / origin", "sold out", "holds granted/s", "p99 to an answer", "to a hold p50 / p99",
		"to sold out p99", "overloaded")
	rounds := c.Rounds()
	for _, x := range c.Runs {
		capacity, _ := c.CapacityAt(x.Round)
		f := FiguresOf(x, rounds, capacity)
		if x.Result == nil {
			line(b, f.Label, "no run")
			continue
		}
		rateSet, settled, admitted := rate(f.RatePerS)+"/s", "—", "—"
		if x.Kind == KindAutotune {
			rateSet = fmt.Sprintf("%s–%s/s from %s/s", rate(c.Autotune.MinRatePerS), rate(c.Autotune.MaxRatePerS), rate(f.RatePerS))
		}
		if st := f.Settled; st != nil {
			settled = fmt.Sprintf("%s/s (%s)", rate(st.RatePerS), ratio2(f.SettledRatio))
			if !st.Found {
				settled += ", never decreased"
			}
			admitted = fmt.Sprintf("%s/s (%s)", rate(st.AdmittedPerS), ratio2(f.AdmittedRatio))
		}
		line(b, f.Label, rateSet, orDash(f.AdmittedPerS > 0, rate(f.AdmittedPerS)+"/s"), settled, admitted, count(f.ReserveAnswers),
			count(f.ReservePleaseWait)+" / "+count(f.PleaseWait), count(f.Other5xx), count(f.Timeouts),
			num(f.ReserveP99Ms, 0)+" / "+orDash(f.OriginReserveP99Ms > 0, num(f.OriginReserveP99Ms, 0))+" ms",
			soldOutCell(f), rate(f.HoldsPerS), num(f.AnswerP99S, 2)+" s", num(f.HoldP50S, 2)+" / "+num(f.HoldP99S, 2)+" s",
			orDash(f.SoldOutP99S > 0, num(f.SoldOutP99S, 2)+" s"), orDash(f.Overloaded, "yes: "+f.Why))
	}
	b.WriteString("\n*Admitted/s* is the cursor's rise (GET /admin/sales/{id}/admission's admitted_total, read once a second) per second; " +
		"*other 5xx* count every endpoint's; *p99 to an answer* is from a shopper's first click to the first honest answer " +
		"(in line, a hold, sold out) — a shopper in a slow line has one at once, so a rate too low shows in the time *to a hold* and *to sold out*.\n\n")
}

// writeAutotuneSteps lists each autotune run's settling and its
// controller's steps.
func writeAutotuneSteps(b *strings.Builder, c Comparison) {
	rounds := c.Rounds()
	for _, x := range c.Runs {
		if x.Kind != KindAutotune || x.Result == nil || x.Result.Admission == nil {
			continue
		}
		capacity, which := c.CapacityAt(x.Round)
		f := FiguresOf(x, rounds, capacity)
		fmt.Fprintf(b, "## The %s run's rate\n\n", f.Label)
		if st := f.Settled; st != nil {
			fmt.Fprintf(b, "Settled at **%s/s** over %s–%s s (%s the capacity %s, %s/s); the cursor admitted **%s/s** over that window (**%s**); "+
				"the edge's highest rate %s/s; the controller stepped up %d times and down %d times",
				rate(st.RatePerS), num(st.FromS, 1), num(st.ToS, 1), ratio2(f.SettledRatio), which, rate(capacity),
				rate(st.AdmittedPerS), ratio2(f.AdmittedRatio), rate(st.PeakRatePerS), st.Ups, st.Downs)
			if st.Downs > 0 {
				fmt.Fprintf(b, ", first down at %s s (%s); the decreases' signals: %s", num(st.FirstDownS, 1), st.FirstDownWhy,
					strings.Join(downSignals(x.Result.Admission.Changes), ", "))
			}
			b.WriteString(".\n\n")
		}
		a := x.Result.Admission
		fmt.Fprintf(b, "%d samples of the edge's setting (%d reads failed). The changes the origin recorded:\n\n", len(a.Samples), a.FailedReads)
		header(b, "t (s)", "rate before → after", "by")
		for _, ch := range a.Changes {
			line(b, num(ch.T, 1), rate(ch.BeforeRatePerS)+" → "+rate(ch.AfterRatePerS), ch.Actor)
		}
		b.WriteString("\n")
	}
}

// downSignals tallies the controller's decreases by the signal that made
// them, most first: "5 × Redis p99", "1 × reserve p99".
func downSignals(changes []crowdsim.RateChange) []string {
	counts := map[string]int{}
	var order []string
	for _, c := range changes {
		if !c.ByController() || c.AfterRatePerS >= c.BeforeRatePerS {
			continue
		}
		signal := signalOf(c.Why())
		if counts[signal] == 0 {
			order = append(order, signal)
		}
		counts[signal]++
	}
	slices.SortStableFunc(order, func(a, b string) int { return counts[b] - counts[a] })
	out := make([]string, len(order))
	for i, s := range order {
		out[i] = fmt.Sprintf("%d × %s", counts[s], s)
	}
	return out
}

// signalOf names the signal of a decrease's reason, as origin/internal/
// autotune words them: "Redis p99 100ms over 50ms" → "Redis p99".
func signalOf(why string) string {
	switch {
	case strings.HasPrefix(why, "reserve p99"):
		return "reserve p99"
	case strings.HasPrefix(why, "Redis p99"):
		return "Redis p99"
	case strings.HasPrefix(why, "order writer"):
		return "order writer lag"
	case strings.Contains(why, "reserves failed"):
		return "reserves failed"
	case strings.Contains(why, "not yet in Postgres"):
		return "intents pending"
	}
	return why
}

func writeComparisonNotes(b *strings.Builder, c Comparison, rs []run) {
	var notes []string
	for _, n := range c.Notes {
		notes = append(notes, "- "+n)
	}
	for _, x := range rs {
		for _, n := range x.r.Notes {
			notes = append(notes, fmt.Sprintf("- %s: %s", x.label, n))
		}
	}
	if len(notes) > 0 {
		b.WriteString("## Notes\n\n" + strings.Join(notes, "\n") + "\n")
	}
}
