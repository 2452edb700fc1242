// Package clock is the time the binaries read and wait on: the real one in
// production, a Fake that tests move by hand, so that no test sleeps to
// let time pass.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers and tickers on it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) *Timer
	NewTicker(d time.Duration) *Ticker
}

// Timer is a time.Timer on some Clock: C receives once, when it fires.
type Timer struct {
	C     <-chan time.Time
	stop  func() bool
	reset func(time.Duration) bool
}

// Stop stops the timer; false if it had already fired or stopped.
func (t *Timer) Stop() bool { return t.stop() }

// Reset makes the timer fire d from now; false if it had fired or stopped.
func (t *Timer) Reset(d time.Duration) bool { return t.reset(d) }

// Ticker is a time.Ticker on some Clock: C receives each period, dropping
// ticks a slow reader misses.
type Ticker struct {
	C    <-chan time.Time
	stop func()
}

// Stop stops the ticker.
func (t *Ticker) Stop() { t.stop() }

// Real is the machine's clock.
var Real Clock = realClock{}

// Or is c, or Real when c is nil: an option's default.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) *Timer {
	t := time.NewTimer(d)
	return &Timer{C: t.C, stop: t.Stop, reset: t.Reset}
}

func (realClock) NewTicker(d time.Duration) *Ticker {
	t := time.NewTicker(d)
	return &Ticker{C: t.C, stop: t.Stop}
}

// Fake is a Clock that moves only when told to (Advance, Set). Timers and
// tickers fire, in time order, as it passes them.
type Fake struct {
	mu      sync.Mutex // guards now, waiters and armed
	now     time.Time
	waiters map[*waiter]struct{}
	armed   chan struct{} // closed and replaced when a waiter is armed
}

type waiter struct {
	at     time.Time
	period time.Duration // 0 for a timer
	c      chan time.Time
}

// NewFake returns a Fake reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, waiters: map[*waiter]struct{}{}, armed: make(chan struct{})}
}

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the time on by d, firing what falls due on the way.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moveTo(f.now.Add(d))
}

// Set moves the time to t (never back), firing what falls due on the way,
// each at its own moment: a ticker passed twice ticks once, as a real one
// read too slowly does.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moveTo(t)
}

// moveTo moves the time to t, never back, firing the waiters due by t in
// time order; f.mu is held.
func (f *Fake) moveTo(t time.Time) {
	for {
		next := f.nextDue(t)
		if next == nil {
			break
		}
		if next.at.After(f.now) {
			f.now = next.at
		}
		select {
		case next.c <- next.at:
		default: // a full channel: the reader has not taken the last one
		}
		if next.period > 0 {
			next.at = next.at.Add(next.period)
		} else {
			delete(f.waiters, next)
		}
	}
	if t.After(f.now) {
		f.now = t
	}
}

// nextDue is the earliest waiter due by t; f.mu is held.
func (f *Fake) nextDue(t time.Time) *waiter {
	var first *waiter
	for w := range f.waiters {
		if !w.at.After(t) && (first == nil || w.at.Before(first.at)) {
			first = w
		}
	}
	return first
}

// Waiting is how many timers and tickers are armed.
func (f *Fake) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// Armed returns a channel closed when the next timer or ticker is armed: a
// test waits on it to know the code under test is waiting before it moves
// the time.
func (f *Fake) Armed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.armed
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
// As a time.Timer since Go 1.23, it never delivers a value from before a
// Stop or Reset.
func (f *Fake) NewTimer(d time.Duration) *Timer {
	w := f.arm(d, 0)
	return &Timer{C: w.c, stop: func() bool { return f.disarm(w) }, reset: func(d time.Duration) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		active := f.disarmLocked(w)
		w.at = f.now.Add(d)
		f.armLocked(w)
		return active
	}}
}

// NewTicker returns a ticker that ticks each d of fake time.
func (f *Fake) NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := f.arm(d, d)
	return &Ticker{C: w.c, stop: func() { f.disarm(w) }}
}

func (f *Fake) arm(d, period time.Duration) *waiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), period: period, c: make(chan time.Time, 1)}
	f.armLocked(w)
	return w
}

// armLocked adds w, tells Armed's waiters, and fires w at once if it is
// already due; f.mu is held.
func (f *Fake) armLocked(w *waiter) {
	f.waiters[w] = struct{}{}
	close(f.armed)
	f.armed = make(chan struct{})
	f.moveTo(f.now)
}

func (f *Fake) disarm(w *waiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.disarmLocked(w)
}

// disarmLocked removes w and empties its channel; f.mu is held.
func (f *Fake) disarmLocked(w *waiter) bool {
	_, ok := f.waiters[w]
	delete(f.waiters, w)
	select {
	case <-w.c:
	default:
	}
	return ok
}
