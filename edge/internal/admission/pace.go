package admission

import (
	"math"
	"time"
)

// The slow start, as TCP's: from a sale's start, a resume, a raise, and
// for each node from its own last held tick, the pace rises from an eighth
// of the rate, doubling each second to half of it at 2 s, then by an
// eighth a second to all of it at rampEnd.
const (
	rampEnd = 6 * time.Second
	// boundEnd is when the checkout's bound (twice its answer rate) is
	// gone: it doubles every two seconds from rampEnd on.
	boundEnd = 12 * time.Second
)

// rampShare is the slow start's share of the rate s seconds into a ramp.
func rampShare(s float64) float64 {
	switch {
	case s >= rampEnd.Seconds():
		return 1
	case s < 2:
		return math.Pow(2, max(s, 0)) / 8
	default:
		return 0.5 + (s-2)/8
	}
}

// rampSeconds is how long a ramp takes to admit x seconds' worth of the
// set rate: the inverse of rampShare's integral.
func rampSeconds(x float64) float64 {
	first := 3 / (8 * math.Ln2) // the rate-seconds admitted in the first 2 s
	ramped := first + 3         // and by the end of the ramp, at 6 s
	switch {
	case x <= first:
		return math.Log2(1 + 8*math.Ln2*x)
	case x <= ramped:
		return 2 + 8*(math.Sqrt(0.25+(x-first)/4)-0.5)
	default:
		return 6 + x - ramped
	}
}

// Pacing is what a sale's admission pace depends on. Times are on the
// clock advance.lua runs on (Redis's, or the one tests set).
type Pacing struct {
	Rate       float64   // the set rate, admissions a second
	StartsAt   time.Time // the sale's start
	HeldAt     time.Time // this node's last held tick; zero: never
	RampAt     time.Time // the last resume's or raise's ramp start; zero: none
	RampFrom   float64   // a raise's rate before it (0 for a resume)
	AnswerRate float64   // the checkout's answers a second
	Available  int64     // units available (0: none)
}

// Pace is the admissions a second at now: the set rate through the slow
// start's ramps (where they overlap the slowest governs, and a raise keeps
// its old rate as its least), bounded for boundEnd by twice the
// checkout's answer rate (the answer to a wave comes back a poll and a
// reserve later), and by twice the units left, so that units coming back
// one by one go to about as many shoppers. advance.lua applies it.
func (p Pacing) Pace(now time.Time) float64 {
	pace := p.Rate
	since := now.Sub(p.StartsAt).Seconds()
	if !p.HeldAt.IsZero() {
		since = min(since, now.Sub(p.HeldAt).Seconds())
	}
	share, from := rampShare(since), 0.0
	// A change before the start is the start's ramp's to make.
	if age := now.Sub(p.RampAt); !p.RampAt.IsZero() && !p.RampAt.Before(p.StartsAt) && age < boundEnd && p.Rate > 0 {
		floor := min(p.RampFrom, p.Rate)
		s := (floor + (p.Rate-floor)*rampShare(age.Seconds())) / p.Rate
		if s < share || (s == share && age.Seconds() < since) {
			share, from = s, floor
		}
		since = min(since, age.Seconds())
	}
	if since < boundEnd.Seconds() {
		// At least an eighth of the rate, or 16 a second (a trickle any
		// checkout takes), or a raise's old rate; then the bound fades.
		least := max(p.Rate/8, min(p.Rate, 16), from)
		bound := max(least, 2*p.AnswerRate)
		if since > rampEnd.Seconds() {
			bound *= math.Pow(2, (since-rampEnd.Seconds())/2)
		}
		pace = min(p.Rate*share, bound)
	}
	if p.Available > 0 && float64(p.Available)*2 < pace {
		pace = float64(p.Available) * 2
	}
	return pace
}
