package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// State is a sale's admission state as this node last read it.
type State struct {
	NowServing    int64   // positions up to this one are admitted
	QueueLength   int64   // places handed out so far
	PreQueue      int64   // joins before the start; they hold positions 1..PreQueue
	RatePerSecond float64 // the configured admission rate
	Paused        bool
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
	rdb         redis.UniversalClient
	keys        Keys
	defaultRate float64
	now         func() time.Time

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

// NewCursor returns a Cursor; defaultRate is the admission rate of a sale
// until ops set one. now is the clock (nil means time.Now).
func NewCursor(rdb redis.UniversalClient, keys Keys, defaultRate float64, now func() time.Time) *Cursor {
	if now == nil {
		now = time.Now
	}
	return &Cursor{rdb: rdb, keys: keys, defaultRate: defaultRate, now: now, states: map[string]*saleState{}}
}

// Tick advances the cursors of the given sales and refreshes the cache.
func (c *Cursor) Tick(ctx context.Context, ticks []Tick) error {
	if len(ticks) == 0 {
		return nil
	}
	run := func(eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) []*redis.Cmd {
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(ticks))
		for i, t := range ticks {
			cmds[i] = eval(ctx, pipe, []string{c.keys.Cursor(t.Sale), c.keys.Pre(t.Sale), c.keys.Post(t.Sale)},
				t.StartsAt.UnixMilli(), max(t.Available, 0), formatRate(c.defaultRate))
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
		if err == nil && len(v) != 6 {
			err = fmt.Errorf("advance script returned %d values", len(v))
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("advance sale %s: %w", ticks[i].Sale, err)
			}
			continue
		}
		serving, _ := v[0].(int64)
		length, _ := v[1].(int64)
		rateStr, _ := v[2].(string)
		paused, _ := v[3].(int64)
		pre, _ := v[5].(int64)
		redisNow, _ := v[4].(int64)
		rate, _ := strconv.ParseFloat(rateStr, 64)
		c.store(ticks[i].Sale, State{NowServing: serving, QueueLength: length, PreQueue: pre, RatePerSecond: rate, Paused: paused == 1, ReadAt: read,
			RedisNow: time.UnixMilli(redisNow)})
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

// Settings changes a sale's rate (when rate is not nil) and pause switch
// (when paused is not nil) in Redis; every node's next tick obeys them.
func (c *Cursor) Settings(ctx context.Context, sale string, rate *float64, paused *bool) (State, error) {
	rateArg, pausedArg := "", ""
	if rate != nil {
		rateArg = formatRate(*rate)
	}
	if paused != nil {
		pausedArg = "0"
		if *paused {
			pausedArg = "1"
		}
	}
	v, err := settingsScript.Run(ctx, c.rdb, []string{c.keys.Cursor(sale)}, rateArg, pausedArg, formatRate(c.defaultRate)).Slice()
	if err != nil {
		return State{}, fmt.Errorf("admission settings of sale %s: %w", sale, err)
	}
	st, _ := c.State(sale)
	rs, _ := v[0].(string)
	st.RatePerSecond, _ = strconv.ParseFloat(rs, 64)
	p, _ := v[1].(int64)
	st.Paused = p == 1
	st.NowServing, _ = v[2].(int64)
	return st, nil
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }
