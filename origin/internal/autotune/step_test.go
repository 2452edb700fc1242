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
		{"an edge held", 500, with(func(r *Reading) { r.EdgesHeld = true }), 350, "an edge held admission"},
		{"admitted 80 % of the rate", 625, healthy, 720, "healthy"},
		{"admitted under 80 % of the rate", 626, healthy, 626, ""},
		{"nobody waiting", 500, with(func(r *Reading) { r.Waiting = 0 }), 500, ""},
		{"no period behind the reading", 500, with(func(r *Reading) { r.Period, r.Admitted, r.Waiting = 0, 0, 0 }), 595, "healthy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Step(tc.rate, tc.reading, 100, 2000, targets)
			if got != tc.want || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("Step(%v) = %v %q, want %v %q", tc.rate, got, why, tc.want, tc.why)
			}
		})
	}
}

// A small span still moves by at least one a second.
func TestStepMovesAtLeastOne(t *testing.T) {
	got, _ := Step(10, Reading{Reserves: 5, Available: 5}, 10, 12, DefaultTargets())
	if got != 11 {
		t.Errorf("Step(10, span 2) = %v, want 11", got)
	}
}
