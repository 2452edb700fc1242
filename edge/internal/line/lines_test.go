package line_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestLineLostHandsOutNothing: with no line in Redis (never restored, or
// lost), joins, the cursor, settings, raises and seals all refuse with
// ErrLost instead of starting the line from zero, and the Joiner tells its
// observer.
func TestLineLostHandsOutNothing(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	var observed atomic.Bool
	j := line.NewJoiner(r.Client, keys, line.JoinerOptions{Observe: func(_ string, lv line.Level) {
		if lv.Lost {
			observed.Store(true)
		}
	}})
	t.Cleanup(j.Close)
	past := time.Now().Add(-time.Minute)
	if _, _, err := j.Join(ctx, "s", past, "a"); !errors.Is(err, line.ErrLost) {
		t.Errorf("Join with no line = %v, want ErrLost", err)
	}
	if !observed.Load() {
		t.Errorf("Observe heard no Lost level after a join found no line")
	}
	c := admission.NewCursor(r.Client, keys, nil)
	if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 10}}); err != nil {
		t.Errorf("Tick with no line = %v, want nil (the sale is marked lost)", err)
	}
	if st, ok := c.State("s"); !ok || !st.Lost {
		t.Errorf("State after a tick with no line = %+v, %v; want Lost", st, ok)
	}
	lines := line.NewLines(r.Client, keys, nil)
	if _, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 5, Paused: true, Version: 1}, edgetest.OpenCeiling, line.Seen{}); !errors.Is(err, line.ErrLost) {
		t.Errorf("Settings with no line = %v, want ErrLost", err)
	}
	if _, err := lines.Raise(ctx, "s", line.Ceilings{Post: 10}); !errors.Is(err, line.ErrLost) {
		t.Errorf("Raise with no line = %v, want ErrLost", err)
	}
	if _, err := lines.Seal(ctx, "s", 3); !errors.Is(err, line.ErrLost) {
		t.Errorf("Seal with no line = %v, want ErrLost", err)
	}
	if _, err := lines.Seed(ctx, "s"); !errors.Is(err, line.ErrLost) {
		t.Errorf("Seed with no line = %v, want ErrLost", err)
	}
	if n, _ := r.Client.Exists(ctx, keys.Pre("s"), keys.Post("s"), keys.Places("s"), keys.Cursor("s"), keys.Line("s")).Result(); n != 0 {
		t.Errorf("%d of the line's keys exist after refused calls, want none", n)
	}

	// Every key of a whole line is needed: losing any one of them is a loss.
	restoreAt(t, r, "s", line.Durable{RatePerSecond: 1, PreCeiling: 10, PostCeiling: 10, ServingCeiling: 10, Drawn: true})
	if _, _, err := j.Join(ctx, "s", past, "a"); err != nil {
		t.Fatalf("Join after the restore = %v", err)
	}
	for _, key := range []string{keys.Post("s"), keys.Line("s")} {
		snap, _ := r.Client.Dump(ctx, key).Result()
		r.Client.Del(ctx, key)
		if _, _, err := j.Join(ctx, "s", past, "b"); !errors.Is(err, line.ErrLost) {
			t.Errorf("Join with %s gone = %v, want ErrLost", key, err)
		}
		if err := r.Client.Restore(ctx, key, 0, snap).Err(); err != nil {
			t.Fatalf("put %s back: %v", key, err)
		}
	}
}

// TestJoinNeverPassesCeiling: joins stop at the durable ceiling — a batch
// that would pass it is served in order up to it and the rest wait
// (ErrWait, counted in Level.Refused) — before and after the start; 600
// joins racing through three Joiners against a ceiling of 250 get exactly
// 250 places; once the ceiling is raised the waiting joins get the next
// places.
func TestJoinNeverPassesCeiling(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	restoreAt(t, r, "s", line.Durable{RatePerSecond: 1, PreCeiling: 5, PostCeiling: 250, ServingCeiling: 10})

	var refused atomic.Int64
	// highest is the level with the most joins placed: three joiners observe
	// concurrently, so the last call to arrive need not be the last round trip.
	var highest atomic.Pointer[line.Level]
	observe := func(_ string, lv line.Level) {
		refused.Add(int64(lv.Refused))
		for {
			old := highest.Load()
			if old != nil && old.Post >= lv.Post {
				return
			}
			if highest.CompareAndSwap(old, &lv) {
				return
			}
		}
	}
	run := func(starts time.Time, accounts ...string) []string {
		t.Helper()
		args := []any{starts.UnixMilli()}
		for _, a := range accounts {
			args = append(args, a)
		}
		got, err := line.JoinScript.Run(ctx, r.Client, []string{keys.Pre("s"), keys.Post("s"), keys.Places("s"), keys.Line("s")}, args...).StringSlice()
		if err != nil {
			t.Fatalf("join.lua %v: %v", accounts, err)
		}
		if epoch := got[len(got)-1]; !strings.HasPrefix(epoch, "e-") {
			t.Errorf("join.lua's last value = %q, want the epoch of the restore that put the line here", epoch)
		}
		return got[:len(got)-1]
	}
	// Before the start: the pre-queue stops at 5, a repeat of a waiting
	// account waits too, and the tail tells the level.
	got := run(time.Now().Add(time.Hour), "a", "b", "c", "d", "e", "f", "a", "g")
	want := []string{"p1", "p2", "p3", "p4", "p5", "w", "p1", "w", "5", "5", "5", "0", "250", "1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("join.lua before the start at pre ceiling 5 = %v, want %v", got, want)
	}

	joiners := make([]*line.Joiner, 3)
	for i := range joiners {
		joiners[i] = line.NewJoiner(r.Client, keys, line.JoinerOptions{Observe: observe})
		t.Cleanup(joiners[i].Close)
	}
	past := time.Now().Add(-time.Minute)
	var placed, waited atomic.Int64
	var aWaiter atomic.Value // an account that got ErrWait
	positions := sync.Map{}
	var wg sync.WaitGroup
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _, err := joiners[i%3].Join(ctx, "s", past, fmt.Sprintf("post-%03d", i))
			switch {
			case errors.Is(err, line.ErrWait):
				waited.Add(1)
				aWaiter.Store(fmt.Sprintf("post-%03d", i))
			case err != nil:
				t.Errorf("Join(post-%03d) = %v", i, err)
			default:
				placed.Add(1)
				if _, dup := positions.LoadOrStore(p.Position, i); dup || p.Position <= 5 || p.Position > 255 {
					t.Errorf("Join(post-%03d) = position %d, want a position of its own in 6..255", i, p.Position)
				}
			}
		}()
	}
	wg.Wait()
	if placed.Load() != 250 || waited.Load() != 350 || refused.Load() != 350 {
		t.Fatalf("600 joins at post ceiling 250: %d placed, %d waited, %d refused observed; want 250, 350, 350", placed.Load(), waited.Load(), refused.Load())
	}
	if lv := highest.Load(); lv == nil || lv.Post != 250 || lv.PostCeiling != 250 || lv.BeforeStart {
		t.Errorf("highest Level observed = %+v, want post 250 at its ceiling 250, after the start", lv)
	}
	post, _ := r.Client.Get(ctx, keys.Post("s")).Int64()
	if post != 250 {
		t.Errorf("post counter = %d, want exactly the ceiling 250", post)
	}

	if _, err := line.NewLines(r.Client, keys, nil).Raise(ctx, "s", line.Ceilings{Post: 260}); err != nil {
		t.Fatalf("Raise = %v", err)
	}
	waiter := aWaiter.Load().(string)
	p, length, err := joiners[0].Join(ctx, "s", past, waiter)
	if err != nil || p.Position != 256 || length != 256 {
		t.Errorf("Join of %s, who waited, after the raise = %+v, %d, %v; want position 256 (5 + 251), length 256", waiter, p, length, err)
	}
}

// TestRestoreOnceAtCeilings: a restore resumes every counter at its
// ceiling and the cursor at its ceiling (never past the restored line), so
// new joins come after every place handed out before; when ten nodes
// restore at once exactly one writes; and a restore finding the line
// whole, or parts of it left, never lowers anything.
func TestRestoreOnceAtCeilings(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	lines := line.NewLines(r.Client, keys, nil)

	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := line.Durable{Seed: testSeed, RatePerSecond: float64(10 + i), Paused: true, SettingsVersion: 4,
				Pre: 40, Post: 300, NowServing: 500, PreCeiling: 40, PostCeiling: 400 + int64(i), ServingCeiling: 520,
				DrawSize: 37, Drawn: true}
			got, err := lines.Restore(ctx, "s", fmt.Sprintf("node-%d", i), d)
			if err != nil {
				t.Errorf("Restore from node %d = %v", i, err)
			}
			if got != line.Whole {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of 10 racing restores wrote, want exactly 1", wins.Load())
	}
	c := admission.NewCursor(r.Client, keys, nil)
	past := time.Now().Add(-time.Minute)
	if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 100}}); err != nil {
		t.Fatalf("Tick = %v", err)
	}
	st, _ := c.State("s")
	// now_serving: the serving ceiling 500 is above the restored line
	// (40 + 300), so the line's end; paused keeps it there.
	if st.Lost || st.NowServing != 340 || st.QueueLength != 340 || !st.Paused || st.RatePerSecond < 10 ||
		!st.Drawn || st.DrawSize != 37 || st.PreQueue != 40 || st.Post != 300 {
		t.Errorf("State after the restore = %+v, want the line at 40 + 300, serving 340, paused, draw 37", st)
	}
	j := line.NewJoiner(r.Client, keys, line.JoinerOptions{})
	t.Cleanup(j.Close)
	if p, _, err := j.Join(ctx, "s", past, "new"); err != nil || p.Position != 341 {
		t.Errorf("first join after the restore = %+v, %v; want position 341, after every place before", p, err)
	}

	// Whole: a second restore with lower values changes nothing.
	if restoreAt(t, r, "s", line.Durable{RatePerSecond: 99, Pre: 1, Post: 1, PreCeiling: 1, PostCeiling: 1, ServingCeiling: 1}) {
		t.Errorf("Restore of a whole line = true, want false")
	}
	// Partly lost (the epoch gone, the counters left), and Redis holds
	// newer settings than the copy: nothing changes until a restore
	// brings a copy as new.
	r.Client.HDel(ctx, keys.Line("s"), line.LineEpoch)
	older := line.Durable{Seed: testSeed, RatePerSecond: 99, SettingsVersion: 1, Pre: 1, Post: 1, PreCeiling: 1, PostCeiling: 1, ServingCeiling: 1}
	if got, err := lines.Restore(ctx, "s", "older", older); err != nil || got != line.Newer {
		t.Errorf("Restore of a line without its epoch from an older copy = %v, %v; want Newer", got, err)
	}
	if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 100}}); err != nil {
		t.Fatalf("Tick = %v", err)
	}
	if st, _ := c.State("s"); !st.Lost {
		t.Errorf("State after a refused restore = %+v, want still lost", st)
	}
	// From a copy as new, with lower values: no counter or cursor is
	// lowered; the serving ceiling is the one given, never below the cursor.
	if !restoreAt(t, r, "s", line.Durable{RatePerSecond: 12, Paused: true, SettingsVersion: 4, Pre: 1, Post: 1, PreCeiling: 1, PostCeiling: 1, ServingCeiling: 1}) {
		t.Errorf("Restore of a line without its epoch = false, want true")
	}
	if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 100}}); err != nil {
		t.Fatalf("Tick = %v", err)
	}
	st, _ = c.State("s")
	if st.PreQueue != 40 || st.Post != 301 || st.NowServing != 340 || st.PostCeiling < 400 || st.ServingCeiling != 340 ||
		!st.Paused || st.RatePerSecond != 12 || st.DrawSize != 37 {
		t.Errorf("State after restoring lower values over a partial loss = %+v, want nothing lowered, the serving ceiling at the cursor", st)
	}
}

// TestSettingsKeepNewest: settings carry the origin's version; an older
// version arriving after a newer one changes nothing.
func TestSettingsKeepNewest(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	ready(t, r, "s", 100)
	lines := line.NewLines(r.Client, line.NewKeys(r.Prefix), nil)
	ctx := context.Background()
	if st, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 5, Paused: true, Version: 2}, edgetest.OpenCeiling, line.Seen{}); err != nil || st.RatePerSecond != 5 || !st.Paused {
		t.Fatalf("Settings(5, paused, v2) = %+v, %v; want rate 5 paused", st, err)
	}
	if st, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 50, Paused: false, Version: 1}, edgetest.OpenCeiling, line.Seen{}); err != nil || st.RatePerSecond != 5 || !st.Paused {
		t.Errorf("Settings(50, running, v1) after v2 = %+v, %v; want v2's rate 5, paused kept", st, err)
	}
}

// TestSettingsStartARamp: a resume records a ramp from nothing, a raise
// one from the rate before it; a raise while that ramp runs lets it go on,
// and a lowered rate or a change while paused starts none.
func TestSettingsStartARamp(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	ready(t, r, "s", 100)
	keys := line.NewKeys(r.Prefix)
	lines := line.NewLines(r.Client, keys, nil)
	ctx := context.Background()
	ramp := func() (string, string) {
		t.Helper()
		v, err := r.Client.HMGet(ctx, keys.Cursor("s"), line.CursorRampMs, line.CursorRampFrom).Result()
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := v[0].(string)
		from, _ := v[1].(string)
		return ms, from
	}
	version := int64(1)
	set := func(rate float64, paused bool) {
		t.Helper()
		version++
		if _, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: rate, Paused: paused, Version: version}, edgetest.OpenCeiling, line.Seen{}); err != nil {
			t.Fatalf("Settings(%v, paused %v) = %v", rate, paused, err)
		}
	}
	set(50, false) // lowered
	if ms, _ := ramp(); ms != "" {
		t.Errorf("ramp after a lowered rate = %q, want none", ms)
	}
	set(500, true) // raised while paused
	if ms, _ := ramp(); ms != "" {
		t.Errorf("ramp after a raise while paused = %q, want none", ms)
	}
	set(500, false) // resumed
	resumed, from := ramp()
	if resumed == "" || from != "0" {
		t.Fatalf("ramp after a resume = %q from %q, want one from 0", resumed, from)
	}
	set(900, false) // raised while the resume's ramp runs
	if ms, from := ramp(); ms != resumed || from != "0" {
		t.Errorf("ramp after a raise during the resume's = %q from %q, want the resume's (%q from 0) going on", ms, from, resumed)
	}
	// Six seconds later the ramp is over: a raise starts its own.
	old := strconv.FormatInt(time.Now().Add(-7*time.Second).UnixMilli(), 10)
	if err := r.Client.HSet(ctx, keys.Cursor("s"), line.CursorRampMs, old).Err(); err != nil {
		t.Fatal(err)
	}
	set(2000, false)
	if ms, from := ramp(); ms == old || ms == "" || from != "900" {
		t.Errorf("ramp after a raise from 900 = %q from %q, want a new one from 900", ms, from)
	}
}

// TestLineThatLostWrites: a line Redis holds whole but with writes lost is
// found and raised. It records the Redis history it is good in (INFO
// replication's master_replid); once it is in another history — a lagging
// replica promoted — joins and the cursor refuse with ErrLost and change
// nothing, and a restore raises the counters to their ceilings, the cursor
// to its ceiling and takes the newer settings, while a second restore
// (another node) finds it whole and changes nothing. A Redis holding less
// than a node read before is treated the same way.
func TestLineThatLostWrites(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	lines := line.NewLines(r.Client, keys, nil)
	past := time.Now().Add(-time.Minute)
	j := line.NewJoiner(r.Client, keys, line.JoinerOptions{})
	t.Cleanup(j.Close)
	c := admission.NewCursor(r.Client, keys, nil)
	tick := func() line.State {
		t.Helper()
		if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 100}}); err != nil {
			t.Fatalf("Tick = %v", err)
		}
		st, _ := c.State("s")
		return st
	}
	restoreAt(t, r, "s", line.Durable{RatePerSecond: 1, SettingsVersion: 1, Post: 20, NowServing: 10,
		PostCeiling: 40, ServingCeiling: 30, Drawn: true})
	info, err := r.Client.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication = %v", err)
	}
	replid, _ := r.Client.HGet(ctx, keys.Line("s"), line.LineReplID).Result()
	if len(replid) != 40 || !strings.Contains(info, "master_replid:"+replid) {
		t.Fatalf("line's replid after a restore = %q, want this Redis's master_replid (%s)", replid, info)
	}
	if st := tick(); st.Lost || st.Post != 20 || st.NowServing != 10 {
		t.Fatalf("State of the restored line = %+v, want post 20, now_serving 10", st)
	}

	// Another history: a replica that lagged was promoted.
	r.Client.HSet(ctx, keys.Line("s"), line.LineReplID, strings.Repeat("0", 40))
	if _, _, err := j.Join(ctx, "s", past, "x"); !errors.Is(err, line.ErrLost) {
		t.Errorf("Join on a line from another Redis history = %v, want ErrLost", err)
	}
	if st := tick(); !st.Lost {
		t.Errorf("State after a tick on a line from another history = %+v, want Lost", st)
	}
	if post, _ := r.Client.Get(ctx, keys.Post("s")).Int64(); post != 20 {
		t.Errorf("post counter after refused calls = %d, want 20 (unchanged)", post)
	}
	d := line.Durable{Seed: testSeed, RatePerSecond: 7, Paused: true, SettingsVersion: 3, Post: 40, NowServing: 30,
		PostCeiling: 72, ServingCeiling: 46, Drawn: true, Seen: c.Seen("s")}
	if got, err := lines.Restore(ctx, "s", "node-a", d); err != nil || got != line.Behind {
		t.Fatalf("Restore of a line from another history = %v, %v; want Behind", got, err)
	}
	d.RatePerSecond, d.Paused, d.Post, d.NowServing, d.PostCeiling, d.ServingCeiling = 1, false, 72, 46, 104, 62
	if got, err := lines.Restore(ctx, "s", "node-b", d); err != nil || got != line.Whole {
		t.Errorf("a second node's Restore right after = %v, %v; want Whole", got, err)
	}
	st := tick()
	if st.Lost || st.Post != 40 || st.NowServing != 30 || st.PostCeiling != 72 || st.ServingCeiling != 46 ||
		!st.Paused || st.RatePerSecond != 7 || st.SettingsVersion != 3 {
		t.Errorf("State after the restore = %+v, want post 40 and now_serving 30 (the ceilings), ceilings 72 and 46, paused at 7 (version 3)", st)
	}
	if p, _, err := j.Join(ctx, "s", past, "x"); err != nil || p.Position != 41 {
		t.Errorf("Join after the restore = %+v, %v; want position 41, after every place handed out before", p, err)
	}

	// Less than this node read (the history the same): lost writes too.
	st = tick()
	r.Client.Set(ctx, keys.Post("s"), 35, 0)
	r.Client.HSet(ctx, keys.Cursor("s"), line.CursorNowServing, 20)
	if got := tick(); !got.Lost {
		t.Errorf("State after a tick on a line below this node's reading = %+v, want Lost", got)
	}
	d = line.Durable{Seed: testSeed, RatePerSecond: 7, Paused: true, SettingsVersion: 3, Post: 72, NowServing: 46,
		PostCeiling: 104, ServingCeiling: 62, Drawn: true, Seen: c.Seen("s")}
	if got, err := lines.Restore(ctx, "s", "node-a", d); err != nil || got != line.Behind {
		t.Fatalf("Restore of a line below the node's reading = %v, %v; want Behind", got, err)
	}
	if got := tick(); got.Lost || got.Post != 72 || got.NowServing != 46 || got.Post < st.Post || got.NowServing < st.NowServing {
		t.Errorf("State after the restore = %+v, want post 72, now_serving 46 (never below the reading %+v)", got, st)
	}
}
