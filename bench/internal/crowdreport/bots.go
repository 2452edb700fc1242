package crowdreport

import (
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// defendedRuns are the run with the defences against bots on (Defended,
// or Flashgate when it ran them on) and the one with them off beside it
// (Flashgate, when it ran them off); nil where there is none.
func defendedRuns(runs Runs) (on, off *crowdsim.Result) {
	fg := &runs.Flashgate
	switch {
	case runs.Defended != nil && runs.Defended.Bots.Defences.Mode == crowdsim.DefencesOn:
		on = runs.Defended
	case fg.Bots.Defences.Mode == crowdsim.DefencesOn:
		on = fg
	}
	if on != nil && on != fg && fg.Bots.Defences.Mode == crowdsim.DefencesOff {
		off = fg
	}
	return on, off
}

// cohortTotal is one cohort's rows of the fairness table added up.
type cohortTotal struct {
	name                 string
	bot                  bool
	accounts, held, paid int
	maxPaidPerInstrument int
	challenged           int // solved a proof of work for their join (Group.Challenged)
	challengeRequired    int // had a join answered 403 challenge_required
	tarpitted            int
}

// cohortTotals adds each cohort's rows up over its arrival classes, in the
// table's order (the honest shoppers first), and counts every account.
func cohortTotals(groups []crowdsim.Group) (totals []cohortTotal, accounts int) {
	at := map[string]int{}
	for _, g := range groups {
		i, ok := at[g.Cohort]
		if !ok {
			i = len(totals)
			at[g.Cohort] = i
			totals = append(totals, cohortTotal{name: g.Cohort, bot: g.Bot})
		}
		t := &totals[i]
		t.accounts += g.Accounts
		t.held += g.Held
		t.paid += g.Paid
		t.maxPaidPerInstrument = max(t.maxPaidPerInstrument, g.MaxPaidPerInstrument)
		t.challenged += g.Challenged
		t.challengeRequired += g.ChallengeRequired
		t.tarpitted += g.Tarpitted
		accounts += g.Accounts
	}
	return totals, accounts
}

// honestWinRate is the win rate of the honest shoppers who arrived in the
// same class (pre-queue or later) as g; false when there were none.
func honestWinRate(groups []crowdsim.Group, g crowdsim.Group) (float64, bool) {
	for _, h := range groups {
		if !h.Bot && h.PreQueue == g.PreQueue && h.Accounts > 0 {
			return h.WinRate(), true
		}
	}
	return 0, false
}

func share(n, of int) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

const noDefendedRun = "no run with the defences on"

// instrumentGoal: with the defences on, no payment instrument paid for
// more units than an account may buy.
func instrumentGoal(on *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("no payment instrument paid for more than %d unit (defences on)", PaidPerInstrumentMax),
		Verdict: NotMeasured, Measured: noDefendedRun,
	}
	if on == nil {
		return g
	}
	totals, _ := cohortTotals(on.Bots.Groups)
	most, paid := 0, 0
	var parts []string
	for _, t := range totals {
		most, paid = max(most, t.maxPaidPerInstrument), paid+t.paid
		parts = append(parts, fmt.Sprintf("%s %s", t.name, count(t.maxPaidPerInstrument)))
	}
	if paid == 0 {
		g.Measured = "no unit paid"
		return g
	}
	g.Measured = fmt.Sprintf("at most %s (%s)", count(most), strings.Join(parts, ", "))
	g.Verdict = verdict(most <= PaidPerInstrumentMax)
	return g
}

// cohortShareGoal: with the defences on, no bot cohort takes home a larger
// share of the stock (units paid for) than its share of the accounts.
func cohortShareGoal(on *crowdsim.Result) Goal {
	g := Goal{
		Name:    "each bot cohort's share of the stock (units paid) ≤ its share of the accounts (defences on)",
		Verdict: NotMeasured, Measured: noDefendedRun,
	}
	if on == nil {
		return g
	}
	totals, accounts := cohortTotals(on.Bots.Groups)
	var parts []string
	ok := true
	for _, t := range totals {
		if !t.bot {
			continue
		}
		units, accs := share(t.paid, on.Stock), share(t.accounts, accounts)
		ok = ok && units <= accs
		parts = append(parts, fmt.Sprintf("%s %s of the stock, %s of the accounts", t.name, pct(units), pct(accs)))
	}
	if len(parts) == 0 || on.Stock <= 0 {
		g.Measured = "no bot cohort"
		return g
	}
	g.Measured = strings.Join(parts, "; ")
	g.Verdict = verdict(ok)
	return g
}

// honestCostGoal: the defences cost an honest shopper at most
// HonestAnswerRiseMaxS of time to an answer at the p99.
func honestCostGoal(on, off *crowdsim.Result) Goal {
	g := Goal{
		Name:    fmt.Sprintf("honest shoppers' p99 time to an answer rises by ≤ %d s (defences on vs off)", HonestAnswerRiseMaxS),
		Verdict: NotMeasured, Measured: noDefendedRun,
	}
	switch {
	case on == nil:
		return g
	case off == nil:
		g.Measured = "no run with the defences off beside it"
		return g
	case honestShoppers(on) == 0 || honestShoppers(off) == 0:
		g.Measured = "no honest shoppers"
		return g
	}
	rise := on.Bots.HonestAnswerP99 - off.Bots.HonestAnswerP99
	g.Measured = fmt.Sprintf("off %s s → on %s s: %s s", num(off.Bots.HonestAnswerP99, 2), num(on.Bots.HonestAnswerP99, 2), signed(rise, 2))
	g.Verdict = verdict(rise <= HonestAnswerRiseMaxS+1e-9) // at the bound to the nanosecond, whatever the floats
	return g
}

// tarpitGoal: with the defences on, the edge's tarpit holds no honest
// shopper (by account, or by an address one sends).
func tarpitGoal(on *crowdsim.Result) Goal {
	g := Goal{Name: "0 honest shoppers tarpitted (defences on)", Verdict: NotMeasured, Measured: noDefendedRun}
	if on == nil {
		return g
	}
	d := on.Bots.Defences
	switch {
	case d.Tarpit != "on":
		g.Measured = "tarpit " + or(d.Tarpit, "not set")
		return g
	case on.Bots.TarpitEntries < 0:
		g.Measured = "the tarpit's list could not be read"
		return g
	}
	totals, _ := cohortTotals(on.Bots.Groups)
	honest, tarpitted := 0, 0
	for _, t := range totals {
		if !t.bot {
			honest, tarpitted = honest+t.accounts, tarpitted+t.tarpitted
		}
	}
	g.Measured = fmt.Sprintf("%s of %s (%s entries in the tarpit)", count(tarpitted), count(honest), count(on.Bots.TarpitEntries))
	g.Verdict = verdict(tarpitted == 0)
	return g
}

// honestShoppers is how many honest shoppers a run set going.
func honestShoppers(r *crowdsim.Result) int {
	n := 0
	for _, g := range r.Bots.Groups {
		if !g.Bot {
			n += g.Accounts
		}
	}
	return n
}

// signed formats v with its sign: +0.87, -0.10.
func signed(v float64, prec int) string {
	if v >= 0 {
		return "+" + num(v, prec)
	}
	return num(v, prec)
}

// hasBots reports whether a run had bot cohorts or switched the defences
// against them: whether its fairness table says anything.
func hasBots(r *crowdsim.Result) bool {
	return len(r.Bots.Groups) > 0 && (r.Scenario.BotAccounts() > 0 || r.Bots.Defences.Mode != "")
}

// botRuns are the runs whose crowd the fairness table splits (flashgate's
// with bots or defences).
func botRuns(rs []run) []run {
	var out []run
	for _, x := range rs {
		if hasBots(x.r) {
			out = append(out, x)
		}
	}
	return out
}

// writeBots is the report's part on the bot cohorts: the defences each run
// had, the cohorts' tactics, the fairness table, the shared admission
// tokens and what the defences cost the honest shoppers.
func writeBots(b *strings.Builder, runs Runs, rs []run) {
	br := botRuns(rs)
	if len(br) == 0 {
		return
	}
	b.WriteString("## Bots and defences\n\n")
	for _, x := range br {
		fmt.Fprintf(b, "- **%s**: %s\n", x.label, defencesLine(x.r.Bots.Defences))
	}
	b.WriteString("\n")
	writeTactics(b, runs.Flashgate.Scenario)
	writeFairnessTable(b, br)
	writeSharedTokens(b, br)
	writeHonestCost(b, br)
}

// defencesLine says what a run's defences were.
func defencesLine(d crowdsim.Defences) string {
	if d.Mode == "" {
		return "defences as the stack had them (none switched)"
	}
	pow := "proof of work off"
	if d.Mode == crowdsim.DefencesOn {
		pow = fmt.Sprintf("proof of work at %d bits at the edge, devices' time modelled at %d bits (a phone %s hashes/s, a server core %s hashes/s)",
			d.ChallengeBits, d.DeviceBits, rate(d.PhoneHashesPerS), rate(d.ServerHashesPerS))
	}
	return fmt.Sprintf("%s; tarpit %s; one unit per payer %s", pow, or(d.Tarpit, "not set"), or(d.OneUnitPerPayer, "not set"))
}

// writeTactics lists each bot cohort's tactics.
func writeTactics(b *strings.Builder, sc crowdsim.Scenario) {
	cohorts := sc.Cohorts()
	if len(cohorts) == 0 {
		return
	}
	press := "at once when it is their turn"
	if sc.ReactionS > 0 {
		press = num(0.5*sc.ReactionS, 2) + "–" + num(1.5*sc.ReactionS, 2) + " s after their turn"
	}
	b.WriteString("The bot cohorts' tactics (honest shoppers: an address each, polling as told, pressing Buy " + press +
		", a payment instrument each, a phone's CPU):\n\n")
	header(b, "cohort", "accounts", "addresses", "arrival", "polling", "reserve", "admission token", "payment instruments", "proof of work")
	for _, c := range cohorts {
		addresses := "one each, a /24 each"
		if c.Addresses > 0 {
			addresses = count(c.Addresses) + " in one /24"
		}
		arrival := "at the open"
		if c.PreQueue {
			arrival = "at the pre-queue's start"
		}
		polling := "as told"
		if c.PollMS > 0 {
			polling = "every " + count(c.PollMS) + " ms"
		}
		reserve := "a person's reaction"
		if c.InstantReserve {
			reserve = "at once"
		}
		token := "its own"
		if c.ShareTokens {
			token = "also handed to another account"
		}
		instruments := "one each"
		if c.AccountsPerInstrument > 1 {
			instruments = "one per " + count(c.AccountsPerInstrument) + " accounts"
		}
		pow := "a phone"
		if c.ServerCPU {
			pow = "a server core"
		}
		line(b, c.Name, count(c.Accounts), addresses, arrival, polling, reserve, token, instruments, pow)
	}
	b.WriteString("\n")
}

func arrivalClass(preQueue bool) string {
	if preQueue {
		return "pre-queue"
	}
	return "later"
}

// writeFairnessTable is each cohort's accounts by arrival class beside the
// honest shoppers of the same class.
func writeFairnessTable(b *strings.Builder, br []run) {
	b.WriteString("Who got the units. Accounts are compared with the honest shoppers who arrived in the same class — the " +
		"pre-queue (before the start; its order is drawn at random) or later — since arriving early is not cheating. " +
		"*Held* is the accounts that won a hold, and the *win rate* that share of the class's accounts; *paid* is the units " +
		"their orders say were paid for, which the shares of the stock count; per payment instrument, over the instruments " +
		"that paid for at least one unit. *Solved a proof of work* is the accounts that solved one for their join — the " +
		"challenge the sale snapshot publishes, solved before the one join, or a personal one — and *asked again (403)* " +
		"those whose join was answered 403 challenge_required, which costs a second join (no challenge published, or its " +
		"solution refused).\n\n")
	header(b, "run", "cohort", "arrival", "accounts", "held", "win rate", "honest win rate, same arrival", "paid",
		"share of the stock (paid)", "share of the accounts", "paid per instrument, max / mean", "solved a proof of work",
		"asked again (403)", "tarpitted")
	for _, x := range br {
		groups := x.r.Bots.Groups
		_, accounts := cohortTotals(groups)
		for _, g := range groups {
			honest := "—"
			if hr, ok := honestWinRate(groups, g); ok && g.Bot {
				honest = pct(hr)
			}
			perInstrument := "—"
			if g.Instruments > 0 {
				perInstrument = count(g.MaxPaidPerInstrument) + " / " + num(g.MeanPaidPerInstrument, 2)
			}
			line(b, x.label, g.Cohort, arrivalClass(g.PreQueue), count(g.Accounts), count(g.Held), pct(g.WinRate()), honest,
				count(g.Paid), pct(share(g.Paid, x.r.Stock)), pct(share(g.Accounts, accounts)), perInstrument,
				count(g.Challenged), count(g.ChallengeRequired), count(g.Tarpitted))
		}
	}
	b.WriteString("\n")
}

// writeSharedTokens shows what the reserves with another account's
// admission token got.
func writeSharedTokens(b *strings.Builder, br []run) {
	var rows [][]string
	for _, x := range br {
		for _, g := range x.r.Bots.Groups {
			if st := g.SharedTokens; st != nil {
				rows = append(rows, []string{x.label, g.Cohort, count(st.Tried), count(st.Refused), count(st.OwnersHold),
					count(st.ExtraHolds), count(st.Other)})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("Admission tokens handed to another account of the cohort, which reserved with it at the same moment as the " +
		"token's own account (the edge binds a token to its account):\n\n")
	header(b, "run", "cohort", "reserves with another's token", "refused (401/403)", "the owner's hold (200)",
		"extra holds (201)", "other")
	for _, r := range rows {
		line(b, r...)
	}
	b.WriteString("\n")
}

// writeHonestCost shows what the defences cost the honest shoppers: the
// p99 time to an answer, and how many solved a proof of work, were answered
// 403 challenge_required (a second join) and were tarpitted, per run, and
// on minus off when both ran.
func writeHonestCost(b *strings.Builder, br []run) {
	b.WriteString("What it cost the honest shoppers (bots left out):\n\n")
	cols := labels(br)
	var on, off *crowdsim.Result
	for _, x := range br {
		switch x.r.Bots.Defences.Mode {
		case crowdsim.DefencesOn:
			on = x.r
		case crowdsim.DefencesOff:
			off = x.r
		}
	}
	both := on != nil && off != nil
	if both {
		cols = append(cols, "on − off")
	}
	header(b, "", cols...)
	type row struct {
		name string
		of   func(r *crowdsim.Result) float64
		cell func(v float64) string
		diff func(v float64) string
	}
	honestShare := func(field func(crowdsim.Group) int) func(r *crowdsim.Result) float64 {
		return func(r *crowdsim.Result) float64 {
			n := 0
			for _, g := range r.Bots.Groups {
				if !g.Bot {
					n += field(g)
				}
			}
			return share(n, honestShoppers(r))
		}
	}
	seconds := func(v float64) string { return num(v, 2) + " s" }
	points := func(v float64) string { return signed(100*v, 1) + " points" }
	for _, rw := range []row{
		{"p99 time to an answer", func(r *crowdsim.Result) float64 { return r.Bots.HonestAnswerP99 }, seconds,
			func(v float64) string { return signed(v, 2) + " s" }},
		{"solved a proof of work", honestShare(func(g crowdsim.Group) int { return g.Challenged }), pct, points},
		{"answered 403 challenge_required", honestShare(func(g crowdsim.Group) int { return g.ChallengeRequired }), pct, points},
		{"tarpitted", honestShare(func(g crowdsim.Group) int { return g.Tarpitted }), pct, points},
	} {
		cells := []string{rw.name}
		for _, x := range br {
			cells = append(cells, rw.cell(rw.of(x.r)))
		}
		if both {
			cells = append(cells, rw.diff(rw.of(on)-rw.of(off)))
		}
		line(b, cells...)
	}
	b.WriteString("\n")
}

// botsSummary is the terminal's line on a run's bot cohorts: each
// cohort's holds and paid units beside the honest shoppers of its class,
// and the honest shoppers' proofs of work, 403 challenge_required answers
// and tarpit.
func botsSummary(r *crowdsim.Result) string {
	groups := r.Bots.Groups
	var parts []string
	for _, g := range groups {
		if !g.Bot {
			continue
		}
		s := fmt.Sprintf("%s (%s) %s held, %s paid of %s accounts, win rate %s", g.Cohort, arrivalClass(g.PreQueue),
			count(g.Held), count(g.Paid), count(g.Accounts), pct(g.WinRate()))
		if hr, ok := honestWinRate(groups, g); ok {
			s += " vs honest " + pct(hr)
		}
		if g.Instruments > 0 {
			s += fmt.Sprintf(", ≤ %s paid per instrument", count(g.MaxPaidPerInstrument))
		}
		parts = append(parts, s)
	}
	honest := honestShoppers(r)
	totals, _ := cohortTotals(groups)
	solved, asked, tarpitted := 0, 0, 0
	for _, t := range totals {
		if !t.bot {
			solved, asked, tarpitted = solved+t.challenged, asked+t.challengeRequired, tarpitted+t.tarpitted
		}
	}
	parts = append(parts, fmt.Sprintf("honest: answer p99 %s s, %s solved a proof of work, %s answered challenge_required, %s tarpitted",
		num(r.Bots.HonestAnswerP99, 2), pct(share(solved, honest)), pct(share(asked, honest)), count(tarpitted)))
	return strings.Join(parts, "; ")
}
