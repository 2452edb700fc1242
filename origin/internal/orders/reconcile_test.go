package orders

import (
	"testing"
	"time"
)

// The first listing, and one every fullListingEvery, reach back the whole
// window; the others only to listingOverlap before the last one began.
func TestListSince(t *testing.T) {
	const window = 48 * time.Hour
	var l listing
	at := now
	want := func(since time.Time, full bool, wantSince time.Time, wantFull bool) {
		t.Helper()
		if !since.Equal(wantSince) || full != wantFull {
			t.Errorf("listSince(%v) = %v (full %v), want %v (full %v)", at, since, full, wantSince, wantFull)
		}
	}
	since, full := l.listSince(at, window)
	want(since, full, at.Add(-window), true)
	// A listing that did not complete is not remembered.
	since, full = l.listSince(at.Add(time.Minute), window)
	want(since, full, at.Add(time.Minute-window), true)
	l.listed(at, true)

	at = now.Add(time.Minute)
	since, full = l.listSince(at, window)
	want(since, full, now.Add(-listingOverlap), false)
	l.listed(at, false)

	at = now.Add(2 * time.Minute)
	since, full = l.listSince(at, window)
	want(since, full, now.Add(time.Minute-listingOverlap), false)

	at = now.Add(fullListingEvery)
	since, full = l.listSince(at, window)
	want(since, full, at.Add(-window), true)

	// A window shorter than the overlap is never overstepped.
	var short listing
	short.listed(now, true)
	since, full = short.listSince(now.Add(time.Minute), 30*time.Minute)
	want(since, full, now.Add(time.Minute-30*time.Minute), false)
}
