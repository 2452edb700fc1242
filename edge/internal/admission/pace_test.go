package admission

import (
	"math"
	"testing"
	"time"
)

// The pace is a function of its inputs alone: each case is one moment of
// a sale, checked without a clock or Redis.
func TestPace(t *testing.T) {
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	const rate = 1000.0
	for _, tc := range []struct {
		name string
		p    Pacing
		now  time.Time
		want float64
	}{
		{"an eighth at the start", Pacing{Rate: rate, StartsAt: start}, start, rate / 8},
		{"doubled a second in, bound by no answers", Pacing{Rate: rate, StartsAt: start}, at(time.Second), rate / 8},
		{"doubled a second in, answers keep up", Pacing{Rate: rate, StartsAt: start, AnswerRate: 1000}, at(time.Second), rate / 4},
		{"half at 2 s", Pacing{Rate: rate, StartsAt: start, AnswerRate: 1000}, at(2 * time.Second), rate / 2},
		{"an eighth more a second after", Pacing{Rate: rate, StartsAt: start, AnswerRate: 1000}, at(4 * time.Second), rate * 0.75},
		{"all of it at 6 s", Pacing{Rate: rate, StartsAt: start, AnswerRate: 1000}, at(6 * time.Second), rate},
		{"twice the answers bound the ramp", Pacing{Rate: rate, StartsAt: start, AnswerRate: 100}, at(4 * time.Second), 200},
		{"the bound doubles every 2 s after the ramp", Pacing{Rate: rate, StartsAt: start}, at(8 * time.Second), rate / 8 * 2},
		{"the bound gone at 12 s", Pacing{Rate: rate, StartsAt: start}, at(12 * time.Second), rate},
		{"a trickle of 16/s at low rates", Pacing{Rate: 40, StartsAt: start}, at(3 * time.Second), 16},
		{"a node's own hold restarts its ramp", Pacing{Rate: rate, StartsAt: start, HeldAt: at(time.Minute), AnswerRate: 1000}, at(time.Minute), rate / 8},
		{"a resume ramps from nothing", Pacing{Rate: rate, StartsAt: start, RampAt: at(time.Minute), AnswerRate: 1000}, at(time.Minute + 2*time.Second), rate / 2},
		{"a raise ramps from the old rate", Pacing{Rate: rate, StartsAt: start, RampAt: at(time.Minute), RampFrom: 200, AnswerRate: 1000}, at(time.Minute), 200 + 800.0/8},
		{"a change before the start is the start's ramp", Pacing{Rate: rate, StartsAt: start, RampAt: at(-time.Second), RampFrom: 500}, start, rate / 8},
		{"a ramp long over", Pacing{Rate: rate, StartsAt: start, RampAt: at(time.Minute)}, at(time.Minute + 13*time.Second), rate},
		{"twice the units left", Pacing{Rate: rate, StartsAt: start, Available: 20}, at(time.Hour), 40},
		{"plenty of units: no bound", Pacing{Rate: rate, StartsAt: start, Available: 1_000_000}, at(time.Hour), rate},
		{"a rate of 0", Pacing{Rate: 0, StartsAt: start}, at(time.Hour), 0},
	} {
		if got := tc.p.Pace(tc.now); math.Abs(got-tc.want) > 1e-9*tc.want+1e-9 {
			t.Errorf("%s: Pace = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// rampSeconds inverts the ramp's integral: the time the ramp takes to
// admit x seconds' worth of the rate, summed here step by step.
func TestRampSecondsInvertsTheRamp(t *testing.T) {
	const dt = 1e-4
	admitted := 0.0
	for s := 0.0; s < 9; s += dt {
		admitted += rampShare(s+dt/2) * dt
		if math.Mod(s, 0.5) < dt {
			if got := rampSeconds(admitted); math.Abs(got-(s+dt)) > 1e-3 {
				t.Fatalf("rampSeconds(%v) = %v, want %v", admitted, got, s+dt)
			}
		}
	}
}
