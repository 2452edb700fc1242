package crowdreport

import (
	"fmt"
	"math"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// The targets the flashgate run is held to.
const (
	BurstP99TargetMs   = 200  // p99 edge latency while the burst lasts, below
	SoldOutNewsTargetS = 1    // p99 time from the stock count's zero for good to "sold out" in line, at most
	RankCorrelationMin = 0.99 // Spearman's rho between arrival and admission, at least
	NaiveFactorMin     = 20   // how many times better than naive, at least
	AnswerTargetS      = 2    // p99 time from a shopper's first request to an honest answer, at most (the seeds' promise)

	// The run with the defences against bots on is held to these.
	PaidPerInstrumentMax = 1 // units paid with one payment instrument, at most: the per-account limit
	HonestAnswerRiseMaxS = 1 // how much the honest shoppers' p99 time to an answer may rise over the run with them off
)

// Verdict is how a run fared against one goal.
type Verdict string

const (
	Pass Verdict = "PASS"
	Miss Verdict = "MISS"
	// NotMeasured: the run has nothing to judge the goal by (no requests,
	// no burst, no baseline, no sell-out).
	NotMeasured Verdict = "N/A"
)

// Goal is one target, the figure measured against it and the verdict.
type Goal struct {
	Name     string  `json:"name"`
	Measured string  `json:"measured"`
	Verdict  Verdict `json:"verdict"`
}

// Goals judges the flashgate run (two of its goals compare it with the
// naive baseline and are NotMeasured without one), then the run with the
// defences against bots on (NotMeasured without one; the cost to honest
// shoppers also needs one with them off).
func Goals(runs Runs) []Goal {
	fg := &runs.Flashgate
	on, off := defendedRuns(runs)
	return []Goal{
		oversoldGoal(fg),
		status5xxGoal(fg),
		burstGoal(fg),
		noticeGoal(fg),
		rankGoal(fg),
		answerTimeGoal(fg, runs.Naive),
		answeredRateGoal(fg, runs.Naive),
		promiseGoal(fg),
		instrumentGoal(on),
		cohortShareGoal(on),
		honestCostGoal(on, off),
		tarpitGoal(on),
	}
}

// Missed reports whether any goal was missed.
func Missed(goals []Goal) bool {
	for _, g := range goals {
		if g.Verdict == Miss {
			return true
		}
	}
	return false
}

func verdict(ok bool) Verdict {
	if ok {
		return Pass
	}
	return Miss
}

func oversoldGoal(r *crowdsim.Result) Goal {
	g := Goal{Name: "oversold = 0", Measured: "no requests", Verdict: NotMeasured}
	if r.Requests > 0 {
		g.Measured = count(r.Oversold) + " units"
		g.Verdict = verdict(r.Oversold == 0)
	}
	return g
}

func status5xxGoal(r *crowdsim.Result) Goal {
	g := Goal{Name: "5xx = 0", Measured: "no requests", Verdict: NotMeasured}
	if r.Requests > 0 {
		g.Measured = count(r.Status5xx) + " of " + count(r.Requests) + " requests"
		g.Verdict = verdict(r.Status5xx == 0)
	}
	return g
}

func burstGoal(r *crowdsim.Result) Goal {
	g := Goal{
		Name:     fmt.Sprintf("p99 edge latency during the burst < %d ms", BurstP99TargetMs),
		Measured: "no burst window",
		Verdict:  NotMeasured,
	}
	w := r.BurstWindowS
	if r.Requests > 0 && w[1] > w[0] {
		g.Measured = fmt.Sprintf("%s ms over %s–%s s", num(r.BurstP99Ms, 1), num(w[0], 1), num(w[1], 1))
		g.Verdict = verdict(r.BurstP99Ms < BurstP99TargetMs)
	}
	return g
}

// noticeGoal is the seeds' broadcast: everyone in line hears "sold out" as
// soon as the counter reaches zero, timed from the source (SoldOutNews).
func noticeGoal(r *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("everyone in line hears sold out within %s s of the stock count reaching zero for good (p99)", num(SoldOutNewsTargetS, 0)),
		Verdict: NotMeasured,
	}
	n := r.SoldOutNews
	switch {
	case r.LastUnitAt <= 0:
		g.Measured = "did not sell out"
	case n == nil:
		g.Measured = "no zero of the stock count in the ledger"
	case n.Pipeline.Count == 0:
		g.Measured = fmt.Sprintf("everyone in line had been told before the count's last zero (%s s)", num(n.LastZeroAtS, 1))
	default:
		g.Measured = fmt.Sprintf("%s s (max %s s, %s shoppers)", num(n.Pipeline.P99, 2), num(n.Pipeline.Max, 2), count(n.Pipeline.Count))
		g.Verdict = verdict(n.Pipeline.P99 <= SoldOutNewsTargetS)
	}
	return g
}

func rankGoal(r *crowdsim.Result) Goal {
	f := r.Fairness
	g := Goal{
		Name:     fmt.Sprintf("rank correlation, arrival vs admission ≥ %s", num(RankCorrelationMin, 2)),
		Measured: "no shoppers compared",
		Verdict:  NotMeasured,
	}
	if f.Compared >= 2 {
		g.Measured = fmt.Sprintf("%s (%s shoppers)", num(f.RankCorrelation, 4), count(f.Compared))
		g.Verdict = verdict(f.RankCorrelation >= RankCorrelationMin)
	}
	return g
}

// promiseGoal is the seeds' promise: every shopper hears "in line", "in"
// or "sold out" within AnswerTargetS of their first request, at the p99
// (those never answered count as having waited until the crowd stopped).
func promiseGoal(r *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("p99 time to an honest answer (in line, in, sold out) ≤ %d s", AnswerTargetS),
		Verdict: NotMeasured, Measured: "no shoppers answered",
	}
	if f := r.Fates; f.Answered > 0 {
		g.Measured = fmt.Sprintf("%s s (%s answered; %s)", num(f.AnswerP99, 2), count(f.Answered), Pinning(r))
		g.Verdict = verdict(f.AnswerP99 <= AnswerTargetS)
	}
	return g
}

// answerTimeGoal: the naive p99 time-to-answer over flashgate's. Each p99 is
// over the shoppers who got an answer; the measured text gives how many.
func answerTimeGoal(fg, naive *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("p99 time to an honest answer (in line, in, sold out) ≥ %d× lower than naive", NaiveFactorMin),
		Verdict: NotMeasured,
	}
	switch {
	case naive == nil:
		g.Measured = "no naive run"
	case fg.Fates.Answered == 0 || naive.Fates.Answered == 0:
		g.Measured = fmt.Sprintf("answered shoppers: flashgate %s, naive %s", count(fg.Fates.Answered), count(naive.Fates.Answered))
	default:
		ratio := factor(naive.Fates.AnswerP99, fg.Fates.AnswerP99)
		g.Measured = fmt.Sprintf("naive %s s (%s answered) ÷ flashgate %s s (%s answered) = %s",
			num(naive.Fates.AnswerP99, 2), count(naive.Fates.Answered),
			num(fg.Fates.AnswerP99, 2), count(fg.Fates.Answered), times(ratio))
		g.Verdict = verdict(ratio >= NaiveFactorMin)
	}
	return g
}

func answeredRateGoal(fg, naive *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("answered requests per second during the burst ≥ %d× naive", NaiveFactorMin),
		Verdict: NotMeasured,
	}
	switch {
	case naive == nil:
		g.Measured = "no naive run"
	case fg.AnsweredRPS == 0 && naive.AnsweredRPS == 0:
		g.Measured = "neither run answered"
	default:
		ratio := factor(fg.AnsweredRPS, naive.AnsweredRPS)
		g.Measured = fmt.Sprintf("flashgate %s/s ÷ naive %s/s = %s",
			rate(fg.AnsweredRPS), rate(naive.AnsweredRPS), times(ratio))
		g.Verdict = verdict(ratio >= NaiveFactorMin)
	}
	return g
}

// factor is a/b: +Inf when only b is zero, 1 when both are.
func factor(a, b float64) float64 {
	switch {
	case b == 0 && a == 0:
		return 1
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}

func times(ratio float64) string {
	if math.IsInf(ratio, 1) {
		return "∞×"
	}
	return num(ratio, 1) + "×"
}
