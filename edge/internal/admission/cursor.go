package admission

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/redisscript"
)

var (
	//go:embed advance.lua
	advanceSource string
	advanceScript = redis.NewScript(advanceSource)
)

var _ line.StateReader = (*Cursor)(nil)

// Cursor advances and caches every sale's admission cursor (advance.lua,
// on the line's keys in line.Keys). Tick runs the advance script for all
// sales in one round trip; State serves the cached result without touching
// Redis, which is what keeps a status poll free.
type Cursor struct {
	rdb      redis.UniversalClient
	keys     line.Keys
	clock    clock.Clock
	setTime  bool  // the script runs on clock's time, not Redis's
	maxSteps int64 // the cursor's moves recorded per sale: MaxSteps (tests set fewer)

	mu     sync.RWMutex // guards states
	states map[string]*saleState
}

type saleState struct {
	line.State
	samples []sample // recent (time, now_serving) for MeasuredRate
}

type sample struct {
	at      time.Time
	serving int64
}

// rateWindow is how far back MeasuredRate looks.
const rateWindow = 5 * time.Second

// NewCursor returns a Cursor. With c nil the script runs on Redis's clock,
// one for every node, and this node reads its own; a test's c is both.
func NewCursor(rdb redis.UniversalClient, keys line.Keys, c clock.Clock) *Cursor {
	return &Cursor{rdb: rdb, keys: keys, clock: clock.Or(c), setTime: c != nil, maxSteps: MaxSteps, states: map[string]*saleState{}}
}

// advance.lua's reply (its header documents it): advanceValues values, a
// flag and a sentinel among them. Its "lost" failure is the one every line
// script gives, named in package line's codes.go and read by
// line.ScriptError.
const (
	advanceValues    = 18
	advancePaused    = 1  // the paused flag set (0: running)
	advanceNotSealed = -1 // the draw size until the draw is sealed
)

// Tick advances the cursors of the given sales and refreshes the cache. A
// sale whose line Redis does not hold, or holds with writes lost (less
// than this node read before, or from another Redis history), is cached
// as Lost, not as an error.
func (c *Cursor) Tick(ctx context.Context, ticks []line.Tick) error {
	if len(ticks) == 0 {
		return nil
	}
	floors := make([]line.Seen, len(ticks))
	paces := make([][2]string, len(ticks))
	for i, t := range ticks {
		floors[i] = c.Seen(t.Sale)
		paces[i] = c.pace(t)
	}
	now := ""
	if c.setTime {
		now = strconv.FormatInt(c.clock.Now().UnixMilli(), 10)
	}
	cmds := redisscript.Each(ctx, c.rdb, advanceScript, len(ticks), func(i int) ([]string, []any) {
		t, f := ticks[i], floors[i]
		return []string{c.keys.Cursor(t.Sale), c.keys.Pre(t.Sale), c.keys.Post(t.Sale), c.keys.Line(t.Sale), c.keys.Steps(t.Sale)},
			[]any{t.StartsAt.UnixMilli(), max(t.Available, 0), f.Pre, f.Post, f.NowServing, flag(t.Hold), now, max(t.Answered, 0),
				c.maxSteps, paces[i][0], paces[i][1]}
	})
	read := c.clock.Now()
	var firstErr error
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if errors.Is(line.ScriptError(err), line.ErrLost) {
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
		rate, answerRate := floatReply(v[2]), floatReply(v[12])
		epoch, _ := v[13].(string)
		c.store(ticks[i].Sale, line.State{NowServing: n[0], QueueLength: n[1], RatePerSecond: rate, Paused: n[3] == advancePaused,
			RedisNow: time.UnixMilli(n[4]), PreQueue: n[5], Post: n[6], DrawSize: max(n[7], 0), Drawn: n[7] != advanceNotSealed,
			PreCeiling: n[8], PostCeiling: n[9], ServingCeiling: n[10], SettingsVersion: n[11], AnswerRate: answerRate,
			Epoch: epoch, RestoredAt: unixMilli(n[14]), ChallengeBits: int(n[15]), RampAt: unixMilli(n[16]), RampFrom: floatReply(v[17]),
			ReadAt: read})
	}
	return firstErr
}

// unixMilli is a script's unix-ms reply as a time, 0 as the zero time.
func unixMilli(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// floatReply reads a number the script answers as a string (Lua numbers
// come back from Redis truncated to integers).
func floatReply(v any) float64 {
	s, _ := v.(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// flag is a script's boolean argument.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pace is the pace for a sale's next advance and the settings version it
// is for, from this node's last reading of the sale; none before the first
// (that advance then admits nothing, and reads one).
func (c *Cursor) pace(t line.Tick) [2]string {
	st, ok := c.State(t.Sale)
	if !ok || st.Lost {
		return [2]string{"", ""}
	}
	now := c.clock.Now()
	scriptNow := st.RedisNow.Add(now.Sub(st.ReadAt)) // the script's clock, from the last reading
	p := Pacing{Rate: st.RatePerSecond, StartsAt: t.StartsAt, RampAt: st.RampAt, RampFrom: st.RampFrom,
		AnswerRate: st.AnswerRate, Available: t.Available}
	if !t.HeldAt.IsZero() {
		p.HeldAt = scriptNow.Add(-now.Sub(t.HeldAt))
	}
	return [2]string{strconv.FormatFloat(p.Pace(scriptNow), 'g', -1, 64), strconv.FormatInt(st.SettingsVersion, 10)}
}

// entry is a sale's cached state, made on first use; c.mu must be held.
func (c *Cursor) entry(sale string) *saleState {
	s := c.states[sale]
	if s == nil {
		s = &saleState{}
		c.states[sale] = s
	}
	return s
}

// store caches a reading, with the rate measured over the recent ones.
func (c *Cursor) store(sale string, st line.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.entry(sale)
	s.samples = append(s.samples, sample{at: st.ReadAt, serving: st.NowServing})
	cut := 0
	for cut < len(s.samples)-1 && st.ReadAt.Sub(s.samples[cut].at) > rateWindow {
		cut++
	}
	s.samples = s.samples[cut:]
	first := s.samples[0]
	if dt := st.ReadAt.Sub(first.at).Seconds(); dt > 0 {
		st.MeasuredRate = float64(st.NowServing-first.serving) / dt
		st.Measured = dt >= 1
	}
	s.State = st
}

// lost marks a sale's cached state Lost, keeping the reading before.
func (c *Cursor) lost(sale string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.entry(sale)
	s.Lost, s.ReadAt = true, at
	s.samples = nil // the measured rate starts over with the restored line
}

// Seen returns the highest values this node has read of a sale's line
// (zeros before the first reading). The values only ever grow: a restore
// puts back at least the durable ceilings, which are above any reading.
func (c *Cursor) Seen(sale string) line.Seen {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[sale]
	if !ok {
		return line.Seen{}
	}
	return line.Seen{Pre: s.PreQueue, Post: s.Post, NowServing: s.NowServing}
}

// State returns a sale's cached state; false when no tick has read it yet.
func (c *Cursor) State(sale string) (line.State, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.states[sale]
	if !ok {
		return line.State{}, false
	}
	return s.State, true
}

// Ping asks Redis whether it answers: what a tick with no sale to advance
// still learns, so readiness says whether Redis is reachable.
func (c *Cursor) Ping(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}
