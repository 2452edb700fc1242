package autotune

import (
	"strings"
	"testing"
	"time"
)

// Each signal past its target, or an edge's hold, decreases the rate to
// 70 %, never below the floor; a healthy period with reserves in which the
// edges admitted the rate adds a twentieth of the span (95 a second here),
// never above the ceiling; no reserves, nothing left, nobody waiting, or
// the edges admitting well under the rate holds it.
func TestStep(t *testing.T) {
	targets := DefaultTargets()
	healthy := Reading{Reserves: 200, Errors: 1, ReserveP99: 80 * time.Millisecond, RedisP99: 5 * time.Millisecond,
		Pending: 40, WriterLag: 200 * time.Millisecond, Available: 900,
		Period: 5 * time.Second, Admitted: 2500, Waiting: 40_000} // 500 a second
	with := func(change func(*Reading)) Reading {
		r := healthy
		change(&r)
		return r
	}
	tests := []struct {
		name    string
		rate    float64
		reading Reading
		want    float64
		why     string // a part of the reason; "" for none
	}{
		{"healthy", 500, healthy, 595, "healthy"},
		{"healthy at the ceiling", 2000, healthy, 2000, ""},
		{"healthy near the ceiling", 1950, with(func(r *Reading) { r.Admitted = 1950 * 5 }), 2000, "healthy"},
		{"errors", 500, with(func(r *Reading) { r.Errors = 3 }), 350, "3 of 200 reserves failed"},
		{"slow reserves", 500, with(func(r *Reading) { r.ReserveP99 = 400 * time.Millisecond }), 350, "reserve p99 400ms"},
		{"slow Redis", 500, with(func(r *Reading) { r.RedisP99 = 80 * time.Millisecond }), 350, "Redis p99 80ms"},
		{"writer behind", 500, with(func(r *Reading) { r.WriterLag = 6 * time.Second }), 350, "order writer 6s behind"},
		{"backlog", 500, with(func(r *Reading) { r.Pending = 10_001 }), 350, "10001 intents"},
		{"overloaded at the floor", 120, with(func(r *Reading) { r.Errors = 50 }), 100, "50 of 200"},
		{"nobody reserved", 500, with(func(r *Reading) { r.Reserves, r.Errors = 0, 0 }), 500, ""},
		{"sold out", 500, with(func(r *Reading) { r.Available = 0 }), 500, ""},
		{"overloaded when sold out", 500, with(func(r *Reading) { r.Available, r.ReserveP99 = 0, time.Second }), 350, "reserve p99"},
		{"a rate above the bounds comes down", 5000, healthy, 2000, "within the bounds 100 to 2000"},
		{"a rate below the bounds comes up", 50, with(func(r *Reading) { r.Reserves = 0 }), 100, "within the bounds"},
		{"an edge held", 500, with(func(r *Reading) { r.EdgesHeld = true }), 450, "an edge held admission"},
		{"admitted 80 % of the rate", 625, healthy, 720, "healthy"},
		{"admitted under 80 % of the rate", 626, healthy, 626, ""},
		{"nobody waiting", 500, with(func(r *Reading) { r.Waiting = 0 }), 500, ""},
		{"reserve p99 past half its target", 500, with(func(r *Reading) { r.ReserveP99 = 130 * time.Millisecond }), 500, ""},
		{"Redis p99 past half its target", 500, with(func(r *Reading) { r.RedisP99 = 30 * time.Millisecond }), 500, ""},
		{"a rise is at most a quarter of the rate", 200, with(func(r *Reading) { r.Admitted = 1000 }), 250, "healthy"},
		{"no period behind the reading", 500, with(func(r *Reading) { r.Period, r.Admitted, r.Waiting = 0, 0, 0 }), 595, "healthy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why, _ := Step(tc.rate, 0, tc.reading, 100, 2000, targets)
			if got != tc.want || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("Step(%v) = %v %q, want %v %q", tc.rate, got, why, tc.want, tc.why)
			}
		})
	}
}

// An edge's hold brings the rate down to what the edges admitted (between
// 70 % and 90 % of the rate), another overload takes 30 % off; either way
// the rate it tripped at is the limit. Within 10 % of the limit the rate
// rises by 5 % a period; further below it, or past it, by a twentieth of
// the span.
func TestStepLimit(t *testing.T) {
	held := func(admittedPerS int64) Reading {
		return Reading{Reserves: 200, Available: 900, Period: 5 * time.Second, Admitted: 5 * admittedPerS, Waiting: 9000, EdgesHeld: true}
	}
	healthy := func(admittedPerS int64) Reading {
		return Reading{Reserves: 200, Available: 900, Period: 5 * time.Second, Admitted: 5 * admittedPerS, Waiting: 9000}
	}
	tests := []struct {
		name            string
		rate, limit     float64
		reading         Reading
		want, wantLimit float64
		why             string
	}{
		{"held, to what was admitted", 1000, 0, held(820), 820, 1000, "the edges admitted 820/s"},
		{"held throughout: 70 %", 1000, 0, held(0), 700, 1000, "the edges admitted 0/s"},
		{"held while admitting the rate: 90 %", 1000, 0, held(1000), 900, 1000, "an edge held"},
		{"slow reserves: 70 %", 1000, 620, Reading{Reserves: 200, Available: 900, ReserveP99: time.Second}, 700, 1000, "reserve p99"},
		{"far below the limit: a twentieth of the span", 500, 1000, healthy(500), 595, 1000, "healthy"},
		{"near below the limit: 5 %", 950, 1000, healthy(950), 997.5, 1000, "healthy"},
		{"near above the limit: 5 %", 1080, 1000, healthy(1080), 1134, 1000, "healthy"},
		{"well past the limit: a twentieth of the span", 1200, 1000, healthy(1200), 1295, 1000, "healthy"},
		{"not binding: held, the limit kept", 1000, 620, healthy(500), 1000, 620, ""},
		{"held with reserves failing: 70 %, both named", 1000, 0,
			func() Reading { r := held(950); r.Errors = 20; return r }(), 700, 1000, "admitted 950/s; 20 of 200 reserves failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why, limit := Step(tc.rate, tc.limit, tc.reading, 100, 2000, DefaultTargets())
			if got != tc.want || limit != tc.wantLimit || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("Step(%v, limit %v) = %v %q, limit %v; want %v %q, limit %v", tc.rate, tc.limit, got, why, limit, tc.want, tc.why, tc.wantLimit)
			}
		})
	}
}

// A small span still moves by at least one a second.
func TestStepMovesAtLeastOne(t *testing.T) {
	got, _, _ := Step(10, 0, Reading{Reserves: 5, Available: 5}, 10, 12, DefaultTargets())
	if got != 11 {
		t.Errorf("Step(10, span 2) = %v, want 11", got)
	}
}
