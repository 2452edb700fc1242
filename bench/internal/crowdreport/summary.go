package crowdreport

import (
	"fmt"
	"strings"
)

// Summary is the report in about a dozen lines for the terminal: each run's
// totals (the ceiling's in one line), its bot cohorts' units in one, then
// every goal with its verdict (the bot goals only when a run had the
// defences on).
func Summary(runs Runs) string {
	var b strings.Builder
	for _, x := range runs.list() {
		r := x.r
		if x.label == "ceiling" {
			b.WriteString("ceiling (unthrottled): ")
			if reservesPerS(r) > 0 {
				fmt.Fprintf(&b, "%s reserves/s (holds granted)", rate(reservesPerS(r)))
			} else {
				fmt.Fprintf(&b, "did not sell out (%s reserved)", count(r.Fates.Reserved.Count))
			}
			fmt.Fprintf(&b, "; 5xx %s, timeouts %s\n", count(r.Status5xx), count(r.Timeouts))
			continue
		}
		fmt.Fprintf(&b, "%s: %s requests in %s s, peak %s/s; answered %s (4xx %s, 5xx %s), timeouts %s, transport errors %s\n",
			x.label, count(r.Requests), num(r.Wall, 1), rate(r.PeakRPS), count(r.Answered),
			count(r.Status4xx), count(r.Status5xx), count(r.Timeouts), count(r.Transport))
		fmt.Fprintf(&b, "  stock %s: sold %s, held %s, oversold %s, ledger %s",
			count(r.Stock), count(r.Sold), count(r.Held), count(r.Oversold), okWord(r.InvariantOK))
		if r.LastUnitAt > 0 {
			fmt.Fprintf(&b, "; sold out at %s s (%s holds granted/s)", num(r.LastUnitAt, 2), rate(reservesPerS(r)))
		}
		f := r.Fates
		fmt.Fprintf(&b, "\n  cpus: %s; simulator lag p99 %s s, its goroutines waited p99 %s ms to run",
			Pinning(r), num(r.StartLag.P99, 2), num(r.SchedWait[1], 1))
		if loops := CoreLoops(r); loops != "" {
			fmt.Fprintf(&b, "\n  cores: %s (before → after the crowd; ~70 ms on a quick core)", loops)
		}
		fmt.Fprintf(&b, "\n  fates: %s answered (p99 %s s), %s reserved, %s sold out, %s unknown\n",
			count(f.Answered), num(f.AnswerP99, 2), count(f.Reserved.Count), count(f.SoldOut.Count), count(f.Unknown))
		if hasBots(r) {
			fmt.Fprintf(&b, "  bots: %s\n", botsSummary(r))
		}
		for _, rg := range r.Regions {
			fmt.Fprintf(&b, "  region %s: %s of %s answered, answer p50 %s s p99 %s s, join p50 %s s, reserve p50 %s s\n",
				rg.Name, count(rg.Answered), count(rg.Shoppers), num(rg.Answer.P50, 3), num(rg.Answer.P99, 3),
				num(rg.Join.P50, 3), num(rg.Reserve.P50, 3))
		}
	}
	for _, g := range Goals(runs) {
		if g.Verdict == NotMeasured && g.Measured == noDefendedRun {
			continue // the bot goals of a run that had no defences to judge
		}
		fmt.Fprintf(&b, "%-4s  %s: %s\n", g.Verdict, g.Name, g.Measured)
	}
	return b.String()
}
