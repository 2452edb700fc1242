package faults

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestReportedLost(t *testing.T) {
	for _, tc := range []struct {
		name, ledger string
		want         int
	}{
		{"nothing reported", `{"sale_id":"s","skus":[{"sku":"a","drift":{"available":0}}]}`, 0},
		{"per sku count", `{"skus":[{"sku":"a","lost":3},{"sku":"b","lost":2}]}`, 5},
		{"per sku list", `{"skus":[{"sku":"a","lost_reservations":["r1","r2"]}]}`, 2},
		{"sale-wide total wins over its parts", `{"lost_reservations":4,"skus":[{"sku":"a","lost":4}]}`, 4},
		{"nested object", `{"durability":{"epoch":"e1","intents_lost":7}}`, 7},
		{"not a count", `{"lost_at":"2026-12-01T00:00:00Z","lost_since_seq":991,"skus":[]}`, 0},
		{"zero", `{"skus":[{"sku":"a","lost":0}]}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.ledger), &v); err != nil {
				t.Fatal(err)
			}
			if got := reportedLost(v); got != tc.want {
				t.Errorf("reportedLost(%s) = %d, want %d", tc.ledger, got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	good := Result{Shoppers: 10, Accepted: 5, Recovered: true, MaxAnswer: time.Second}
	for _, tc := range []struct {
		name   string
		change func(*Result)
		want   string // a failure containing this; "" for a pass
	}{
		{"all good", func(*Result) {}, ""},
		{"loss reported", func(r *Result) { r.Lost, r.LostReported = 3, 3 }, ""},
		{"please_wait only", func(r *Result) { r.PleaseWait = 40 }, ""},
		{"stale within bound", func(r *Result) { r.Stale = 2 * time.Second }, ""},
		{"loss not reported", func(r *Result) { r.Lost, r.LostReported = 3, 1 }, "2 of 5 accepted reservations"},
		{"oversold", func(r *Result) { r.Oversold = 1 }, "oversold by 1"},
		{"paid lost", func(r *Result) { r.PaidLost = 2 }, "2 payments taken"},
		{"double", func(r *Result) { r.Double = 1 }, "1 double charges"},
		{"bad 5xx", func(r *Result) { r.BadFiveXX = 4 }, "4 5xx answers"},
		{"unknown sale", func(r *Result) { r.WrongAnswers = 1 }, "unknown_sale"},
		{"hang", func(r *Result) { r.Hangs = 1 }, "hung"},
		{"replayed token", func(r *Result) { r.Replays = 2 }, "2 used admission tokens"},
		{"unanswered", func(r *Result) { r.Unanswered = 2 }, "2 of 10 shoppers"},
		{"line", func(r *Result) { r.Line = []string{"3 places handed to more than one account"} }, "line: 3 places"},
		{"stale", func(r *Result) { r.Stale = 5 * time.Second }, "snapshot disagreed"},
		{"not recovered", func(r *Result) { r.Recovered = false }, "did not recover"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.change(&r)
			judge(&r)
			got := strings.Join(r.Failures, "; ")
			switch {
			case tc.want == "" && !r.Pass():
				t.Errorf("judge = %q, want a pass", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("judge = %q, want a failure containing %q", got, tc.want)
			}
		})
	}
}

func TestWriteMarkdown(t *testing.T) {
	pass := Result{Scenario: "baseline", What: "no fault", Shoppers: 200, Stock: 100, Sold: 90, Accepted: 150, Recovered: true,
		MaxAnswer: 250 * time.Millisecond, Recovery: 300 * time.Millisecond}
	fail := Result{Scenario: "redis-flushall", What: "FLUSHALL", Shoppers: 200, Stock: 100, Sold: 80, Accepted: 140, Lost: 4,
		PleaseWait: 12, Hangs: 1, MaxAnswer: 10 * time.Second, Line: []string{"9 places handed to more than one account"}}
	judge(&pass)
	judge(&fail)
	var b strings.Builder
	err := WriteMarkdown(&b, Report{Command: "make chaos", When: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC), Machine: "test",
		Load: DefaultLoad(), Results: []Result{pass, fail}})
	if err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"Written by `make chaos` on 2026-12-01 06:00 UTC",
		"**1 of 2 scenarios pass.**",
		"| scenario | shoppers | sold | oversold | 201s lost | lost-but-reported | double | 5xx | max answer time | recovery s |",
		"| baseline | 200 | 90/100 | 0 | 0 of 150 | 0 | 0 | 0 (0 please_wait) | 0.25 s | 0.3 | kept | PASS |",
		"| redis-flushall | 200 | 80/100 | 0 | 4 of 140 | 0 | 0 | 0 (12 please_wait) | 10.00 s, 1 hung | never | 1 broken | FAIL |",
		"- FAIL: line: 9 places handed to more than one account",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestSelect(t *testing.T) {
	short, err := Select(nil, true)
	if err != nil || len(short) == 0 {
		t.Fatalf("Select(short) = %d scenarios, %v; want some", len(short), err)
	}
	for _, sc := range short {
		if !sc.Short {
			t.Errorf("Select(short) picked %s, which is not short", sc.Name)
		}
	}
	if all, _ := Select(nil, false); len(all) != len(Scenarios()) {
		t.Errorf("Select() = %d scenarios, want all %d", len(all), len(Scenarios()))
	}
	if _, err := Select([]string{"no-such"}, false); err == nil {
		t.Error("Select(no-such) = nil error, want one naming the scenarios")
	}
	seen := map[string]bool{}
	for _, sc := range Scenarios() {
		if seen[sc.Name] || sc.fault == nil || sc.What == "" {
			t.Errorf("scenario %q: duplicate, or no fault or description", sc.Name)
		}
		seen[sc.Name] = true
	}
}

// TestShopperAnswered: a place in line is an answer, as a unit and sold
// out are; only a shopper who never got one of them counts as unanswered.
func TestShopperAnswered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sh       shopper
		answered bool
		outcome  string
	}{
		{"never joined", shopper{}, false, "no answer"},
		{"in line when its time ran out", shopper{queueToken: "qt", position: 12}, true, "in line"},
		{"reserved", shopper{queueToken: "qt", fate: "reserved"}, true, "reserved"},
		{"sold out at the join", shopper{fate: "sold_out"}, true, "sold_out"},
	} {
		if got := tc.sh.answered(); got != tc.answered {
			t.Errorf("%s: answered = %v, want %v", tc.name, got, tc.answered)
		}
		if got := tc.sh.outcome(); got != tc.outcome {
			t.Errorf("%s: outcome = %q, want %q", tc.name, got, tc.outcome)
		}
	}
}
