package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails t, naming what, when it
// still does not after within. Tests wait on a condition with it, never
// on a sleep sized to what the machine usually takes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v", what, within)
		}
		<-tick.C
	}
}

// pollEvery is how often Eventually asks: often enough that a test ends
// within a few milliseconds of its condition, rarely enough not to load a
// shared machine.
const pollEvery = 10 * time.Millisecond
