// Package autotune sets a sale's admission rate from what the back end
// shows, while ops have switched it on for the sale (the line's Autotune):
// an additive increase each period the checkout is healthy and shoppers
// are reserving, a multiplicative decrease as soon as one signal says it
// is overloaded (AIMD, as TCP finds a link's capacity), always within the
// bounds ops set. One origin at a time runs it (a Postgres lock); each
// change is recorded like an operator's, its reason in the actor, so the
// ops dashboard lists it; a rate set by hand switches it off.
package autotune

import (
	"fmt"
	"math"
	"time"
)

// Reading is what the back end showed over one period.
type Reading struct {
	Reserves   int           // reserves answered in the period
	Errors     int           // of them, answered please_wait or 5xx
	ReserveP99 time.Duration // of the reserves answered in the period
	RedisP99   time.Duration // of the Redis scripts run in the period
	Pending    int           // intents the order writer has not applied yet
	WriterLag  time.Duration // how long the oldest of them has waited
	Available  int64         // units left to sell
	// What the edges did with the rate, from the line in Redis (zero
	// without a period behind the reading):
	Period    time.Duration // since the reading before
	Admitted  int64         // places the cursor moved over in it
	Waiting   int64         // places in line not admitted yet, at its end
	EdgesHeld bool          // an edge held admission in it: its pool to the checkout was congested
}

// Targets are what a healthy back end stays within.
type Targets struct {
	ReserveP99 time.Duration
	RedisP99   time.Duration
	WriterLag  time.Duration
	Pending    int
	ErrorShare float64 // of reserves answered please_wait or 5xx
}

// DefaultTargets keep the seeds' promise with room: an admitted shopper's
// reserve answered well within a second, the ledger a few seconds behind
// Redis at most.
func DefaultTargets() Targets {
	return Targets{ReserveP99: 250 * time.Millisecond, RedisP99: 50 * time.Millisecond,
		WriterLag: 5 * time.Second, Pending: 10_000, ErrorShare: 0.01}
}

// The AIMD constants: a decrease keeps 70 % of the rate; an increase adds
// a twentieth of the bounds' span, so a sale goes from its floor to its
// ceiling in twenty healthy periods — but within 10 % of the rate at which
// the back end last showed its limit, the rate probes by 5 % a period, as
// TCP CUBIC slows near the window that last overflowed (and, past it,
// speeds up again: the limit has moved). A rate is
// binding while the edges admit at least 80 % of it: below that something
// else limits admission (an edge's slow start, its hold, the end of the
// line), and raising a rate nobody reaches only arms a burst for when
// that limit lifts.
const (
	decrease      = 0.7
	increaseSteps = 20
	probe         = 0.05
	nearLimit     = 0.1
	binding       = 0.8
	// maxRise bounds a rise to a quarter of the rate: shoppers admitted
	// now reserve a poll and a click later, so a rate far past the
	// capacity admits seconds of work before any signal trips.
	maxRise = 0.25
	// nearShare of a latency target is where rises stop.
	nearShare = 0.5
	// heldCut is the least a decrease takes off when an edge holds.
	heldCut = 0.9
)

// Step is the rate after one period at rate in which the back end showed
// r, kept within [lo, hi], why it changed ("" when it did not), and the
// limit the next step starts from. limit is the rate at which the back
// end last showed its limit (0: not yet).
//
// Overload comes first, and the rate it tripped at is the new limit. An
// edge holding admission — its pool to the checkout congested — brings the
// rate down to what the edges admitted in the period, the checkout's
// measured capacity, but to between 70 % and 90 % of the rate: edges
// ramping up again after a hold admit under what the checkout takes. Any
// other signal past its target takes 30 % off. Otherwise the rate holds
// when nothing is left to sell, nobody reserved (no sign that more
// shoppers would be served), nobody waits, or the edges admitted well
// under the rate (it is not what limits them), or a latency is past half
// its target (it rises before it trips); and rises, by a twentieth of the
// span but at most a quarter of the rate, or by 5 % within 10 % of the
// limit.
func Step(rate, limit float64, r Reading, lo, hi float64, t Targets) (next float64, why string, nextLimit float64) {
	// Rates are kept to a tenth of a shopper a second: ops read them.
	clamp := func(x float64) float64 { return min(max(math.Round(x*10)/10, lo), hi) }
	other := overload(r, t)
	if r.EdgesHeld && r.Period > 0 {
		admitted := float64(r.Admitted) / r.Period.Seconds()
		why := fmt.Sprintf("an edge held admission, its checkout pool congested; the edges admitted %.0f/s", admitted)
		next := min(max(admitted, decrease*rate), heldCut*rate)
		if other != "" { // the deeper cut, both named
			next, why = decrease*rate, why+"; "+other
		}
		return clamp(next), why, rate
	}
	if other != "" {
		return clamp(rate * decrease), other, rate
	}
	// A latency past half its target holds too: it rises before it
	// trips, and a rise now would land the next wave of shoppers on a
	// checkout already near its limit.
	if r.Available <= 0 || r.Reserves == 0 || nearTargets(r, t) ||
		r.Period > 0 && (r.Waiting == 0 || float64(r.Admitted) < binding*rate*r.Period.Seconds()) {
		if held := clamp(rate); held != rate {
			return held, fmt.Sprintf("kept within the bounds %v to %v", lo, hi), limit
		}
		return rate, "", limit
	}
	step := max(min((hi-lo)/increaseSteps, rate*maxRise), 1)
	if limit > 0 && math.Abs(rate-limit) <= nearLimit*limit {
		step = max(rate*probe, 1)
	}
	next = clamp(rate + step)
	if next == rate {
		return rate, "", limit
	}
	return next, "healthy", limit
}

// nearTargets says whether a latency is past half its target.
func nearTargets(r Reading, t Targets) bool {
	return r.ReserveP99 > time.Duration(nearShare*float64(t.ReserveP99)) ||
		r.RedisP99 > time.Duration(nearShare*float64(t.RedisP99))
}

// overload names the first signal past its target but the edges' hold,
// or "".
func overload(r Reading, t Targets) string {
	switch {
	case r.Reserves > 0 && float64(r.Errors) > t.ErrorShare*float64(r.Reserves):
		return fmt.Sprintf("%d of %d reserves failed", r.Errors, r.Reserves)
	case r.ReserveP99 > t.ReserveP99:
		return fmt.Sprintf("reserve p99 %v over %v", r.ReserveP99.Round(time.Millisecond), t.ReserveP99)
	case r.RedisP99 > t.RedisP99:
		return fmt.Sprintf("Redis p99 %v over %v", r.RedisP99.Round(time.Millisecond), t.RedisP99)
	case r.WriterLag > t.WriterLag:
		return fmt.Sprintf("order writer %v behind, over %v", r.WriterLag.Round(time.Millisecond), t.WriterLag)
	case r.Pending > t.Pending:
		return fmt.Sprintf("%d intents not yet in Postgres, over %d", r.Pending, t.Pending)
	}
	return ""
}
