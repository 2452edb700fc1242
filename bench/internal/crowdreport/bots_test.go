package crowdreport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// withBots is fabricated() run as make bench runs it: the scenario with a
// smart cohort beside the hammering one, defences off (Flashgate), then on
// (Defended), each meeting every bot goal. With them on, every account
// that joins solves the published challenge first; a few honest ones and
// the hammering cohort are asked again (403 challenge_required). The stock is 1,000 units; the
// crowd 50,000 honest shoppers (15,000 in the pre-queue), 1,000 smart bots
// in the pre-queue and 200 hammering ones at the open: 51,200 accounts.
func withBots() Runs {
	runs := fabricated()
	runs.Flashgate.Scenario.Smart = crowdsim.SmartCohort(1000)
	off := &runs.Flashgate
	off.Bots = crowdsim.Bots{
		Defences: crowdsim.Defences{Mode: crowdsim.DefencesOff, ChallengeBits: 4, DeviceBits: 17, PhoneHashesPerS: 150_000,
			ServerHashesPerS: 3_000_000, Tarpit: "off", OneUnitPerPayer: "off"},
		HonestAnswerP99: 1.2,
		Groups: []crowdsim.Group{
			{Cohort: "honest", PreQueue: true, Accounts: 15_000, Held: 750, Paid: 520, Instruments: 520, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1},
			{Cohort: "honest", Accounts: 35_000, Held: 50, Paid: 35, Instruments: 35, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1},
			{Cohort: "hammering", Bot: true, Accounts: 200, Held: 0},
			{Cohort: "smart", Bot: true, PreQueue: true, Accounts: 1000, Held: 200, Paid: 200, Instruments: 20, MaxPaidPerInstrument: 14,
				MeanPaidPerInstrument: 10, SharedTokens: &crowdsim.SharedTokens{Tried: 200, Refused: 200}},
		},
	}
	on := runs.Flashgate
	on.Started = on.Started.Add(2 * time.Minute)
	on.Bots.Defences.Mode, on.Bots.Defences.Tarpit, on.Bots.Defences.OneUnitPerPayer = crowdsim.DefencesOn, "on", "on"
	on.Bots.HonestAnswerP99, on.Bots.TarpitEntries = 2.05, 3
	on.Bots.Groups = []crowdsim.Group{
		{Cohort: "honest", PreQueue: true, Accounts: 15_000, Held: 900, Paid: 640, Instruments: 640, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1, Challenged: 15_000},
		{Cohort: "honest", Accounts: 35_000, Held: 80, Paid: 56, Instruments: 56, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1, Challenged: 34_000,
			ChallengeRequired: 350},
		{Cohort: "hammering", Bot: true, Accounts: 200, Held: 0, Challenged: 200, ChallengeRequired: 200, Tarpitted: 200},
		{Cohort: "smart", Bot: true, PreQueue: true, Accounts: 1000, Held: 60, Paid: 19, Instruments: 19, MaxPaidPerInstrument: 1,
			MeanPaidPerInstrument: 1, Challenged: 1000, SharedTokens: &crowdsim.SharedTokens{Tried: 60, Refused: 59, Other: 1}},
	}
	runs.Defended = &on
	return runs
}

func goalNamed(t *testing.T, goals []Goal, prefix string) Goal {
	t.Helper()
	for _, g := range goals {
		if strings.HasPrefix(g.Name, prefix) {
			return g
		}
	}
	t.Fatalf("no goal named %q…", prefix)
	return Goal{}
}

// The bot goals judge the run with the defences on: each passes as
// fabricated, misses when its figure is one past its bound, passes at the
// bound, and is not measured without what it needs.
func TestBotGoals(t *testing.T) {
	const (
		instrument = "no payment instrument"
		share      = "each bot cohort's share"
		cost       = "honest shoppers' p99"
		tarpit     = "0 honest shoppers tarpitted"
	)
	smart := func(r *Runs) *crowdsim.Group { return &r.Defended.Bots.Groups[3] }
	tests := []struct {
		name   string
		change func(*Runs)
		want   map[string]Verdict // the bot goals not listed must PASS
	}{
		{"all met", func(*Runs) {}, nil},
		{"an instrument paid twice", func(r *Runs) { smart(r).MaxPaidPerInstrument = 2 }, map[string]Verdict{instrument: Miss}},
		{"an honest instrument paid twice", func(r *Runs) { r.Defended.Bots.Groups[1].MaxPaidPerInstrument = 2 }, map[string]Verdict{instrument: Miss}},
		{"nobody paid", func(r *Runs) {
			for i := range r.Defended.Bots.Groups {
				r.Defended.Bots.Groups[i].Paid, r.Defended.Bots.Groups[i].MaxPaidPerInstrument = 0, 0
			}
		}, map[string]Verdict{instrument: NotMeasured}},
		// 1,000 of 51,200 accounts is 1.953 %; 1.953 % of 1,000 units is 19.5.
		{"the smart cohort takes 20 units", func(r *Runs) { smart(r).Paid = 20 }, map[string]Verdict{share: Miss}},
		{"the hammering cohort takes 4 units", func(r *Runs) { r.Defended.Bots.Groups[2].Paid = 4 }, map[string]Verdict{share: Miss}},
		{"the hammering cohort takes 3 units", func(r *Runs) { r.Defended.Bots.Groups[2].Paid = 3 }, nil},
		{"held units do not count, paid ones do", func(r *Runs) { smart(r).Held = 900 }, nil},
		{"no bot cohort", func(r *Runs) { r.Defended.Bots.Groups = r.Defended.Bots.Groups[:2] }, map[string]Verdict{share: NotMeasured}},
		{"the honest p99 rises 1.01 s", func(r *Runs) { r.Defended.Bots.HonestAnswerP99 = 2.21 }, map[string]Verdict{cost: Miss}},
		{"the honest p99 rises exactly 1 s", func(r *Runs) { r.Defended.Bots.HonestAnswerP99 = 2.2 }, nil},
		{"the honest p99 falls", func(r *Runs) { r.Defended.Bots.HonestAnswerP99 = 0.5 }, nil},
		{"an honest shopper tarpitted", func(r *Runs) { r.Defended.Bots.Groups[1].Tarpitted = 1 }, map[string]Verdict{tarpit: Miss}},
		{"a bot tarpitted is fine", func(r *Runs) { smart(r).Tarpitted = 1000 }, nil},
		{"tarpit not available", func(r *Runs) { r.Defended.Bots.Defences.Tarpit = "not available: 404 not found" },
			map[string]Verdict{tarpit: NotMeasured}},
		{"tarpit list unread", func(r *Runs) { r.Defended.Bots.TarpitEntries = -1 }, map[string]Verdict{tarpit: NotMeasured}},
		{"defences on only", func(r *Runs) { r.Flashgate, r.Defended = *r.Defended, nil }, map[string]Verdict{cost: NotMeasured}},
		{"defences off only", func(r *Runs) { r.Defended = nil },
			map[string]Verdict{instrument: NotMeasured, share: NotMeasured, cost: NotMeasured, tarpit: NotMeasured}},
		{"the off run is judged by none", func(r *Runs) {
			r.Flashgate.Bots.Groups[3].Paid, r.Flashgate.Bots.Groups[1].Tarpitted = 900, 5
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := withBots()
			tt.change(&runs)
			goals := Goals(runs)
			for _, name := range []string{instrument, share, cost, tarpit} {
				want, ok := tt.want[name]
				if !ok {
					want = Pass
				}
				if g := goalNamed(t, goals, name); g.Verdict != want {
					t.Errorf("%s = %s (%s), want %s", g.Name, g.Verdict, g.Measured, want)
				}
			}
			md := markdown(t, runs)
			for _, g := range goals[8:] {
				if row := goalRow(md, g.Name); !strings.Contains(row, "**"+string(g.Verdict)+"**") || !strings.Contains(row, g.Measured) {
					t.Errorf("goal row = %q, want %s with %q", row, g.Verdict, g.Measured)
				}
			}
		})
	}
}

func TestBotGoalFigures(t *testing.T) {
	goals := Goals(withBots())
	for _, tt := range []struct{ goal, want string }{
		{"no payment instrument", "at most 1 (honest 1, hammering 0, smart 1)"},
		{"each bot cohort's share", "hammering 0.0 % of the stock, 0.4 % of the accounts; smart 1.9 % of the stock, 2.0 % of the accounts"},
		{"honest shoppers' p99", "off 1.20 s → on 2.05 s: +0.85 s"},
		{"0 honest shoppers tarpitted", "0 of 50,000 (3 entries in the tarpit)"},
	} {
		if got := goalNamed(t, goals, tt.goal).Measured; got != tt.want {
			t.Errorf("%s…: measured %q, want %q", tt.goal, got, tt.want)
		}
	}
}

// The fairness table sets each cohort's win rate beside the honest
// shoppers' of its arrival class, and works out the shares and the units
// per instrument from the rows.
func TestFairnessTable(t *testing.T) {
	md := markdown(t, withBots())
	for _, want := range []string{
		"## Bots and defences",
		"- **flashgate, defences off**: proof of work off; tarpit off; one unit per payer off",
		"- **flashgate, defences on**: proof of work at 4 bits at the edge, devices' time modelled at 17 bits (a phone 150,000 hashes/s, a server core 3,000,000 hashes/s); tarpit on; one unit per payer on",
		"| hammering | 200 | 4 in one /24 | at the open | every 250 ms | at once | its own | one each | a server core |",
		"| smart | 1,000 | one each, a /24 each | at the pre-queue's start | as told | at once | also handed to another account | one per 50 accounts | a server core |",
		// 750 of 15,000 is 5.0 %; 520 of 1,000 units 52.0 %; 15,000 of 51,200 accounts 29.3 %.
		"| flashgate, defences off | honest | pre-queue | 15,000 | 750 | 5.0 % | — | 520 | 52.0 % | 29.3 % | 1 / 1.00 | 0 | 0 | 0 |",
		// 200 of 1,000 is 20.0 %, beside the honest pre-queue's 5.0 %; 200 paid over 20 instruments, 14 at most.
		"| flashgate, defences off | smart | pre-queue | 1,000 | 200 | 20.0 % | 5.0 % | 200 | 20.0 % | 2.0 % | 14 / 10.00 | 0 | 0 | 0 |",
		// The hammering cohort arrived later: beside the honest 80 of 35,000 (0.2 %).
		"| flashgate, defences on | honest | later | 35,000 | 80 | 0.2 % | — | 56 | 5.6 % | 68.4 % | 1 / 1.00 | 34,000 | 350 | 0 |",
		"| flashgate, defences on | hammering | later | 200 | 0 | 0.0 % | 0.2 % | 0 | 0.0 % | 0.4 % | — | 200 | 200 | 200 |",
		"| flashgate, defences on | smart | pre-queue | 1,000 | 60 | 6.0 % | 6.0 % | 19 | 1.9 % | 2.0 % | 1 / 1.00 | 1,000 | 0 | 0 |",
		"| flashgate, defences off | smart | 200 | 200 | 0 | 0 | 0 |",
		"| flashgate, defences on | smart | 60 | 59 | 0 | 0 | 1 |",
		// p99 1.20 → 2.05 s; solved 0 → 49,000 of 50,000; asked again 0 → 350.
		"| p99 time to an answer | 1.20 s | 2.05 s | +0.85 s |",
		"| solved a proof of work | 0.0 % | 98.0 % | +98.0 points |",
		"| answered 403 challenge_required | 0.0 % | 0.7 % | +0.7 points |",
		"| tarpitted | 0.0 % | 0.0 % | +0.0 points |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	s := Summary(withBots())
	for _, want := range []string{
		"bots: hammering (later) 0 held, 0 paid of 200 accounts, win rate 0.0 % vs honest 0.1 %; smart (pre-queue) 200 held, 200 paid of 1,000 accounts, win rate 20.0 % vs honest 5.0 %, ≤ 14 paid per instrument; honest: answer p99 1.20 s, 0.0 % solved a proof of work, 0.0 % answered challenge_required, 0 tarpitted",
		"PASS  no payment instrument paid for more than 1 unit (defences on)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary lacks %q:\n%s", want, s)
		}
	}
	if md := markdown(t, fabricated()); strings.Contains(md, "## Bots and defences") {
		t.Error("a run without bot groups has a Bots section")
	}
	honestOnly := fabricated()
	honestOnly.Flashgate.Scenario.Hammering.Accounts = 0
	honestOnly.Flashgate.Bots.Groups = withBots().Flashgate.Bots.Groups[:2]
	if md, s := markdown(t, honestOnly), Summary(honestOnly); strings.Contains(md, "## Bots and defences") || strings.Contains(s, "bots:") {
		t.Error("a run without bots or defences has a Bots section or summary line")
	}
}

func TestCohortTotals(t *testing.T) {
	totals, accounts := cohortTotals(withBots().Defended.Bots.Groups)
	want := []cohortTotal{
		{name: "honest", accounts: 50_000, held: 980, paid: 696, maxPaidPerInstrument: 1, challenged: 49_000, challengeRequired: 350},
		{name: "hammering", bot: true, accounts: 200, challenged: 200, challengeRequired: 200, tarpitted: 200},
		{name: "smart", bot: true, accounts: 1000, held: 60, paid: 19, maxPaidPerInstrument: 1, challenged: 1000},
	}
	if !reflect.DeepEqual(totals, want) || accounts != 51_200 {
		t.Errorf("cohortTotals = %+v, %d accounts; want %+v, 51200", totals, accounts, want)
	}
	if rate, ok := honestWinRate(withBots().Flashgate.Bots.Groups, crowdsim.Group{PreQueue: true}); !ok || rate != 0.05 {
		t.Errorf("honestWinRate(pre-queue) = %v, %v; want 0.05", rate, ok)
	}
	if _, ok := honestWinRate(nil, crowdsim.Group{}); ok {
		t.Error("honestWinRate without honest shoppers: ok")
	}
}

// A report with a run with the defences on reads back as written.
func TestJSONRoundTripWithBots(t *testing.T) {
	runs := withBots()
	var b bytes.Buffer
	if err := WriteJSON(&b, runs); err != nil {
		t.Fatal(err)
	}
	var got Runs
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, runs) {
		t.Errorf("round trip = %+v, want %+v", got.Defended, runs.Defended)
	}
	if _, err := WriteCharts(t.TempDir(), runs); err != nil {
		t.Errorf("WriteCharts with a defended run: %v", err)
	}
}
