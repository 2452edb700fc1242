// Package crowdreport renders a crowd run — the flashgate stack's, and beside it
// the naive baseline's under the same crowd and an unthrottled ceiling run —
// as JSON, as a Markdown report with its goals marked PASS or MISS, as a few
// terminal lines, and as PNG charts.
package crowdreport

import (
	"math"
	"strconv"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// Runs are the results one report covers. Flashgate is always there (it may
// be empty if the run produced nothing); Naive and Ceiling are nil when those
// runs were not made.
type Runs struct {
	Flashgate crowdsim.Result `json:"flashgate"`
	// Naive is the baseline (every buy a conditional UPDATE on Postgres)
	// under the same crowd.
	Naive *crowdsim.Result `json:"naive,omitempty"`
	// Ceiling is the stack with admission unthrottled: how fast it can
	// reserve at all.
	Ceiling *crowdsim.Result `json:"ceiling,omitempty"`
	// Defended is the same scenario again with the defences against bots
	// on, when Flashgate ran them off (make bench): the bot goals are
	// judged on it, and on what it cost the honest shoppers beside
	// Flashgate.
	Defended *crowdsim.Result `json:"defended,omitempty"`
}

// run is one present result with the label the report gives it.
type run struct {
	label string
	r     *crowdsim.Result
}

// list returns the present runs in report order: flashgate, defended,
// naive, ceiling.
func (rs *Runs) list() []run {
	out := []run{{flashgateLabel(&rs.Flashgate), &rs.Flashgate}}
	if rs.Defended != nil {
		out = append(out, run{flashgateLabel(rs.Defended), rs.Defended})
	}
	if rs.Naive != nil {
		out = append(out, run{"naive", rs.Naive})
	}
	if rs.Ceiling != nil {
		out = append(out, run{"ceiling", rs.Ceiling})
	}
	return out
}

// reservesPerS is the rate at which the stack granted holds: what the
// simulator measured (201s over the span from the first to the last), or,
// for a result without it, the stock over the time to the last unit.
func reservesPerS(r *crowdsim.Result) float64 {
	if r.ReservesPerS > 0 {
		return r.ReservesPerS
	}
	if r.LastUnitAt <= 0 {
		return 0
	}
	return float64(r.Stock) / r.LastUnitAt
}

// count formats n with thousands separators: 1234567 → "1,234,567".
func count[T int | int64](n T) string { return benchreport.Thousands(int64(n)) }

// rate formats a rate rounded to a whole number, with thousands separators.
func rate(v float64) string {
	if !finite(v) {
		return num(v, 0)
	}
	return count(int64(math.Round(v)))
}

// num formats v with prec decimals; prec -1 gives the fewest that read back exactly.
func num(v float64, prec int) string {
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// pct formats a share (0..1) as a percentage.
func pct(share float64) string {
	return num(100*share, 1) + " %"
}

// flashgateLabel is a flashgate run's label: "flashgate", and the
// defences it switched, when it switched them ("flashgate, defences on").
func flashgateLabel(r *crowdsim.Result) string {
	if m := r.Bots.Defences.Mode; m != "" {
		return "flashgate, defences " + m
	}
	return "flashgate"
}
