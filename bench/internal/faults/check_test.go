package faults

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
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
		{"line checked", func(r *Result) { r.LineChecked = "paused: 0 of 30 admitted; 1/s: 9 by 8 s (bound 9)" }, ""},
		{"fault's own check", func(r *Result) {
			r.Fault = []string{"the origin, started with Redis down, exited 0.1 s after it started"}
		}, "exited 0.1 s"},
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
	checked := Result{Scenario: "redis-kill9-empty", What: "kill", Shoppers: 200, Stock: 100, Sold: 90, Accepted: 150, Recovered: true,
		MaxAnswer: 250 * time.Millisecond, LineChecked: "paused: 0 of 30 admitted; 1/s: 25 by 27 s (bound 30)"}
	broken := Result{Scenario: "redis-restart-old-snapshot", What: "old file", Shoppers: 200, Stock: 100, Sold: 90, Accepted: 150, Recovered: true,
		MaxAnswer: 250 * time.Millisecond, LineChecked: "paused: 30 of 30 admitted; 1/s: 40 by 4 s (bound 7)",
		Line: []string{"chaos-paused (paused): 60 admitted answers", "chaos-slow (1/s): now_serving 200"}}
	paid := Result{Scenario: "webhooks-lost (stripe)", What: "webhooks off", Provider: "stripe", Payments: true, Shoppers: 200, Stock: 100,
		Sold: 90, Accepted: 150, Recovered: true, MaxAnswer: 250 * time.Millisecond}
	judge(&pass)
	judge(&fail)
	judge(&checked)
	judge(&broken)
	judge(&paid)
	var b strings.Builder
	err := WriteMarkdown(&b, Report{Command: "make chaos", When: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC), Machine: "test",
		Load: DefaultLoad(), Results: []Result{pass, fail, checked, broken, paid}})
	if err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"Written by `make chaos` on 2026-12-01 06:00 UTC",
		"**3 of 5 scenarios pass.**",
		"The payment scenarios (webhooks-lost) play once per payment provider the sandbox gateway can play (`stripe`)",
		"The other scenarios play with `sandbox`",
		"| webhooks-lost (stripe) | 200 | 90/100 | 0 | 0 of 150 |",
		"| redis-kill9-empty | 200 | 90/100 | 0 | 0 of 150 | 0 | 0 | 0 (0 please_wait) | 0.25 s | 0.0 | paused: 0 of 30 admitted; 1/s: 25 by 27 s (bound 30) | PASS |",
		"| 2 broken: paused: 30 of 30 admitted; 1/s: 40 by 4 s (bound 7) | FAIL |",
		"- FAIL: line: chaos-paused (paused): 60 admitted answers",
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
	short, err := Select(nil, nil, true)
	if err != nil || len(short) == 0 {
		t.Fatalf("Select(short) = %d scenarios, %v; want some", len(short), err)
	}
	var shortPayments []string
	for _, sc := range short {
		if !sc.Short {
			t.Errorf("Select(short) picked %s, which is not short", sc.Label())
		}
		if sc.Payments {
			shortPayments = append(shortPayments, sc.Label())
		}
	}
	if len(shortPayments) != 1 || !strings.HasSuffix(shortPayments[0], " (stripe)") {
		t.Errorf("Select(short) picked the payment plays %q, want one, with stripe", shortPayments)
	}
	if all, _ := Select(nil, nil, false); len(all) != len(Scenarios()) {
		t.Errorf("Select() = %d scenarios, want all %d", len(all), len(Scenarios()))
	}
	for _, tc := range []struct {
		names, providers []string
		want             []string // labels; nil: an error
	}{
		{[]string{"no-such"}, nil, nil},
		{nil, []string{"no-such"}, nil},
		{[]string{"gateway-frozen"}, []string{"stripe"}, []string{"gateway-frozen (stripe)"}},
		{[]string{"webhooks-lost", "baseline"}, []string{"flashgate"}, []string{"baseline", "webhooks-lost (sandbox)"}},
	} {
		got, err := Select(tc.names, tc.providers, false)
		var labels []string
		for _, sc := range got {
			labels = append(labels, sc.Label())
		}
		if (err != nil) != (tc.want == nil) || !slices.Equal(labels, tc.want) {
			t.Errorf("Select(%q, %q) = %q, %v; want %q", tc.names, tc.providers, labels, err, tc.want)
		}
	}
	perName := map[string][]string{}
	seen := map[string]bool{}
	for _, sc := range Scenarios() {
		if seen[sc.Label()] || seen[sc.slug()] || sc.fault == nil || sc.What == "" {
			t.Errorf("scenario %q: duplicate, or no fault or description", sc.Label())
		}
		seen[sc.Label()], seen[sc.slug()] = true, true
		perName[sc.Name] = append(perName[sc.Name], sc.Personality)
		if !sc.Payments && sc.Personality != DefaultPersonality {
			t.Errorf("%s plays with %q, want %q", sc.Label(), sc.Personality, DefaultPersonality)
		}
	}
	for _, name := range []string{"gateway-frozen", "gateway-killed", "webhooks-lost"} {
		if got := perName[name]; !slices.Equal(got, sandboxgateway.Personalities()) {
			t.Errorf("%s plays with %q, want every personality %q", name, got, sandboxgateway.Personalities())
		}
	}
}

// TestPaymentEnv: the origin can be pointed at the sandbox gateway in
// every personality it plays, through the matching provider.
func TestPaymentEnv(t *testing.T) {
	if got := providerOf(DefaultPersonality); got != DefaultProvider {
		t.Errorf("providerOf(%q) = %q, want %q", DefaultPersonality, got, DefaultProvider)
	}
	for _, p := range sandboxgateway.Personalities() {
		env, err := paymentEnv(p, "http://127.0.0.1:1")
		if err != nil {
			t.Errorf("paymentEnv(%q) = %v", p, err)
			continue
		}
		if want := "FLASHGATE_PAYMENT_PROVIDER=" + providerOf(p); !slices.Contains(env, want) {
			t.Errorf("paymentEnv(%q) = %q, want %s in it", p, env, want)
		}
	}
	if _, err := paymentEnv("no-such", "http://127.0.0.1:1"); err == nil {
		t.Error("paymentEnv(no-such) = nil error, want one")
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

// lineAt builds line readings at seconds after zero.
type lineAt struct {
	s        float64
	edge     int
	shopper  int
	admitted bool
	serving  int64
}

func lineObservations(zero time.Time, in []lineAt) []lineObs {
	out := make([]lineObs, len(in))
	for i, o := range in {
		out[i] = lineObs{at: zero.Add(time.Duration(o.s * float64(time.Second))), edge: o.edge, shopper: o.shopper, admitted: o.admitted, nowServing: o.serving}
	}
	return out
}

// polled is a quiet line: every shopper polls both edges before and after
// the fault, told waiting with the cursor at serving.
func polled(serving int64) []lineAt {
	var out []lineAt
	for _, s := range []float64{1, 2.5, 4, 6} {
		out = append(out, lineAt{s, 0, 0, false, serving}, lineAt{s + 0.2, 1, 1, false, serving}, lineAt{s + 0.1, 0, -1, false, serving})
	}
	return out
}

func TestCheckPaused(t *testing.T) {
	zero := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		atPause int64
		joined  int
		obs     []lineAt
		summary string
		want    []string // failures containing these; none for a pass
	}{
		{name: "nobody admitted", joined: 30, obs: polled(0), summary: "paused: 0 of 30 admitted"},
		{name: "the cursor stays where the pause found it", atPause: 5, joined: 30, obs: polled(5), summary: "paused: 0 of 30 admitted"},
		{name: "one admitted answer", joined: 30, obs: append(polled(0), lineAt{3.4, 1, 7, true, 0}),
			summary: "paused: 1 of 30 admitted", want: []string{"1 admitted answers to 1 of 30 shoppers in line (edge 0, edge-2 1), the first 3.4 s after the start on edge-2"}},
		{name: "every shopper admitted after a flush, the cursor at 200", joined: 2,
			obs:     append(polled(0), lineAt{3.2, 0, -1, false, 200}, lineAt{3.5, 0, 0, true, 200}, lineAt{3.6, 1, 1, true, 200}),
			summary: "paused: 2 of 2 admitted",
			want:    []string{"2 admitted answers to 2 of 2 shoppers in line (edge 1, edge-2 1), the first 3.5 s after the start on edge", "now_serving reached 200 (0 at the pause), first past it 3.2 s after the start on edge (admin view)"}},
		{name: "one edge never answered", joined: 30, obs: []lineAt{{1, 0, 0, false, 0}, {5, 0, 0, false, 0}},
			summary: "paused: 0 of 30 admitted", want: []string{"no status answer from edge-2"}},
		{name: "nothing after the fault", joined: 30, obs: []lineAt{{1, 0, 0, false, 0}, {2, 1, 0, false, 0}},
			summary: "paused: 0 of 30 admitted", want: []string{"no status answer after the fault ended"}},
		{name: "nobody in line", joined: 0, summary: "paused: 0 of 0 admitted", want: []string{"none of 30 shoppers got a place"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lineRun{sale: pausedSale, paused: true, atPause: tc.atPause, zero: zero, faultEnd: zero.Add(3 * time.Second),
				edges: []string{"edge", "edge-2"}, shoppers: 30, joined: tc.joined, obs: lineObservations(zero, tc.obs)}
			summary, broken := l.checkPaused()
			if summary != tc.summary {
				t.Errorf("checkPaused() summary = %q, want %q", summary, tc.summary)
			}
			checkBroken(t, "checkPaused()", broken, tc.want)
		})
	}
}

func TestCheckRate(t *testing.T) {
	zero := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return zero.Add(time.Duration(s * float64(time.Second))) }
	// admitted tells shoppers 0..n-1 admitted, one a second from 1 s.
	admitted := func(n int) []lineAt {
		var out []lineAt
		for i := range n {
			out = append(out, lineAt{float64(i + 1), i % 2, i, true, int64(i + 1)})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		losses  []time.Time
		obs     []lineAt
		summary string
		want    []string
	}{
		{name: "at the rate", obs: append(polled(0), admitted(8)...), summary: "1/s: 8 by 8 s (bound 9)"},
		{name: "a tick ahead of the rate", obs: append(polled(0), lineAt{8, 0, -1, false, 9}), summary: "1/s: 9 by 8 s (bound 9)"},
		{name: "a serving block early after a loss", losses: []time.Time{at(3)},
			obs: append(polled(0), lineAt{3.5, 1, 0, false, 5}, lineAt{6.5, 0, -1, false, 8}), summary: "1/s: 8 by 6 s (bound 9)"},
		{name: "two losses, two blocks", losses: []time.Time{at(2), at(4)},
			obs: append(polled(0), lineAt{4.5, 1, 0, false, 9}), summary: "1/s: 9 by 6 s (bound 11)"},
		{name: "ahead of the rate without a loss", obs: append(polled(0), lineAt{8, 0, -1, false, 10}),
			summary: "1/s: 10 by 8 s (bound 9)", want: []string{"now_serving 10 8.0 s after the start on edge (admin view), bound 9 (1/s × 8.0 s + 2 early per Redis loss × 0 + 1)"}},
		{name: "182 admitted at once after a kill", losses: []time.Time{at(3)},
			obs:     append(polled(0), lineAt{3.5, 1, 4, false, 185}),
			summary: "1/s: 185 by 4 s (bound 6), the line of 40 ran out", want: []string{"now_serving 185 3.5 s after the start on edge-2 (status answer), bound 6 (1/s × 3.5 s + 2 early per Redis loss × 1 + 1)"}},
		{name: "a loss allows nothing before it", losses: []time.Time{at(5)},
			obs: append(polled(0), lineAt{3, 0, -1, false, 5}), summary: "1/s: 5 by 3 s (bound 4)", want: []string{"now_serving 5 3.0 s after the start"}},
		{name: "shoppers told admitted at the rate", obs: append(polled(0), admitted(3)...),
			summary: "1/s: 3 by 6 s (bound 7)"},
		{name: "every shopper told admitted at 4 s", losses: []time.Time{at(3)},
			obs: append(polled(0), lineAt{4, 0, 5, true, 0}, lineAt{4, 1, 6, true, 0}, lineAt{4, 0, 7, true, 0}, lineAt{4, 1, 8, true, 0},
				lineAt{4, 0, 9, true, 0}, lineAt{4, 1, 10, true, 0}, lineAt{4, 0, 11, true, 0}, lineAt{4.1, 1, 12, true, 0}),
			summary: "1/s: 8 by 4 s (bound 7)", want: []string{"8 shoppers told admitted by 4.1 s after the start, bound 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lineRun{sale: slowSale, rate: 1, zero: zero, faultEnd: zero.Add(3 * time.Second), losses: tc.losses,
				edges: []string{"edge", "edge-2"}, shoppers: 40, joined: 40, obs: lineObservations(zero, tc.obs)}
			summary, broken := l.checkRate()
			if summary != tc.summary {
				t.Errorf("checkRate() summary = %q, want %q", summary, tc.summary)
			}
			checkBroken(t, "checkRate()", broken, tc.want)
		})
	}
}

func TestEarlyBound(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int64
	}{{0, 0}, {0.2, 1}, {1, 2}, {25, 50}, {100, 200}} {
		if got := earlyBound(tc.rate); got != tc.want {
			t.Errorf("earlyBound(%g) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}

func checkBroken(t *testing.T, call string, broken, want []string) {
	t.Helper()
	if len(broken) != len(want) {
		t.Fatalf("%s = %q, want %d failures containing %q", call, broken, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(broken[i], w) {
			t.Errorf("%s failure %d = %q, want it to contain %q", call, i, broken[i], w)
		}
	}
}
