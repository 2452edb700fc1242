package line_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/queue"
)

// memStore is the origin's durable copy in memory, with a switch that makes
// it unreachable.
type memStore struct {
	down atomic.Bool

	mu    sync.Mutex // guards lines
	lines map[string]*line.Row
}

var _ line.Store = (*memStore)(nil)

var errDown = errors.New("origin unreachable")

func newMemStore() *memStore { return &memStore{lines: map[string]*line.Row{}} }

func (m *memStore) do(sale string, f func(r *line.Row)) (line.Row, error) {
	if m.down.Load() {
		return line.Row{}, errDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lines[sale]
	if !ok {
		return line.Row{}, &line.OriginError{Status: 404, Code: "unknown_sale"}
	}
	f(r)
	return *r, nil
}

func (m *memStore) Ensure(_ context.Context, sale string, p line.Proposal) (line.Row, error) {
	if m.down.Load() {
		return line.Row{}, errDown
	}
	m.mu.Lock()
	if _, ok := m.lines[sale]; !ok {
		m.lines[sale] = &line.Row{SaleID: sale, Seed: p.Seed, RatePerSecond: p.RatePerSecond, Paused: p.Paused}
	}
	m.mu.Unlock()
	return m.do(sale, func(*line.Row) {})
}

func (m *memStore) Line(_ context.Context, sale string) (line.Row, error) {
	return m.do(sale, func(*line.Row) {})
}

func (m *memStore) Settings(_ context.Context, sale string, rate *float64, paused *bool) (line.Row, error) {
	return m.do(sale, func(r *line.Row) {
		if rate != nil {
			r.RatePerSecond = *rate
		}
		if paused != nil {
			r.Paused = *paused
		}
		r.SettingsVersion++
	})
}

func (m *memStore) Raise(_ context.Context, sale string, c queue.Ceilings) (line.Row, error) {
	return m.do(sale, func(r *line.Row) {
		r.PreCeiling, r.PostCeiling, r.ServingCeiling = max(r.PreCeiling, c.Pre), max(r.PostCeiling, c.Post), max(r.ServingCeiling, c.Serving)
	})
}

func (m *memStore) SealDraw(_ context.Context, sale string, size int64) (line.Row, error) {
	return m.do(sale, func(r *line.Row) {
		if r.DrawSize == nil {
			r.DrawSize = &size
		}
	})
}

func (m *memStore) row(sale string) line.Row {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.lines[sale]; ok {
		return *r
	}
	return line.Row{}
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
	keys := queue.NewKeys(r.Prefix)
	store := newMemStore()
	cursor := admission.NewCursor(r.Client, keys, nil)
	k := line.New(queue.NewLines(r.Client, keys), store, cursor,
		line.Options{DefaultRatePerSecond: 50, MinBlock: 32, JoinWait: 200 * time.Millisecond},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	t.Cleanup(k.Close)
	joiner := queue.NewJoiner(r.Client, keys, queue.JoinerOptions{Observe: k.Observe})
	t.Cleanup(joiner.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	starts := time.Now().Add(-time.Minute)
	ticks := []queue.Tick{{Sale: "s", StartsAt: starts, Available: 1_000_000}}
	stop := make(chan struct{})
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { // the node's tick
		defer loops.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_ = cursor.Tick(ctx, ticks)
			k.Maintain(ticks)
		}
	}()
	var violations atomic.Int64
	go func() { // the invariant, read Redis first: the origin's copy only grows
		defer loops.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			post, _ := r.Client.Get(ctx, keys.Post("s")).Int64()
			h, _ := r.Client.HMGet(ctx, keys.Line("s"), "post_ceiling", "serving_ceiling").Result()
			serving, _ := r.Client.HGet(ctx, keys.Cursor("s"), "now_serving").Int64()
			num := func(v any) int64 {
				s, _ := v.(string)
				n, _ := strconv.ParseInt(s, 10, 64)
				return n
			}
			row := store.row("s")
			if post > num(h[0]) || num(h[0]) > row.PostCeiling || serving > num(h[1]) || num(h[1]) > row.ServingCeiling {
				violations.Add(1)
				t.Errorf("Redis post %d / ceiling %v, now_serving %d / ceiling %v; origin ceilings post %d serving %d: want Redis never above",
					post, h[0], serving, h[1], row.PostCeiling, row.ServingCeiling)
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		loops.Wait()
	})

	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := cursor.State("s"); ok && !st.Lost && st.Drawn {
			if _, seeded := k.Seed("s"); seeded {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line was never created and sealed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if row := store.row("s"); len(row.Seed) != 64 || row.RatePerSecond != 50 {
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
					p, err := k.Join(ctx, joiner, "s", starts, fmt.Sprintf("a-%04d", i))
					if errors.Is(err, queue.ErrWait) && ctx.Err() == nil {
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
	store.down.Store(true)
	for !k.Idle() { // a raise that reached the origin before it went lands
		time.Sleep(time.Millisecond)
	}
	before, _ := cursor.State("s")
	room := store.row("s").PostCeiling - shoppers // what the ceiling still allows
	more := int(room) + 60
	var placed, waited atomic.Int64
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < more; i += 20 {
				_, err := k.Join(ctx, joiner, "s", starts, fmt.Sprintf("b-%03d", i))
				switch {
				case errors.Is(err, queue.ErrWait):
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
	if row := store.row("s"); waited.Load() != 60 || placed.Load() != room || post != row.PostCeiling {
		t.Errorf("%d joins with the origin down and room for %d: %d placed, %d waited; post counter %d, origin's ceiling %d: want places up to the ceiling, then 60 waits",
			more, room, placed.Load(), waited.Load(), post, row.PostCeiling)
	}
	paused := true
	if _, _, err := k.Settings(ctx, "s", nil, &paused); !errors.Is(err, errDown) {
		t.Errorf("Settings(paused) with the origin down = %v, want its error", err)
	}
	time.Sleep(50 * time.Millisecond)
	if st, _ := cursor.State("s"); st.Paused || st.RatePerSecond != before.RatePerSecond {
		t.Errorf("state after a failed settings change = %+v, want unchanged", st)
	}
	close(stop)
	loops.Wait()
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
	keys := queue.NewKeys(r.Prefix)
	store := newMemStore()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ticks := []queue.Tick{{Sale: "s", StartsAt: time.Now().Add(-time.Minute), Available: 100}}
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
		n.k = line.New(queue.NewLines(rdb, keys), store, n.c,
			line.Options{DefaultRatePerSecond: 5, SyncInterval: sync, Timeout: time.Second},
			slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		t.Cleanup(n.k.Close)
		return n
	}
	// tickUntil ticks n by hand until ok accepts its state with no step in
	// flight.
	tickUntil := func(n node, what string, ok func(queue.State) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_ = n.c.Tick(ctx, ticks)
			n.k.Maintain(ticks)
			for !n.k.Idle() {
				time.Sleep(time.Millisecond)
			}
			if st, _ := n.c.State("s"); ok(st) {
				return
			}
			if time.Now().After(deadline) {
				st, _ := n.c.State("s")
				t.Fatalf("%s: state after 5 s = %+v", what, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	settled := func(st queue.State) bool { return !st.Lost && st.Drawn && st.RatePerSecond == 5 }
	took := newNode(time.Hour) // reads the origin only when it changes something
	other := newNode(50 * time.Millisecond)
	tickUntil(took, "the line created", settled)
	tickUntil(other, "the line read", settled)

	// Redis cut off from the node that takes the change.
	took.hook.down.Store(true)
	paused := true
	st, inRedis, err := took.k.Settings(ctx, "s", nil, &paused)
	if err != nil || inRedis || !st.Paused {
		t.Fatalf("Settings(paused) with Redis unreachable = %+v, in Redis %v, %v; want the paused state, not in Redis, no error", st, inRedis, err)
	}
	if row := store.row("s"); !row.Paused || row.SettingsVersion != 1 {
		t.Fatalf("origin's copy after Settings(paused) = %+v, want paused at version 1", row)
	}
	took.hook.down.Store(false)
	tickUntil(took, "the node that took the change, Redis back", func(st queue.State) bool { return st.Paused && st.SettingsVersion == 1 })

	// The next change is recorded through a node that then goes away.
	took.hook.down.Store(true)
	rate := 9.0
	if _, inRedis, err := took.k.Settings(ctx, "s", &rate, nil); err != nil || inRedis {
		t.Fatalf("Settings(rate 9) with Redis unreachable = in Redis %v, %v; want not in Redis, no error", inRedis, err)
	}
	took.k.Close()
	tickUntil(other, "another node, the first gone", func(st queue.State) bool {
		return st.RatePerSecond == 9 && st.Paused && st.SettingsVersion == 2
	})
}
