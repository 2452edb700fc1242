package admission

import (
	"math"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
)

func TestEstimate(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	opts := &Options{StaleAfter: time.Second, SnapshotStaleAfter: time.Second, MaxPollAfter: 30 * time.Second}
	open := snapshot.Sale{SaleID: "s", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		SKUs: []snapshot.SKU{{SKU: "a", AvailableHint: 30}, {SKU: "b", AvailableHint: 20}, {SKU: "c", AvailableHint: -3}}}
	upcoming := open
	upcoming.StartsAt = now.Add(20 * time.Second)
	view := func(sale snapshot.Sale, st line.State) *View {
		return &View{Sale: sale, State: st, HasState: true, fetchedAt: now, available: sale.Available(), opts: opts}
	}
	running := line.State{NowServing: 100, RatePerSecond: 50, MeasuredRate: 10, ReadAt: now}

	t.Run("within the cursor: admitted", func(t *testing.T) {
		e := view(open, running).Estimate(false, 100, now)
		if !e.Admitted || e.Position != 100 || e.WaitS != 0 || e.PollAfterMS < 1000 || e.PollAfterMS > 1250 {
			t.Errorf("Estimate(100) with now_serving 100 = %+v, want admitted, polling in 1 to 1.25 s", e)
		}
	})
	t.Run("behind the cursor: the wait at the measured rate", func(t *testing.T) {
		e := view(open, running).Estimate(false, 300, now)
		if e.Admitted || e.Position != 300 || e.WaitS != 20 || e.Paused {
			t.Errorf("Estimate(300) with now_serving 100 at 10/s measured = %+v, want waiting 20 s", e)
		}
		if e.PollAfterMS < 10_000 || e.PollAfterMS > 12_500 {
			t.Errorf("PollAfterMS = %d, want half the wait plus up to a quarter of that", e.PollAfterMS)
		}
	})
	t.Run("paused: the wait at the set rate", func(t *testing.T) {
		st := running
		st.Paused = true
		e := view(open, st).Estimate(false, 300, now)
		if !e.Paused || e.WaitS != 4 {
			t.Errorf("Estimate(300) paused, set rate 50/s = %+v, want paused, 4 s", e)
		}
	})
	t.Run("a standing cursor: the wait at a tenth of the set rate", func(t *testing.T) {
		// Held for the checkout for the whole window: measured 0 over
		// seconds. 200 ahead at 50/s ÷ 10 is 40 s, polled after 20 s —
		// not the 4 s the set rate would promise.
		st := running
		st.MeasuredRate, st.Measured = 0, true
		e := view(open, st).Estimate(false, 300, now)
		if e.WaitS != 40 || e.PollAfterMS < 20_000 || e.PollAfterMS > 25_000 {
			t.Errorf("Estimate(300) with the cursor standing at 100, set rate 50/s = %+v, want 40 s, polling in 20 to 25 s", e)
		}
		st.MeasuredRate, st.Measured = 0, false // nothing measured yet: the set rate
		if e := view(open, st).Estimate(false, 300, now); e.WaitS != 4 {
			t.Errorf("Estimate(300) before any measurement, set rate 50/s = %+v, want 4 s", e)
		}
	})
	t.Run("near the front: polled after two seconds", func(t *testing.T) {
		e := view(open, running).Estimate(false, 110, now) // 10 ahead at 10/s: 1 s
		if e.WaitS != 1 || e.PollAfterMS < 2000 || e.PollAfterMS > 2500 {
			t.Errorf("Estimate(110) with now_serving 100 at 10/s = %+v, want 1 s, polling in 2 to 2.5 s", e)
		}
	})
	t.Run("far back: the poll interval is capped, and spread over the cap's last quarter", func(t *testing.T) {
		limit := opts.MaxPollAfter.Milliseconds()
		seconds := map[int64]int{}
		for pos := int64(1_000_000); pos < 1_001_000; pos++ {
			e := view(open, running).Estimate(false, pos, now)
			if e.PollAfterMS < limit*3/4 || e.PollAfterMS >= limit {
				t.Fatalf("PollAfterMS at %d far back = %d, want within [%d, %d)", pos, e.PollAfterMS, limit*3/4, limit)
			}
			seconds[e.PollAfterMS/1000]++
		}
		// A thousand neighbours in line come back over the last 7.5
		// seconds, no second taking more than about twice its share.
		for s := limit * 3 / 4000; s < limit/1000; s++ {
			if n, share := int64(seconds[s]), 1000*1000/(limit/4); n < share/3 || n > 2*share {
				t.Errorf("%d of 1,000 shoppers far back told to poll after %d s, want about %d", n, s, share)
			}
		}
	})
	t.Run("pre-queue before the draw: the time to the start", func(t *testing.T) {
		// 1,000 in the pre-queue, 50 units available (the negative hint
		// counts as none) at 10/s: the first polls after the draw spread
		// over the 7.46 s the start's ramp takes to admit the units (3.54
		// s' worth of the rate by its end at 6 s, then 1.46 s at the rate).
		st := line.State{PreQueue: 1000, RatePerSecond: 10, ReadAt: now}
		v := view(upcoming, st)
		if got, want := v.preQueueWindow(), 7459*time.Millisecond; got < want-time.Millisecond || got > want+time.Millisecond {
			t.Errorf("preQueueWindow = %v, want %v (50 units at 10/s, ramped)", got, want)
		}
		for _, index := range []int64{1, 2, 500, 999} {
			e := v.Estimate(true, index, now)
			if e.Admitted || e.Position != 0 || !e.PreQueue || e.WaitS != 20 || e.PollAfterMS < 20_000 || e.PollAfterMS >= 27_459 {
				t.Errorf("Estimate(pre %d) before the draw = %+v, want position 0, 20 s wait, a poll 20 to 27.46 s from now", index, e)
			}
		}
	})
}

func TestViewReady(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	opts := &Options{StaleAfter: time.Second, SnapshotStaleAfter: 2 * time.Second}
	tests := []struct {
		name     string
		fetched  time.Duration // ago
		read     time.Duration // ago
		hasState bool
		lost     bool
		want     error
	}{
		{"current and fresh", 0, 0, true, false, nil},
		{"snapshot stale", 3 * time.Second, 0, true, false, ErrNotReady},
		{"cursor stale", 0, 2 * time.Second, true, false, ErrCursorStale},
		{"cursor never read", 0, 0, false, false, ErrCursorStale},
		{"line lost", 0, 0, true, true, ErrCursorStale},
	}
	for _, tt := range tests {
		v := &View{fetchedAt: now.Add(-tt.fetched), HasState: tt.hasState,
			State: line.State{Lost: tt.lost, ReadAt: now.Add(-tt.read)}, opts: opts}
		if got := v.Ready(now); got != tt.want {
			t.Errorf("%s: Ready = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Joinable and Reservable: what the edge answers from memory, and when it
// may not answer at all.
func TestViewJoinableAndReservable(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	opts := &Options{StaleAfter: time.Second, SnapshotStaleAfter: 2 * time.Second}
	tests := []struct {
		name           string
		fetched        time.Duration // ago
		ended          bool
		soldOut, final bool
		join, reserve  error
	}{
		{"open, current", 0, false, false, false, nil, nil},
		{"open, snapshot stale", 3 * time.Second, false, false, false, ErrNotReady, ErrNotReady},
		{"sold out, a hold may come back", 0, false, true, false, nil, ErrSoldOut},
		{"sold out, snapshot stale", 3 * time.Second, false, true, false, ErrNotReady, ErrNotReady},
		{"sold out for good, snapshot stale", 3 * time.Second, false, true, true, ErrSoldOut, ErrSoldOut},
		{"ended", 0, true, false, false, ErrSaleClosed, nil},
	}
	for _, tt := range tests {
		v := &View{fetchedAt: now.Add(-tt.fetched), HasState: true, State: line.State{ReadAt: now}, opts: opts}
		v.Sale.EndsAt = now.Add(time.Hour)
		if tt.ended {
			v.Sale.EndsAt = now
		}
		v.Sale.SoldOut, v.Sale.Final = tt.soldOut, tt.final
		if got := v.Joinable(now); got != tt.join {
			t.Errorf("%s: Joinable = %v, want %v", tt.name, got, tt.join)
		}
		if got := v.Reservable(now); got != tt.reserve {
			t.Errorf("%s: Reservable = %v, want %v", tt.name, got, tt.reserve)
		}
	}
}

// rampSeconds inverts the start's ramp: the time at which the ramp, integrated,
// has admitted x seconds' worth of the rate, checked against advance.lua's
// ramp integrated in small steps.
func TestRampSeconds(t *testing.T) {
	ramp := func(s float64) float64 { // advance.lua's ramp(s)
		switch {
		case s >= 6:
			return 1
		case s < 2:
			return math.Pow(2, s) / 8
		}
		return 0.5 + (s-2)/8
	}
	const step = 1e-4
	admitted, s := 0.0, 0.0
	for _, x := range []float64{0.1, 0.54, 1, 2.5, 3.54, 5, 12} {
		for admitted < x {
			admitted += ramp(s+step/2) * step
			s += step
		}
		if got := rampSeconds(x); math.Abs(got-s) > 0.002 {
			t.Errorf("rampSeconds(%g) = %.4f, want %.4f", x, got, s)
		}
	}
	if got := rampSeconds(0); got != 0 {
		t.Errorf("rampSeconds(0) = %g, want 0", got)
	}
}
