package faults

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Report is what docs/RELIABILITY.md is written from.
type Report struct {
	Command string    // how the run was started
	When    time.Time // when it ended
	Machine string
	Load    Load
	Results []Result
}

// WriteMarkdown writes the report: the table, then what each scenario
// did, then why each failure failed.
func WriteMarkdown(w io.Writer, rep Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	passed := 0
	for _, r := range rep.Results {
		if r.Pass() {
			passed++
		}
	}
	l := rep.Load
	p("# Reliability\n\n")
	p("Written by `%s` on %s (%s). Do not edit by hand: run it again.\n\n", rep.Command, rep.When.UTC().Format("2006-01-02 15:04 MST"), rep.Machine)
	p("`make chaos` plays a real sale through the real binaries — origin, two edges and the sandbox payment gateway, with their own "+
		"Redis (through a delay proxy), Postgres cluster and, for the failovers, a replica (and three Sentinels), all on free 127.0.0.1 "+
		"ports — and breaks one thing while it runs. Each scenario: %d shoppers for %d units, admitted at %g/s, arriving over %g s "+
		"from the start, holds of %d s, %.0f%% of holders paying; probes reserve (with an admission token the harness signs) and join "+
		"on a second sale every %v; two line sales whose shoppers join just after the start and poll both edges in turn until %v after the fault: "+
		"%d in a sale ops paused before anyone joined, %d in a sale ops lowered from the edges' default %g/s to %g/s; "+
		"the fault starts 1.5–3 s after the start. A request unanswered after %v is a hang. The binaries run with their defaults "+
		"but for what must fit in a scenario's seconds: the origin reconciles payments every 2 s (default 30 s), takes over a silent "+
		"writer's stream after 4 s (default 10 s) and gives a paying hold 20 s of grace; the edge raises the line's durable ceilings "+
		"in blocks of at least 32 places (default 256, sized for hundreds of admissions a second); the gateway retries webhooks from 200 ms.\n\n",
		l.Shoppers, l.Stock, l.RatePerS, l.ArrivalS, l.HoldTTLS, 100*l.PayShare, l.ProbeEvery, lineAfter,
		l.PausedShoppers, l.SlowShoppers, edgeDefaultRate, l.SlowRatePerS, l.RequestTimeout)
	p("%s\n\n", providersIntro(rep.Results))
	p("**%d of %d scenarios pass.**\n\n", passed, len(rep.Results))
	p("| scenario | shoppers | sold | oversold | 201s lost | lost-but-reported | double | 5xx | max answer time | recovery s | line | result |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rep.Results {
		p("| %s | %d | %d/%d | %d | %d of %d | %d | %d | %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Shoppers, r.Sold, r.Stock, r.Oversold, r.Lost, r.Accepted, r.LostReported, r.Double,
			fiveXX(r), answerTime(r), recovery(r), lineCell(r), verdict(r))
	}
	p("\n## Scenarios\n\n")
	for _, r := range rep.Results {
		p("- **%s**: %s.\n", r.Scenario, r.What)
	}
	p("\n## What failed, and notes\n\n")
	for _, r := range rep.Results {
		if r.Pass() && len(r.Notes) == 0 {
			continue
		}
		p("### %s — %s\n\n", r.Scenario, verdict(r))
		for _, f := range r.Failures {
			p("- FAIL: %s\n", f)
		}
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	p("## Columns\n\n")
	p("- **sold**: units of the crowd's sale sold in Postgres, of the stock. **oversold**: units sold or held beyond the total, " +
		"paid orders or gateway charges (not refunded) beyond the stock, for the crowd's and the probes' sales.\n")
	p("- **201s lost**: reservations answered 201 (the crowd's and the probes') that are neither in Postgres once the order writer " +
		"has caught up nor answered 200 by `GET /v1/reservations/{id}`, of all 201s. **lost-but-reported**: of those, how many the " +
		"origin reports lost — a `lost…` count in its ledger (`GET /admin/sales/{id}/ledger`) or the reservation's own answer.\n")
	p("- **double**: gateway charges (succeeded, not refunded) beyond one per account and sale. A charge whose order is not paid " +
		"(nor refunded) once webhooks and the reconciler have had 20 s is a paid order lost, listed under the scenario.\n")
	p("- **5xx**: answers of 500 and above other than 503 `please_wait` (the please_wait answers in brackets); the gateway's own " +
		"pay page is left out. **max answer time**: the slowest answer of the stack; hangs (no answer within the timeout) are counted apart.\n")
	p("- **recovery s**: from the fault's end until a probe reserve and a probe join, both sent after it, had succeeded.\n")
	p("- **line**: what the line sales admitted, on both edges, before, during and after the fault: \"paused: 0 of n admitted\" — "+
		"nobody in the paused sale told admitted, and no answer or admin view showing its `now_serving` past where the pause found it; "+
		"\"%g/s: k by t s (bound b)\" — by any moment t, neither the shoppers told admitted nor the `now_serving` any answer showed "+
		"exceed rate × t + ceil(rate × %v) per Redis loss the fault caused before t + 1 (the early admissions docs/FAIRNESS.md allows "+
		"after a loss, and a tick's rounding), shown at the end or where it broke. Also checked, for the crowd's sale: one place per account "+
		"and one account per place, places kept while waiting and on joining again, nobody admitted told to wait again, the cursor never "+
		"going back, ten newcomers after the fault getting new places; and the ops settings (the crowd's rate, the paused sale's pause, "+
		"the slow sale's rate) on every edge. \"n broken\" counts what failed.\n", l.SlowRatePerS, earlyWindow)
	p("- **result**: PASS when all of that holds, every shopper got an answer (a place, a unit or sold out) within %g s of "+
		"arriving, the stack recovered within %v of the fault's end, and the fault's own checks held (an origin started while "+
		"Redis or Postgres was down never exited and answered `/readyz` 200 within %v of its return).\n", l.LifeS, l.RecoverWithin, originReadyWithin)
	_, err := io.WriteString(w, b.String())
	return err
}

// providersIntro says which payment provider each scenario played with:
// the payment scenarios once per provider, the others with the default.
func providersIntro(results []Result) string {
	var names, providers []string
	for _, r := range results {
		if !r.Payments {
			continue
		}
		name, _, _ := strings.Cut(r.Scenario, " (")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		if !slices.Contains(providers, r.Provider) {
			providers = append(providers, r.Provider)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("The origin takes payments through the `%s` provider, the sandbox gateway's own protocol.", DefaultProvider)
	}
	return fmt.Sprintf("The payment scenarios (%s) play once per payment provider the sandbox gateway can play (`%s`), their rows "+
		"naming it: the origin takes payments through that provider (`FLASHGATE_PAYMENT_PROVIDER`), its API pointed at the sandbox, "+
		"which answers as that provider does, signs its webhooks that provider's way and is listed by the origin's reconciler through "+
		"that provider's own listing API. The other scenarios play with `%s`, the sandbox gateway's own protocol.",
		strings.Join(names, ", "), strings.Join(providers, "`, `"), DefaultProvider)
}

func fiveXX(r Result) string { return fmt.Sprintf("%d (%d please_wait)", r.BadFiveXX, r.PleaseWait) }

func answerTime(r Result) string {
	s := fmt.Sprintf("%.2f s", r.MaxAnswer.Seconds())
	if r.Hangs > 0 {
		s += fmt.Sprintf(", %d hung", r.Hangs)
	}
	return s
}

func recovery(r Result) string {
	if !r.Recovered {
		return "never"
	}
	return fmt.Sprintf("%.1f", r.Recovery.Seconds())
}

func lineCell(r Result) string {
	switch {
	case len(r.Line) == 0 && r.LineChecked == "":
		return "kept"
	case len(r.Line) == 0:
		return r.LineChecked
	case r.LineChecked == "":
		return fmt.Sprintf("%d broken", len(r.Line))
	}
	return fmt.Sprintf("%d broken: %s", len(r.Line), r.LineChecked)
}

func verdict(r Result) string {
	if r.Pass() {
		return "PASS"
	}
	return "FAIL"
}

// Summary is a short text table for the terminal.
func Summary(results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %-5s %8s %9s %6s %12s %8s %s\n", "scenario", "", "sold", "201 lost", "double", "5xx", "recovery", "why")
	for _, r := range results {
		fmt.Fprintf(&b, "%-32s %-5s %8s %9s %6d %12s %8s %s\n", r.Scenario, verdict(r), fmt.Sprintf("%d/%d", r.Sold, r.Stock),
			fmt.Sprintf("%d/%d", r.Lost-r.LostReported, r.Lost), r.Double, fiveXX(r)[:strings.Index(fiveXX(r), " ")], recovery(r), strings.Join(r.Failures, "; "))
	}
	return b.String()
}
