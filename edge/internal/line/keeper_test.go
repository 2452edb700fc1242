package line_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// stubStore is the origin's durable copy of sale "s" as an edge reaches
// it: the stub origin's /v1/lines routes, through an OriginStore.
func stubStore(t *testing.T) (*edgetest.StubOrigin, line.Store) {
	t.Helper()
	o := edgetest.NewStubOrigin(t)
	o.SetSale(edgetest.OpenSale("s", 1_000_000))
	store, err := line.NewOriginStore(o.URL, tokenstest.KeySet(), tokenstest.LineAudience, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return o, store
}

// rowOf is the origin's copy of a sale's line (zero before the first).
func rowOf(o *edgetest.StubOrigin, sale string) line.Row {
	r, _ := o.Line(sale)
	return r
}

// background runs a test's loops — a node's tick, an invariant's check —
// until halt, which t.Cleanup calls too.
type background struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func newBackground(t *testing.T) *background {
	b := &background{stop: make(chan struct{})}
	t.Cleanup(b.halt)
	return b
}

// every runs f every period until halt.
func (b *background) every(period time.Duration, f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			select {
			case <-b.stop:
				return
			case <-time.After(period):
			}
			f()
		}
	}()
}

// halt stops the loops and waits for them.
func (b *background) halt() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// waitRead waits until c has finished a tick of sale begun after the call,
// and returns its reading: what Redis held then, or later.
func waitRead(t *testing.T, c *admission.Cursor, sale string) line.State {
	t.Helper()
	since := time.Now()
	// The first reading after since may come from a tick under way at
	// since; the one after it, from a tick begun later.
	var first time.Time
	var st line.State
	testenv.Eventually(t, 5*time.Second, "a tick reading "+sale, func() bool {
		st, _ = c.State(sale)
		if first.IsZero() {
			if st.ReadAt.After(since) {
				first = st.ReadAt
			}
			return false
		}
		return st.ReadAt.After(first)
	})
	return st
}

// TestKeeperKeepsRedisUnderTheOrigin: a Keeper with its cursor ticking
// every 10 ms and 2,000 shoppers joining from 40 goroutines: every join
// gets a place (positions exactly 1..2000) while the ceilings are raised
// ahead of them, and at no moment does Redis hold a counter above its
// ceiling or a ceiling above the origin's. With the origin unreachable,
// joins stop at the ceiling (ErrWait after JoinWait), a settings change
// fails and leaves Redis as it was, and nothing in Redis passes the
// origin's copy.
func TestKeeperKeepsRedisUnderTheOrigin(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	origin, store := stubStore(t)
	cursor := admission.NewCursor(r.Client, keys, nil)
	k := line.New(line.NewLines(r.Client, keys, nil), store, cursor,
		line.Options{DefaultRatePerSecond: 50, MinBlock: 32, JoinWait: 200 * time.Millisecond},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	t.Cleanup(k.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	starts := time.Now().Add(-time.Minute)
	ticks := []line.Tick{{Sale: "s", StartsAt: starts, Available: 1_000_000}}
	loops := newBackground(t)
	loops.every(10*time.Millisecond, func() { // the node's tick
		_ = cursor.Tick(ctx, ticks)
		k.Maintain(ticks)
	})
	var violations atomic.Int64
	loops.every(2*time.Millisecond, func() { // the invariant, read Redis first: the origin's copy only grows
		post, _ := r.Client.Get(ctx, keys.Post("s")).Int64()
		h, _ := r.Client.HMGet(ctx, keys.Line("s"), "post_ceiling", "serving_ceiling").Result()
		serving, _ := r.Client.HGet(ctx, keys.Cursor("s"), "now_serving").Int64()
		num := func(v any) int64 {
			s, _ := v.(string)
			n, _ := strconv.ParseInt(s, 10, 64)
			return n
		}
		row := rowOf(origin, "s")
		if post > num(h[0]) || num(h[0]) > row.PostCeiling || serving > num(h[1]) || num(h[1]) > row.ServingCeiling {
			violations.Add(1)
			t.Errorf("Redis post %d / ceiling %v, now_serving %d / ceiling %v; origin ceilings post %d serving %d: want Redis never above",
				post, h[0], serving, h[1], row.PostCeiling, row.ServingCeiling)
		}
	})

	testenv.Eventually(t, 5*time.Second, "the line created and sealed", func() bool {
		st, ok := cursor.State("s")
		_, seeded := k.Seed("s")
		return ok && !st.Lost && st.Drawn && seeded
	})
	if row := rowOf(origin, "s"); len(row.Seed) != 64 || row.RatePerSecond != 50 {
		t.Fatalf("origin's copy after the first restore = %+v, want a seed and the default rate", row)
	}

	const shoppers = 2000
	positions := make([]int64, shoppers)
	var wg sync.WaitGroup
	for w := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < shoppers; i += 40 {
				for {
					p, err := k.Join(ctx, "s", starts, fmt.Sprintf("a-%04d", i))
					if errors.Is(err, line.ErrWait) && ctx.Err() == nil {
						continue // as a shopper told please_wait would
					}
					if err != nil {
						t.Errorf("Join(a-%04d) = %v", i, err)
						return
					}
					positions[i] = p.Position
					break
				}
			}
		}()
	}
	wg.Wait()
	seen := make(map[int64]bool, shoppers)
	for i, p := range positions {
		if p < 1 || p > shoppers || seen[p] {
			t.Fatalf("a-%04d got position %d, want a position of its own in 1..%d", i, p, shoppers)
		}
		seen[p] = true
	}

	// The origin goes away: joins stop at the ceiling, settings change nothing.
	origin.SetLinesDown(true)
	// A raise that reached the origin before it went lands.
	testenv.Eventually(t, 5*time.Second, "the keeper idle", k.Idle)
	before, _ := cursor.State("s")
	room := rowOf(origin, "s").PostCeiling - shoppers // what the ceiling still allows
	more := int(room) + 60
	var placed, waited atomic.Int64
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < more; i += 20 {
				_, err := k.Join(ctx, "s", starts, fmt.Sprintf("b-%03d", i))
				switch {
				case errors.Is(err, line.ErrWait):
					waited.Add(1)
				case err != nil:
					t.Errorf("Join(b-%03d) with the origin down = %v", i, err)
				default:
					placed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	post, _ := r.Client.Get(ctx, keys.Post("s")).Int64()
	if row := rowOf(origin, "s"); waited.Load() != 60 || placed.Load() != room || post != row.PostCeiling {
		t.Errorf("%d joins with the origin down and room for %d: %d placed, %d waited; post counter %d, origin's ceiling %d: want places up to the ceiling, then 60 waits",
			more, room, placed.Load(), waited.Load(), post, row.PostCeiling)
	}
	paused := true
	var down *line.OriginError
	if _, _, err := k.Settings(ctx, "s", line.Change{Paused: &paused}); !errors.As(err, &down) || down.Status != 503 {
		t.Errorf("Settings(paused) with the origin down = %v, want its 503", err)
	}
	if st := waitRead(t, cursor, "s"); st.Paused || st.RatePerSecond != before.RatePerSecond {
		t.Errorf("state after a failed settings change = %+v, want unchanged", st)
	}
	loops.halt()
	if violations.Load() > 0 {
		t.Fatalf("%d readings with Redis above the origin's copy", violations.Load())
	}
}

// switchHook makes every command of a Redis client fail while down is set,
// as a node cut off from Redis would see it.
type switchHook struct{ down atomic.Bool }

var errRedisDown = errors.New("redis unreachable (test)")

func (h *switchHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *switchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.down.Load() {
			cmd.SetErr(errRedisDown)
			return errRedisDown
		}
		return next(ctx, cmd)
	}
}

func (h *switchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.down.Load() {
			for _, c := range cmds {
				c.SetErr(errRedisDown)
			}
			return errRedisDown
		}
		return next(ctx, cmds)
	}
}

// TestRecordedSettingsAreTheSetting: once the origin has recorded a settings
// change it is the setting, whether or not Redis took it at once. A node
// that cannot reach Redis answers "recorded, not in Redis" (no error);
// with Redis back, its next tick puts the change there. A change recorded
// through a node that then went away reaches Redis through every other
// node, which reads the origin's copy every SyncInterval.
func TestRecordedSettingsAreTheSetting(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	origin, store := stubStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ticks := []line.Tick{{Sale: "s", StartsAt: time.Now().Add(-time.Minute), Available: 100}}
	type node struct {
		k    *line.Keeper
		c    *admission.Cursor
		hook *switchHook
	}
	newNode := func(sync time.Duration) node {
		opts, err := redis.ParseURL(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opts)
		t.Cleanup(func() { _ = rdb.Close() })
		n := node{c: admission.NewCursor(rdb, keys, nil), hook: &switchHook{}}
		rdb.AddHook(n.hook)
		n.k = line.New(line.NewLines(rdb, keys, nil), store, n.c,
			line.Options{DefaultRatePerSecond: 5, SyncInterval: sync, Timeout: time.Second},
			slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		t.Cleanup(n.k.Close)
		return n
	}
	// tickUntil ticks n by hand until ok accepts its state with no step in
	// flight.
	tickUntil := func(n node, what string, ok func(line.State) bool) {
		t.Helper()
		ticked := false
		testenv.Eventually(t, 5*time.Second, "state as expected: "+what, func() bool {
			if !n.k.Idle() {
				return false // the step the last tick started is under way
			}
			if st, _ := n.c.State("s"); ticked && ok(st) {
				return true
			}
			_ = n.c.Tick(ctx, ticks)
			n.k.Maintain(ticks)
			ticked = true
			return false
		})
	}
	settled := func(st line.State) bool { return !st.Lost && st.Drawn && st.RatePerSecond == 5 }
	took := newNode(time.Hour) // reads the origin only when it changes something
	other := newNode(50 * time.Millisecond)
	tickUntil(took, "the line created", settled)
	tickUntil(other, "the line read", settled)

	// Redis cut off from the node that takes the change.
	took.hook.down.Store(true)
	paused := true
	st, inRedis, err := took.k.Settings(ctx, "s", line.Change{Paused: &paused})
	if err != nil || inRedis || !st.Paused {
		t.Fatalf("Settings(paused) with Redis unreachable = %+v, in Redis %v, %v; want the paused state, not in Redis, no error", st, inRedis, err)
	}
	if row := rowOf(origin, "s"); !row.Paused || row.SettingsVersion != 1 {
		t.Fatalf("origin's copy after Settings(paused) = %+v, want paused at version 1", row)
	}
	took.hook.down.Store(false)
	tickUntil(took, "the node that took the change, Redis back", func(st line.State) bool { return st.Paused && st.SettingsVersion == 1 })

	// The next change is recorded through a node that then goes away.
	took.hook.down.Store(true)
	rate := 9.0
	if _, inRedis, err := took.k.Settings(ctx, "s", line.Change{RatePerSecond: &rate}); err != nil || inRedis {
		t.Fatalf("Settings(rate 9) with Redis unreachable = in Redis %v, %v; want not in Redis, no error", inRedis, err)
	}
	took.k.Close()
	tickUntil(other, "another node, the first gone", func(st line.State) bool {
		return st.RatePerSecond == 9 && st.Paused && st.SettingsVersion == 2
	})
}

// snapshotKeys is every key of a test's prefix as DUMP gives it, to put
// back later as an older copy of the line.
type snapshotKeys map[string]string

func dumpKeys(t *testing.T, ctx context.Context, r *edgetest.Redis) snapshotKeys {
	t.Helper()
	keys, err := r.Client.Keys(ctx, r.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := snapshotKeys{}
	for _, k := range keys {
		v, err := r.Client.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// rewind replaces every key of the prefix by snap in another Redis
// history (a foreign replication id), as a restart from an older snapshot
// or the promotion of a replica that lagged leaves the line.
func rewind(t *testing.T, ctx context.Context, r *edgetest.Redis, keys line.Keys, sale string, snap snapshotKeys) {
	t.Helper()
	now, err := r.Client.Keys(ctx, r.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// At once, as a restart or a promotion switches copies.
	pipe := r.Client.TxPipeline()
	if len(now) > 0 {
		pipe.Unlink(ctx, now...)
	}
	for k, v := range snap {
		pipe.RestoreReplace(ctx, k, 0, v)
	}
	pipe.HSet(ctx, keys.Line(sale), line.LineReplID, strings.Repeat("0", 40))
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPauseAndRateHoldThroughLosses: two nodes keep a running sale's line
// while Redis loses it again and again — emptied, or rewound to a copy
// from before the last settings change in another Redis history (a
// restart from an older snapshot, a lagging replica promoted). While
// paused, the cursor never moves, through eight losses: nobody is
// admitted. Lowered from 100/s to 1/s, each loss admits at most the 1/s
// serving block (two positions) early. At every instant the origin's
// serving ceiling is at least Redis's, and Redis's at least the cursor.
func TestPauseAndRateHoldThroughLosses(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	origin, store := stubStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	starts := time.Now().Add(-time.Minute)
	ticks := []line.Tick{{Sale: "s", StartsAt: starts, Available: 1_000_000}}
	type node struct {
		k *line.Keeper
		c *admission.Cursor
	}
	var nodes []node
	for range 2 {
		c := admission.NewCursor(r.Client, keys, nil)
		k := line.New(line.NewLines(r.Client, keys, nil), store, c,
			line.Options{DefaultRatePerSecond: 100, MinBlock: 32, SyncInterval: 50 * time.Millisecond},
			slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		t.Cleanup(k.Close)
		nodes = append(nodes, node{k, c})
	}
	loops := newBackground(t)
	for _, n := range nodes {
		loops.every(5*time.Millisecond, func() { // the node's tick
			_ = n.c.Tick(ctx, ticks)
			n.k.Maintain(ticks)
		})
	}
	var violations atomic.Int64
	loops.every(3*time.Millisecond, func() { // the invariant, origin and Redis read at one instant
		origin.Consistent("s", func(row line.Row) {
			pipe := r.Client.TxPipeline()
			ceiling := pipe.HGet(ctx, keys.Line("s"), line.LineServingCeiling)
			serving := pipe.HGet(ctx, keys.Cursor("s"), line.CursorNowServing)
			replid := pipe.HGet(ctx, keys.Line("s"), line.LineReplID)
			_, _ = pipe.Exec(ctx)
			c, cerr := ceiling.Int64()
			n, nerr := serving.Int64()
			if cerr != nil || nerr != nil || replid.Val() == strings.Repeat("0", 40) {
				return // lost, or a rewound copy not yet restored
			}
			if n > c || c > row.ServingCeiling {
				violations.Add(1)
				t.Errorf("now_serving %d, Redis serving ceiling %d, origin's %d: want now_serving <= Redis's <= origin's", n, c, row.ServingCeiling)
			}
		})
	})
	state := func() line.State {
		st, _ := nodes[0].c.State("s")
		return st
	}
	waitState := func(what string, ok func(line.State) bool) line.State {
		t.Helper()
		var st line.State
		testenv.Eventually(t, 10*time.Second, "state as expected: "+what, func() bool {
			st = state()
			return !st.Lost && ok(st)
		})
		return st
	}
	waitState("the line created", func(st line.State) bool { return st.Drawn && st.RatePerSecond == 100 })

	for i := range 400 {
		for {
			_, err := nodes[0].k.Join(ctx, "s", starts, fmt.Sprintf("a-%03d", i))
			if errors.Is(err, line.ErrWait) && ctx.Err() == nil {
				continue // at the durable ceiling until the keeper raises it: ask again, as a shopper would
			}
			if err != nil {
				t.Fatalf("Join(a-%03d) = %v", i, err)
			}
			break
		}
	}
	waitState("some admitted", func(st line.State) bool { return st.NowServing >= 20 })
	old := dumpKeys(t, ctx, r) // running at 100/s, its serving ceiling a block ahead

	paused := true
	st, inRedis, err := nodes[1].k.Settings(ctx, "s", line.Change{Paused: &paused})
	if err != nil || !inRedis || st.ServingCeiling != st.NowServing {
		t.Fatalf("Settings(paused) = %+v, in Redis %v, %v; want in Redis, the serving ceiling brought down to now_serving", st, inRedis, err)
	}
	held := waitState("paused", func(st line.State) bool { return st.Paused })
	if row := rowOf(origin, "s"); row.ServingCeiling != held.NowServing {
		t.Fatalf("origin's serving ceiling after the pause = %d, now_serving %d: want lowered to it", row.ServingCeiling, held.NowServing)
	}
	// lose makes Redis lose the line, the i-th time: emptied, or rewound
	// to old in another history, in turn.
	lose := func(i int, old snapshotKeys) string {
		t.Helper()
		if i%2 == 0 {
			rewind(t, ctx, r, keys, "s", old)
			return "rewound"
		}
		if _, err := testenv.LoseKeys(ctx, r.Client, r.Prefix); err != nil {
			t.Fatal(err)
		}
		return "emptied"
	}
	// restored waits for a reading of the line a restore put back after
	// the loss: a new epoch, read after it (a reading from just before the
	// loss would vouch for nothing).
	restored := func(what string, lost line.State, at time.Time) line.State {
		t.Helper()
		return waitState(what, func(st line.State) bool {
			return st.Epoch != lost.Epoch && st.ReadAt.After(at) && st.QueueLength >= 400
		})
	}
	for i := range 8 {
		prev, at := state(), time.Now()
		what := lose(i, old)
		got := restored(fmt.Sprintf("loss %d (%s) restored", i+1, what), prev, at)
		if !got.Paused {
			t.Fatalf("loss %d (%s): the restored line is not paused: %+v", i+1, what, got)
		}
		if got.NowServing != held.NowServing {
			t.Fatalf("loss %d (%s): now_serving %d after the restore, %d at the pause: want nobody admitted while paused", i+1, what, got.NowServing, held.NowServing)
		}
	}

	// Ops resume at 1/s: the ceiling follows the rate down from 100/s.
	rate, resume := 1.0, false
	if _, inRedis, err := nodes[0].k.Settings(ctx, "s", line.Change{RatePerSecond: &rate, Paused: &resume}); err != nil || !inRedis {
		t.Fatalf("Settings(1/s, resumed) = in Redis %v, %v", inRedis, err)
	}
	old = dumpKeys(t, ctx, r)
	for i := range 4 {
		before := waitState("running at 1/s", func(st line.State) bool { return !st.Paused && st.RatePerSecond == 1 })
		since := time.Now()
		what := lose(i, old)
		got := restored(fmt.Sprintf("1/s, loss %d (%s) restored", i+1, what), before, since)
		// The serving block at 1/s is two positions; the restore and the
		// reading took a moment at 1/s too.
		bound := before.NowServing + 2 + int64(math.Ceil(time.Since(since).Seconds()))
		if got.NowServing > bound {
			t.Errorf("1/s, loss %d (%s): now_serving %d -> %d after the restore, want at most %d", i+1, what, before.NowServing, got.NowServing, bound)
		}
	}
	loops.halt()
	if violations.Load() > 0 {
		t.Fatalf("%d readings with the serving ceilings out of order", violations.Load())
	}
}
