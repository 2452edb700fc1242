package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// State is a sale's admission state as this node last read it.
type State struct {
	// Lost: the last tick found that Redis does not hold the sale's line
	// (it lost its data); the other fields are from the reading before, and
	// nothing is answered from them until the line is restored.
	Lost          bool
	NowServing    int64   // positions up to this one are admitted
	QueueLength   int64   // places handed out so far: PreQueue + Post
	PreQueue      int64   // the pre counter: later joins are numbered after it
	Post          int64   // joins after the start
	RatePerSecond float64 // the configured admission rate
	Paused        bool
	// DrawSize is the pre-queue the draw permutes (positions 1..DrawSize),
	// sealed after the start; valid when Drawn.
	DrawSize int64
	Drawn    bool
	// The line's durable ceilings as Redis holds them: the counters and
	// the cursor never pass them.
	PreCeiling, PostCeiling, ServingCeiling int64
	// SettingsVersion is the version of the origin's settings that Redis
	// holds (0 before any change).
	SettingsVersion int64
	// MeasuredRate is admissions per second over the last few seconds; the
	// honest basis of a wait estimate.
	MeasuredRate float64
	ReadAt       time.Time // this node's clock when it read the state
	// RedisNow is Redis's clock at the read: the one clock that decides
	// when a sale has started (the join script uses it too).
	RedisNow time.Time
}

// Tick is what the cursor needs to know about a sale each tick.
type Tick struct {
	Sale     string
	StartsAt time.Time
	// Available is the units the latest snapshot shows available: none
	// stops admission, and few slow it to twice that many a second, so a
	// handful of units coming back does not admit a second's worth of
	// shoppers to find them gone.
	Available int64
}

// Cursor advances and caches every sale's admission cursor. Tick runs the
// advance script for all sales in one round trip; State serves the cached
// result without touching Redis, which is what keeps a status poll free.
type Cursor struct {
	rdb  redis.UniversalClient
	keys Keys
	now  func() time.Time

	mu     sync.RWMutex // guards states
	states map[string]*saleState
}

type saleState struct {
	State
	samples []sample // recent (time, now_serving) for MeasuredRate
}

type sample struct {
	at      time.Time
	serving int64
}

// rateWindow is how far back MeasuredRate looks.
const rateWindow = 5 * time.Second

// NewCursor returns a Cursor; now is the clock (nil means time.Now).
func NewCursor(rdb redis.UniversalClient, keys Keys, now func() time.Time) *Cursor {
	if now == nil {
		now = time.Now
	}
	return &Cursor{rdb: rdb, keys: keys, now: now, states: map[string]*saleState{}}
}

// advanceValues is how many values advance.lua returns.
const advanceValues = 12

// Tick advances the cursors of the given sales and refreshes the cache. A
// sale whose line Redis does not hold, or holds with writes lost (less
// than this node read before, or from another Redis history), is cached
// as Lost, not as an error.
func (c *Cursor) Tick(ctx context.Context, ticks []Tick) error {
	if len(ticks) == 0 {
		return nil
	}
	floors := make([]Seen, len(ticks))
	for i, t := range ticks {
		floors[i] = c.Seen(t.Sale)
	}
	run := func(eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) []*redis.Cmd {
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(ticks))
		for i, t := range ticks {
			f := floors[i]
			cmds[i] = eval(ctx, pipe, []string{c.keys.Cursor(t.Sale), c.keys.Pre(t.Sale), c.keys.Post(t.Sale), c.keys.Line(t.Sale)},
				t.StartsAt.UnixMilli(), max(t.Available, 0), f.Pre, f.Post, f.NowServing)
		}
		_, _ = pipe.Exec(ctx)
		return cmds
	}
	cmds := run(advanceScript.EvalSha)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmds = run(advanceScript.Eval) // advancing twice in a row is harmless
			break
		}
	}
	read := c.now()
	var firstErr error
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if errors.Is(lineErr(err), ErrLost) {
			c.lost(ticks[i].Sale, read)
			continue
		}
		if err == nil && len(v) != advanceValues {
			err = fmt.Errorf("advance script returned %d values", len(v))
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("advance sale %s: %w", ticks[i].Sale, err)
			}
			continue
		}
		var n [advanceValues]int64
		for k := range v {
			n[k], _ = v[k].(int64)
		}
		rateStr, _ := v[2].(string)
		rate, _ := strconv.ParseFloat(rateStr, 64)
		c.store(ticks[i].Sale, State{NowServing: n[0], QueueLength: n[1], RatePerSecond: rate, Paused: n[3] == 1,
			RedisNow: time.UnixMilli(n[4]), PreQueue: n[5], Post: n[6], DrawSize: max(n[7], 0), Drawn: n[7] >= 0,
			PreCeiling: n[8], PostCeiling: n[9], ServingCeiling: n[10], SettingsVersion: n[11], ReadAt: read})
	}
	return firstErr
}

func (c *Cursor) store(sale string, st State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[sale]
	if s == nil {
		s = &saleState{}
		c.states[sale] = s
	}
	s.samples = append(s.samples, sample{at: st.ReadAt, serving: st.NowServing})
	cut := 0
	for cut < len(s.samples)-1 && st.ReadAt.Sub(s.samples[cut].at) > rateWindow {
		cut++
	}
	s.samples = s.samples[cut:]
	first := s.samples[0]
	if dt := st.ReadAt.Sub(first.at).Seconds(); dt > 0 {
		st.MeasuredRate = float64(st.NowServing-first.serving) / dt
	}
	s.State = st
}

// lost marks a sale's cached state Lost, keeping the reading before.
func (c *Cursor) lost(sale string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[sale]
	if s == nil {
		s = &saleState{}
		c.states[sale] = s
	}
	s.Lost, s.ReadAt = true, at
	s.samples = nil // the measured rate starts over with the restored line
}

// Seen is what a node has read of a line: Redis never holds less of a line
// it kept, so a reading below it means Redis lost writes.
type Seen struct {
	Pre, Post, NowServing int64
}

// Seen returns the highest values this node has read of a sale's line
// (zeros before the first reading). The values only ever grow: a restore
// puts back at least the durable ceilings, which are above any reading.
func (c *Cursor) Seen(sale string) Seen {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[sale]
	if !ok {
		return Seen{}
	}
	return Seen{Pre: s.PreQueue, Post: s.Post, NowServing: s.NowServing}
}

// State returns a sale's cached state; false when no tick has read it yet.
func (c *Cursor) State(sale string) (State, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[sale]
	if !ok {
		return State{}, false
	}
	return s.State, true
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// Ping asks Redis whether it answers: what a tick with no sale to advance
// still learns, so readiness says whether Redis is reachable.
func (c *Cursor) Ping(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}
