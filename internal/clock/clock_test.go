package clock_test

import (
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

var start = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// received reports what c holds now, without waiting.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-c:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresWhenTimeReachesIt(t *testing.T) {
	f := clock.NewFake(start)
	timer := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	if _, ok := received(timer.C); ok {
		t.Fatal("timer fired before its second")
	}
	f.Advance(5 * time.Millisecond)
	got, ok := received(timer.C)
	if !ok || !got.Equal(start.Add(time.Second)) {
		t.Fatalf("timer after 1.004 s = %v, %v; want it fired at its second", got, ok)
	}
	if timer.Stop() {
		t.Error("Stop after firing = true, want false")
	}
	if f.Waiting() != 0 {
		t.Errorf("Waiting() after the timer fired = %d, want 0", f.Waiting())
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := clock.NewFake(start)
	timer := f.NewTimer(time.Second)
	if !timer.Stop() {
		t.Fatal("Stop of an armed timer = false")
	}
	f.Advance(2 * time.Second)
	if _, ok := received(timer.C); ok {
		t.Fatal("a stopped timer fired")
	}
	if timer.Reset(time.Second) {
		t.Error("Reset of a stopped timer = true, want false")
	}
	f.Advance(time.Second)
	if got, ok := received(timer.C); !ok || !got.Equal(start.Add(3*time.Second)) {
		t.Fatalf("reset timer = %v, %v; want it fired a second after the reset", got, ok)
	}
	if zero := f.NewTimer(0); zero != nil {
		if _, ok := received(zero.C); !ok {
			t.Error("a timer of 0 did not fire at once")
		}
	}
}

// A ticker ticks at each period it is passed, and like a real one keeps
// one tick for a reader that was away.
func TestFakeTicker(t *testing.T) {
	f := clock.NewFake(start)
	tick := f.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= 3; i++ {
		f.Advance(100 * time.Millisecond)
		got, ok := received(tick.C)
		if want := start.Add(time.Duration(i) * 100 * time.Millisecond); !ok || !got.Equal(want) {
			t.Fatalf("tick %d = %v, %v; want %v", i, got, ok, want)
		}
	}
	f.Advance(time.Second)
	if got, ok := received(tick.C); !ok || !got.Equal(start.Add(400*time.Millisecond)) {
		t.Errorf("after a second away = %v, %v; want the first tick missed (0.4 s), kept", got, ok)
	}
	if _, ok := received(tick.C); ok {
		t.Error("more than one tick kept for a reader away")
	}
	if !f.Now().Equal(start.Add(1300 * time.Millisecond)) {
		t.Errorf("Now() = %v, want 1.3 s on", f.Now())
	}
	tick.Stop()
	f.Advance(time.Second)
	if _, ok := received(tick.C); ok {
		t.Error("a stopped ticker ticked")
	}
}

// Armed tells a test that the code under test is now waiting on the clock.
func TestFakeArmed(t *testing.T) {
	f := clock.NewFake(start)
	armed := f.Armed()
	done := make(chan time.Time)
	go func() {
		timer := f.NewTimer(time.Minute)
		done <- <-timer.C
	}()
	<-armed
	f.Advance(time.Minute)
	if got := <-done; !got.Equal(start.Add(time.Minute)) {
		t.Errorf("waiting goroutine woke at %v, want a minute on", got)
	}
}

func TestFakeNeverGoesBack(t *testing.T) {
	f := clock.NewFake(start)
	f.Set(start.Add(-time.Hour))
	if !f.Now().Equal(start) {
		t.Errorf("Now() after Set back = %v, want %v", f.Now(), start)
	}
}

func TestRealAndOr(t *testing.T) {
	if clock.Or(nil) != clock.Real {
		t.Error("Or(nil) is not Real")
	}
	f := clock.NewFake(start)
	if clock.Or(f) != f {
		t.Error("Or(f) is not f")
	}
	timer := clock.Real.NewTimer(time.Millisecond)
	if _, ok := <-timer.C; !ok {
		t.Error("real timer's channel closed")
	}
	if d := time.Since(clock.Real.Now()); d < 0 || d > time.Minute {
		t.Errorf("Real.Now() is %v from time.Now", d)
	}
}

// As a time.Timer since Go 1.23, a reset timer never delivers the value it
// fired with before the reset.
func TestFakeResetDropsAnUnreadFiring(t *testing.T) {
	f := clock.NewFake(start)
	timer := f.NewTimer(time.Second)
	f.Advance(time.Second) // fired, not read
	timer.Reset(time.Second)
	if got, ok := received(timer.C); ok {
		t.Fatalf("after Reset the timer held %v, want nothing until its new second", got)
	}
	f.Advance(time.Second)
	if got, ok := received(timer.C); !ok || !got.Equal(start.Add(2*time.Second)) {
		t.Errorf("reset timer = %v, %v; want it fired at 2 s", got, ok)
	}
}
