package admission_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

func tick(t *testing.T, c *admission.Cursor, tk line.Tick) line.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Tick(ctx, []line.Tick{tk}); err != nil {
		t.Fatalf("Tick(%s) = %v", tk.Sale, err)
	}
	st, ok := c.State(tk.Sale)
	if !ok {
		t.Fatalf("State(%s) after a tick = none", tk.Sale)
	}
	return st
}

// TestCursorHolds: the cursor does not move before the start, while
// paused, while nothing is in stock, at rate 0, past the end of the line,
// nor while the ticking node holds for its checkout — and builds no
// credit meanwhile.
func TestCursorHolds(t *testing.T) {
	t.Parallel()
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	yes, no, zero := true, false, 0.0
	cases := []struct {
		name     string
		starts   time.Time
		stock    int64
		paused   *bool
		rate     *float64
		length   int64
		hold     bool
		want     int64 // now_serving after the wait
		wantRate float64
	}{
		{"before the start", future, 1_000_000, nil, nil, 100, false, 0, 1000},
		{"paused", past, 1_000_000, &yes, nil, 100, false, 0, 1000},
		{"no stock", past, 0, nil, nil, 100, false, 0, 1000},
		{"rate zero", past, 1_000_000, nil, &zero, 100, false, 0, 0},
		{"end of the line", past, 1_000_000, nil, nil, 5, false, 5, 1000},
		{"held for the checkout", past, 1_000_000, nil, nil, 100, true, 0, 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := edgetest.NewRedis(t)
			edgetest.ReadyLine(t, r, "s", 1000)
			f := fakeClock(t, r)
			c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
			tk := line.Tick{Sale: "s", StartsAt: tc.starts, Available: tc.stock, Hold: tc.hold}
			tick(t, c, tk) // an empty line: the cursor starts from now
			if tc.paused != nil || tc.rate != nil {
				edgetest.SetLineSettingsAt(t, r, f, "s", tc.rate, tc.paused)
			}
			edgetest.FillLine(t, r, "s", tc.length)
			tick(t, c, tk)
			f.Advance(300 * time.Millisecond)
			released := f.Now() // no admission may count time before this
			st := tick(t, c, tk)
			if st.NowServing != tc.want || st.QueueLength != tc.length || st.RatePerSecond != tc.wantRate {
				t.Errorf("State after 300 ms = serving %d of %d at rate %v, want serving %d of %d at rate %v",
					st.NowServing, st.QueueLength, st.RatePerSecond, tc.want, tc.length, tc.wantRate)
			}
			if tc.paused != nil && st.Paused != *tc.paused {
				t.Errorf("State.Paused = %v, want %v", st.Paused, *tc.paused)
			}
			if tc.want == tc.length || tc.starts.After(time.Now()) {
				return // nothing to lift, or a start the test cannot move
			}
			// Lift what held the cursor: it resumes at its rate, without a
			// burst for the 300 ms it waited.
			one := 1000.0
			edgetest.FillLine(t, r, "s", 10_000)
			if tc.paused != nil || tc.rate != nil {
				edgetest.SetLineSettingsAt(t, r, f, "s", &one, &no)
			}
			tk.Available, tk.Hold = 1_000_000, false
			tick(t, c, tk)
			f.Advance(100 * time.Millisecond)
			after := tick(t, c, tk)
			elapsed := f.Now().Sub(released)
			moved := after.NowServing - st.NowServing
			if limit := int64(1000*elapsed.Seconds()) + 2; moved < 1 || moved > limit {
				t.Errorf("cursor moved %d in %v at 1000/s once released, want 1..%d (no credit for the wait)", moved, elapsed, limit)
			}
		})
	}
}

// TestCursorRecordsHolds: a tick that holds for the checkout records when
// in the cursor's held_ms, which the origin's admission controller reads
// as the edges' sign of congestion; ticks that admit leave it alone.
func TestCursorRecordsHolds(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	edgetest.ReadyLine(t, r, "s", 1000)
	edgetest.FillLine(t, r, "s", 100)
	keys := line.NewKeys(r.Prefix)
	c := admission.NewCursor(r.Client, keys, nil)
	heldMs := func() string {
		v, err := r.Client.HGet(context.Background(), keys.Cursor("s"), line.CursorHeldMs).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("HGET held_ms = %v", err)
		}
		return v
	}
	tk := line.Tick{Sale: "s", StartsAt: time.Now().Add(-time.Minute), Available: 1_000_000}
	tick(t, c, tk)
	if got := heldMs(); got != "" {
		t.Fatalf("held_ms after a tick that admits = %q, want none", got)
	}
	before := redisTime(t, r)
	tk.Hold = true
	tick(t, c, tk)
	after := redisTime(t, r)
	ms, err := strconv.ParseInt(heldMs(), 10, 64)
	if at := time.UnixMilli(ms); err != nil || at.Before(before.Truncate(time.Millisecond)) || at.After(after) {
		t.Fatalf("held_ms after a holding tick = %q (%v), want a time in [%v, %v]", heldMs(), err, before, after)
	}
	tk.Hold = false
	tick(t, c, tk)
	if got := heldMs(); got != strconv.FormatInt(ms, 10) {
		t.Errorf("held_ms after an admitting tick = %q, want the hold's %d kept", got, ms)
	}
}

// fakeClock is a fake clock reading Redis's time now: the cursor's script
// runs on it, and the test moves it instead of waiting.
func fakeClock(t *testing.T, r *edgetest.Redis) *clock.Fake {
	t.Helper()
	return clock.NewFake(redisTime(t, r).Truncate(time.Millisecond))
}

func redisTime(t *testing.T, r *edgetest.Redis) time.Time {
	t.Helper()
	tm, err := r.Client.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME = %v", err)
	}
	return tm
}

// keptUp ticks a cursor for a checkout that keeps up: every shopper
// admitted is answered by the next tick.
type keptUp struct {
	t        *testing.T
	f        *clock.Fake
	c        *admission.Cursor
	tk       line.Tick
	admitted int64
}

// servingAt ticks every 20 ms of the fake clock until at has passed since
// from, then once more, and returns now_serving and the seconds since from.
func (k *keptUp) servingAt(from time.Time, at time.Duration) (int64, float64) {
	k.t.Helper()
	step := func() line.State {
		st := tick(k.t, k.c, k.tk)
		k.tk.Answered, k.admitted = st.NowServing-k.admitted, st.NowServing
		return st
	}
	for k.f.Now().Sub(from) < at {
		step()
		k.f.Advance(20 * time.Millisecond)
	}
	st := step()
	return st.NowServing, k.f.Now().Sub(from).Seconds()
}

// TestCursorConcurrentTicksAdmitAtRate: three nodes ticking as fast as
// they can never double-advance: over about a second the cursor moves at
// the rate.
func TestCursorConcurrentTicksAdmitAtRate(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	const rate = 500.0
	tk := line.Tick{Sale: "s", StartsAt: time.Now().Add(-time.Minute), Available: 1_000_000}
	edgetest.ReadyLine(t, r, "s", rate)
	cursors := make([]*admission.Cursor, 3)
	for i := range cursors {
		cursors[i] = admission.NewCursor(r.Client, keys, nil)
	}
	for _, c := range cursors {
		tick(t, c, tk) // each node's first reading: its pace from then on
	}
	edgetest.FillLine(t, r, "s", 100_000)
	// read returns the cursor and the instant it has admitted up to
	// (last_ms), with Redis's clock, in one transaction.
	read := func() (int64, float64, time.Time) {
		ctx := context.Background()
		pipe := r.Client.TxPipeline()
		tm := pipe.Time(ctx)
		cur := pipe.HMGet(ctx, keys.Cursor("s"), line.CursorNowServing, line.CursorLastMs)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("read cursor = %v", err)
		}
		var n int64
		var last float64
		v := cur.Val()
		if s, ok := v[0].(string); ok {
			n, _ = strconv.ParseInt(s, 10, 64)
		}
		if s, ok := v[1].(string); ok {
			last, _ = strconv.ParseFloat(s, 64)
		}
		return n, last, tm.Val()
	}
	n0, last0, _ := read()
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for _, c := range cursors {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if err := c.Tick(context.Background(), []line.Tick{tk}); err != nil {
						t.Errorf("Tick = %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	_, _, t0 := read()
	tick(t, cursors[1], tk)
	n1, last1, t1 := read()
	admitted, frontier := float64(n1-n0), (last1-last0)/1000
	// Exactly rate × the admitted span: nine concurrent tickers never
	// count the same span twice.
	if want := rate * frontier; math.Abs(admitted-want) > 2 {
		t.Errorf("cursor moved %v over an admitted span of %.3fs from 9 tickers, want %.0f (rate %v/s)", admitted, frontier, want, rate)
	}
	// And admission keeps up with Redis's clock: the last tick admitted up
	// to the moment it ran (less the unused part of one slot), which lies
	// between Redis's clock read just before and just after it, however
	// long the round trips took; never the future.
	before, after := float64(t0.UnixMicro())/1000-1000/rate, float64(t1.UnixMicro())/1000
	if last1 < before || last1 > after {
		t.Errorf("admission frontier %.3f outside [%.3f, %.3f]: Redis's clock before the last tick (less one slot) and after it", last1, before, after)
	}
	if admitted < rate*0.5 {
		t.Errorf("cursor moved %v in about a second at %v/s, want about %v", admitted, rate, rate)
	}
}

// TestCursorHoldingNodeTakesItsShare: of two nodes ticking in turn, one
// holding for its checkout, the spans the holding one ticks pass unused:
// the cursor moves at about half the rate, not at the rate (the other node
// does not admit the held time) nor not at all. A node's own slow start
// runs from its own last hold: once it stops holding, its ticks admit at
// an eighth of the rate at first, rising from there.
func TestCursorHoldingNodeTakesItsShare(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	const rate = 1000.0
	edgetest.ReadyLine(t, r, "s", rate)
	f := fakeClock(t, r)
	open := line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	admitting, holding := admission.NewCursor(r.Client, keys, f), admission.NewCursor(r.Client, keys, f)
	tick(t, admitting, open)
	tick(t, holding, open)
	edgetest.FillLine(t, r, "s", 100_000)
	first := tick(t, admitting, open).NowServing
	start := f.Now()
	var st line.State
	var heldAt time.Time
	for i := 0; f.Now().Sub(start) < time.Second; i++ {
		f.Advance(25 * time.Millisecond)
		if i%2 == 0 {
			held := open
			heldAt = f.Now()
			held.Hold, held.HeldAt = true, heldAt
			tick(t, holding, held)
		} else {
			st = tick(t, admitting, open)
		}
	}
	elapsed := f.Now().Sub(start).Seconds()
	if got, want := float64(st.NowServing-first), rate*elapsed/2; got < want*0.6 || got > want*1.4 {
		t.Errorf("admitted %.0f in %.2fs with one of two nodes holding at %v/s, want about %.0f (half)", got, elapsed, rate, want)
	}
	// The holding node stops holding and ticks alone: its slow start from
	// its last hold, about 0.18 of the rate over the first second.
	resumed := open
	resumed.HeldAt = heldAt
	from := tick(t, holding, resumed)
	begin := f.Now()
	for f.Now().Sub(begin) < time.Second {
		f.Advance(25 * time.Millisecond)
		st = tick(t, holding, resumed)
	}
	elapsed = f.Now().Sub(begin).Seconds()
	if got := float64(st.NowServing - from.NowServing); got < 0.1*rate*elapsed || got > 0.35*rate*elapsed {
		t.Errorf("admitted %.0f in the %.2fs after its last hold at %v/s, want the slow start's 0.1 to 0.35 of the rate", got, elapsed, rate)
	}
}

// TestCursorSlowStart: a sale that starts now admits at an eighth of the
// rate at first, doubling each second up to half of it, then an eighth
// more each second, and at the rate from the sixth second on.
func TestCursorSlowStart(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	const rate = 1000.0
	edgetest.ReadyLine(t, r, "s", rate)
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
	starts := f.Now()
	tk := line.Tick{Sale: "s", StartsAt: starts, Available: 1_000_000}
	edgetest.FillLine(t, r, "s", 100_000)
	// A checkout that keeps up, so after the first second (no answer rate
	// sampled yet: an eighth of the rate) twice the answer rate stays above
	// the ramp.
	k := &keptUp{t: t, f: f, c: c, tk: tk}
	servingAt := func(at time.Duration) (int64, float64) { return k.servingAt(starts, at) }
	one, _ := servingAt(time.Second)
	// An eighth of the rate until the first answer rate is sampled, a
	// second in (the ramp alone: ∫₀¹ 2^s/8 ds ≈ 0.18 of a second's worth).
	if one < int64(0.08*rate) || one > int64(0.3*rate) {
		t.Errorf("admitted %d in the first second at %v/s, want about 125–180 (the slow start)", one, rate)
	}
	three, from := servingAt(3 * time.Second)
	four, to := servingAt(4 * time.Second)
	// Half the rate and an eighth, to half and a quarter: about 0.69.
	if got := float64(four - three); got < 0.55*rate*(to-from) || got > 0.85*rate*(to-from) {
		t.Errorf("admitted %.0f from %.2fs to %.2fs at %v/s, want about 0.69 of the rate", got, from, to, rate)
	}
	six, from := servingAt(6 * time.Second)
	seven, to := servingAt(7 * time.Second)
	if got := float64(seven - six); got < 0.8*rate*(to-from) || got > 1.2*rate*(to-from) {
		t.Errorf("admitted %.0f from %.2fs to %.2fs at %v/s, want about the rate", got, from, to, rate)
	}
}

// TestCursorSlowStartFollowsTheCheckout: during the slow start the pace is
// at most twice the rate at which the checkout answers reserves (and at
// least an eighth of the set rate, whatever the rate before a raise just
// before the start): with no answers it stays at an eighth;
// with answers at 100/s it goes no faster than about 200/s where the ramp
// alone would admit 625/s and more; after the slow start that bound
// doubles every two seconds, and from twelve seconds on the set rate
// applies whatever the answers.
func TestCursorSlowStartFollowsTheCheckout(t *testing.T) {
	t.Parallel()
	const rate = 1000.0
	for _, c := range []struct {
		name          string
		raisedFrom    float64 // the rate before a raise just before the start (0: none)
		answersPerSec float64
		from, to      time.Duration
		want          float64 // admissions a second
	}{
		{"no answers", 0, 0, 3 * time.Second, 4 * time.Second, rate / 8},
		{"answers at 100/s", 0, 100, 3 * time.Second, 4 * time.Second, 200},
		// After the six seconds the bound doubles every two seconds: an
		// eighth of the rate times 2 to 2.8 from 8 to 9 s.
		{"the bound fading", 0, 0, 8 * time.Second, 9 * time.Second, 300},
		{"after the bound", 0, 0, 12500 * time.Millisecond, 13500 * time.Millisecond, rate},
		// The old rate is no least for the start's ramp.
		{"raised before the start, no answers", rate / 2, 0, 3 * time.Second, 4 * time.Second, rate / 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := edgetest.NewRedis(t)
			f := fakeClock(t, r)
			if c.raisedFrom > 0 {
				edgetest.ReadyLine(t, r, "s", c.raisedFrom)
				edgetest.SetLineSettingsAt(t, r, f, "s", new(rate), nil)
			} else {
				edgetest.ReadyLine(t, r, "s", rate)
			}
			f.Advance(time.Millisecond) // the start is after the raise
			cur := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
			starts := f.Now()
			tk := line.Tick{Sale: "s", StartsAt: starts, Available: 1_000_000}
			edgetest.FillLine(t, r, "s", 100_000)
			last, owed := f.Now(), 0.0
			servingAt := func(at time.Duration) (int64, float64) {
				t.Helper()
				for {
					now := f.Now()
					owed += c.answersPerSec * now.Sub(last).Seconds()
					last = now
					tk.Answered = int64(owed)
					owed -= float64(tk.Answered)
					st := tick(t, cur, tk)
					if f.Now().Sub(starts) >= at {
						return st.NowServing, f.Now().Sub(starts).Seconds()
					}
					f.Advance(20 * time.Millisecond)
				}
			}
			from, fromS := servingAt(c.from)
			to, toS := servingAt(c.to)
			if got, want := float64(to-from)/(toS-fromS), c.want; got < 0.7*want || got > 1.3*want {
				t.Errorf("admitted %d from %.2fs to %.2fs: %.0f/s, want about %.0f/s", to-from, fromS, toS, got, want)
			}
		})
	}
}

// TestCursorRampsAfterAResumeOrARaise: in a sale long started, a resume
// ramps as the start does (about 0.18 of the rate in its first second),
// and a raise from 200/s to 1000/s rises from the old rate (about 344 in
// its first second) instead of jumping; six seconds on, both admit at the
// rate. The checkout keeps up: every shopper admitted is answered by the
// next tick.
func TestCursorRampsAfterAResumeOrARaise(t *testing.T) {
	t.Parallel()
	const rate = 1000.0
	for _, c := range []struct {
		name        string
		before      float64 // the rate before the change
		pausedFirst bool
		firstSecond float64 // admitted in the first second after it
	}{
		{"resume", rate, true, 0.18 * rate},
		{"raise", 200, false, 200 + 0.18*(rate-200)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := edgetest.NewRedis(t)
			f := fakeClock(t, r)
			edgetest.ReadyLine(t, r, "s", c.before)
			edgetest.FillLine(t, r, "s", 100_000)
			if c.pausedFirst {
				edgetest.SetLineSettingsAt(t, r, f, "s", nil, new(true))
			}
			cur := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
			k := &keptUp{t: t, f: f, c: cur, tk: line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}}
			servingAt := k.servingAt
			// A second and a half at the old setting: the answer rate is
			// sampled.
			servingAt(f.Now(), 1500*time.Millisecond)
			edgetest.SetLineSettingsAt(t, r, f, "s", new(rate), new(false))
			changed := f.Now()
			zero, fromS := servingAt(changed, 0)
			one, toS := servingAt(changed, time.Second)
			if got, want := float64(one-zero)/(toS-fromS), c.firstSecond; got < 0.65*want || got > 1.4*want {
				t.Errorf("admitted %d from %.2fs to %.2fs after the %s: %.0f/s, want about %.0f/s", one-zero, fromS, toS, c.name, got, want)
			}
			six, fromS := servingAt(changed, 6500*time.Millisecond)
			seven, toS := servingAt(changed, 7500*time.Millisecond)
			if got := float64(seven-six) / (toS - fromS); got < 0.8*rate || got > 1.2*rate {
				t.Errorf("admitted %d from %.2fs to %.2fs after the %s: %.0f/s, want about the rate (%v/s)", seven-six, fromS, toS, c.name, got, rate)
			}
		})
	}
}

// TestCursorNoCatchUpBurst: a sale that started a minute ago and a long
// line, with no tick until now (every node was down): the first tick admits
// at most a second's worth, not the whole minute.
func TestCursorNoCatchUpBurst(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	sale := "burst-" + edgetest.RandomID(t, 3)
	edgetest.ReadyLine(t, r, sale, 100)
	edgetest.FillLine(t, r, sale, 100_000)
	// Nothing admitted since the start: no admission frontier yet.
	if err := r.Client.HDel(context.Background(), line.NewKeys(r.Prefix).Cursor(sale), line.CursorLastMs).Err(); err != nil {
		t.Fatalf("HDEL last_ms = %v", err)
	}
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
	tk := line.Tick{Sale: sale, StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	// The node's first tick reads the line (it has no pace yet); its
	// second, at the same moment, admits.
	if st := tick(t, c, tk); st.NowServing != 0 {
		t.Fatalf("a node's first tick: now_serving = %d, want 0 (no pace before its first reading)", st.NowServing)
	}
	st := tick(t, c, tk)
	if st.NowServing > 101 {
		t.Fatalf("first admitting tick after a minute without ticks: now_serving = %d, want at most one second's worth (100)", st.NowServing)
	}
	if st.NowServing < 99 {
		t.Fatalf("first admitting tick after a minute without ticks: now_serving = %d, want about one second's worth (100)", st.NowServing)
	}
}

// TestCursorSlowRate: below one admission a second the line still moves.
func TestCursorSlowRate(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	sale := "slow-" + edgetest.RandomID(t, 3)
	edgetest.ReadyLine(t, r, sale, 0.5)
	edgetest.FillLine(t, r, sale, 100)
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
	tk := line.Tick{Sale: sale, StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	var st line.State
	for deadline := f.Now().Add(2500 * time.Millisecond); f.Now().Before(deadline); f.Advance(100 * time.Millisecond) {
		st = tick(t, c, tk)
	}
	if st.NowServing < 1 || st.NowServing > 2 {
		t.Fatalf("now_serving after 2.5 s at 0.5/s = %d, want 1 or 2", st.NowServing)
	}
}

// TestCursorPacesToScarceStock: with 20 units available and a rate of
// 1000/s, the cursor admits about 40 a second (twice the units), not 1000;
// with plenty available it runs at the rate. Just after a resume the
// same: the ramp (125/s at first) does not slow the scarce pace further.
func TestCursorPacesToScarceStock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		available int64
		resumed   bool  // just resumed: the ramp's 125/s is no bound below twice the units
		lo, hi    int64 // admitted over about a second
	}{
		{20, false, 25, 60},
		{20, true, 25, 60},
		{1_000_000, false, 800, 1200},
	} {
		r := edgetest.NewRedis(t)
		f := fakeClock(t, r)
		edgetest.ReadyLine(t, r, "s", 1000)
		if tc.resumed {
			edgetest.SetLineSettingsAt(t, r, f, "s", nil, new(true))
			edgetest.SetLineSettingsAt(t, r, f, "s", nil, new(false))
		}
		c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
		tk := line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: tc.available}
		first := tick(t, c, tk).NowServing
		edgetest.FillLine(t, r, "s", 100_000)
		var st line.State
		for end := f.Now().Add(time.Second); f.Now().Before(end); f.Advance(50 * time.Millisecond) {
			st = tick(t, c, tk)
		}
		if got := st.NowServing - first; got < tc.lo || got > tc.hi {
			t.Errorf("available %d (resumed %v): admitted %d in about a second, want %d to %d", tc.available, tc.resumed, got, tc.lo, tc.hi)
		}
		if st.RatePerSecond != 1000 {
			t.Errorf("available %d: RatePerSecond = %v, want the configured 1000 (pacing is not a setting)", tc.available, st.RatePerSecond)
		}
	}
}

// TestCursorStopsAtServingCeiling: the cursor never passes the durable
// serving ceiling and moves on once it is raised; after the start it waits
// for the draw size to be sealed, and a seal is kept once made.
func TestCursorStopsAtServingCeiling(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	lines := line.NewLines(r.Client, keys, nil)
	edgetest.RestoreLine(t, r, "s", line.Durable{RatePerSecond: 1000, PreCeiling: 10, PostCeiling: edgetest.OpenCeiling, ServingCeiling: 30})
	edgetest.FillLine(t, r, "s", 10_000)
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, keys, f)
	tk := line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	wait := func(what string, ok func(line.State) bool) line.State {
		t.Helper()
		var st line.State
		testenv.Eventually(t, 3*time.Second, "State as expected "+what, func() bool {
			f.Advance(20 * time.Millisecond)
			st = tick(t, c, tk)
			return ok(st)
		})
		return st
	}
	tick(t, c, tk)
	f.Advance(100 * time.Millisecond)
	if st := tick(t, c, tk); st.NowServing != 0 || st.Drawn {
		t.Fatalf("State before the seal = %+v, want no admission until the draw is sealed", st)
	}
	if n, err := lines.Seal(ctx, "s", 7); err != nil || n != 7 {
		t.Fatalf("Seal(7) = %d, %v; want 7", n, err)
	}
	if n, err := lines.Seal(ctx, "s", 9); err != nil || n != 7 {
		t.Errorf("Seal(9) after Seal(7) = %d, %v; want 7 kept", n, err)
	}
	wait("after the seal", func(st line.State) bool { return st.Drawn && st.DrawSize == 7 && st.NowServing == 30 })
	f.Advance(100 * time.Millisecond)
	if st := tick(t, c, tk); st.NowServing != 30 || st.ServingCeiling != 30 {
		t.Fatalf("State 100 ms at the serving ceiling = %+v, want still 30", st)
	}
	if _, err := lines.Raise(ctx, "s", line.Ceilings{Serving: 80}); err != nil {
		t.Fatalf("Raise = %v", err)
	}
	if _, err := lines.Raise(ctx, "s", line.Ceilings{Serving: 50, Pre: 3}); err != nil {
		t.Fatalf("Raise lower = %v", err)
	}
	st := wait("after the raise", func(st line.State) bool { return st.NowServing == 80 })
	if st.ServingCeiling != 80 || st.PreCeiling != 10 {
		t.Errorf("ceilings after raising to 80 then 50 (pre 3) = serving %d, pre %d; want 80 and 10: a raise never lowers", st.ServingCeiling, st.PreCeiling)
	}
}
