package line

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/clock"
)

// Lines is the Redis side of each sale's durable line: it restores a line
// from the origin's copy, raises ceilings and seals the draw once the origin
// has them, and applies ops settings the origin recorded. The origin side
// and the decisions of when to do what are package line's.
type Lines struct {
	rdb   redis.UniversalClient
	keys  Keys
	clock clock.Clock // nil: the scripts run on Redis's clock
}

// NewLines returns Lines over rdb. With c nil the scripts run on Redis's
// clock, one for every node; a test's c sets their time.
func NewLines(rdb redis.UniversalClient, keys Keys, c clock.Clock) *Lines {
	return &Lines{rdb: rdb, keys: keys, clock: c}
}

// now is a script's "now" argument: the set clock's unix ms, or empty for
// Redis TIME.
func (l *Lines) now() string {
	if l.clock == nil {
		return ""
	}
	return strconv.FormatInt(l.clock.Now().UnixMilli(), 10)
}

// Durable is the origin's copy of a line, as Restore puts it back.
type Durable struct {
	Seed            []byte
	RatePerSecond   float64
	Paused          bool
	ChallengeBits   int
	SettingsVersion int64
	// Where the counters and the cursor resume: at least what they were
	// (the ceilings before this restore raised them).
	Pre, Post, NowServing int64
	// The ceilings from here on, in the origin's copy already. The join
	// ceilings only ever rise; the serving ceiling is set to this, sized
	// for the settings restored.
	PreCeiling, PostCeiling, ServingCeiling int64
	DrawSize                                int64 // valid when Drawn
	Drawn                                   bool
	// Seen is what the restoring node has read of the line: a line in
	// Redis below it lost writes and is restored although whole.
	Seen Seen
}

// Restored says what Restore found.
type Restored int

const (
	// Whole: the line was whole, in this Redis history and at the floors
	// (another node restored first, or nothing was lost); nothing changed.
	Whole Restored = iota
	// Missing: keys of the line were gone; it was put back.
	Missing
	// Behind: the line was there but had lost writes (a lagging replica
	// promoted, a restart from an old file, values below the floors); it
	// was raised to the durable copy.
	Behind
	// Newer: the line was not whole but Redis holds settings newer than
	// the copy restored (a node applied a change after the copy was read);
	// nothing changed, and a restore from a fresh copy is needed.
	Newer
)

// Restore puts a sale's line back into Redis under a fresh epoch unless it
// is whole already, and says which it found (restore.lua).
func (l *Lines) Restore(ctx context.Context, sale, epoch string, d Durable) (Restored, error) {
	draw := ""
	if d.Drawn {
		draw = strconv.FormatInt(d.DrawSize, 10)
	}
	paused := "0"
	if d.Paused {
		paused = "1"
	}
	n, err := restoreScript.Run(ctx, l.rdb,
		[]string{l.keys.Line(sale), l.keys.Cursor(sale), l.keys.Pre(sale), l.keys.Post(sale), l.keys.Seed(sale)},
		epoch, hex.EncodeToString(d.Seed), formatRate(d.RatePerSecond), paused, d.SettingsVersion,
		d.Pre, d.Post, d.NowServing, d.PreCeiling, d.PostCeiling, d.ServingCeiling, draw,
		d.Seen.Pre, d.Seen.Post, d.Seen.NowServing, d.ChallengeBits).Int()
	if err != nil {
		return Whole, fmt.Errorf("restore line of sale %s: %w", sale, err)
	}
	switch n {
	case restoreWhole:
		return Whole, nil
	case restoreMissing:
		return Missing, nil
	case restoreBehind:
		return Behind, nil
	case restoreNewer:
		return Newer, nil
	}
	return Whole, fmt.Errorf("restore line of sale %s: script answered %d", sale, n)
}

// Ceilings are values to raise a line's ceilings to; 0 leaves one as it is.
type Ceilings struct {
	Pre, Post, Serving int64
	// SettingsVersion is the version of the settings the serving ceiling
	// was sized for: it is raised only while that version is in force.
	SettingsVersion int64
}

// Raise raises a sale's ceilings in Redis (never lowers one) and reports
// whether the serving ceiling was raised too (false: the settings it was
// sized for are no longer Redis's); ErrLost when Redis does not hold the
// line.
func (l *Lines) Raise(ctx context.Context, sale string, c Ceilings) (bool, error) {
	arg := func(v int64) string {
		if v <= 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	version := ""
	if c.Serving > 0 {
		version = strconv.FormatInt(c.SettingsVersion, 10)
	}
	n, err := raiseScript.Run(ctx, l.rdb, []string{l.keys.Line(sale), l.keys.Cursor(sale)},
		arg(c.Pre), arg(c.Post), arg(c.Serving), version).Int()
	if err = lineErr(err); err != nil {
		return false, fmt.Errorf("raise line of sale %s: %w", sale, err)
	}
	switch n {
	case raiseRaised:
		return true, nil
	case raiseServingLeft:
		return false, nil
	}
	return false, fmt.Errorf("raise line of sale %s: script answered %d", sale, n)
}

// Seal records the draw size the origin holds and returns the one Redis
// holds afterwards; ErrLost when Redis does not hold the line.
func (l *Lines) Seal(ctx context.Context, sale string, size int64) (int64, error) {
	n, err := sealScript.Run(ctx, l.rdb, []string{l.keys.Line(sale), l.keys.Pre(sale)}, size).Int64()
	if err = lineErr(err); err != nil {
		return 0, fmt.Errorf("seal draw of sale %s: %w", sale, err)
	}
	return n, nil
}

// Settings are a sale's admission settings as the origin's copy holds
// them, at their version.
type Settings struct {
	RatePerSecond float64
	Paused        bool
	ChallengeBits int // the proof of work a join needs; 0: none
	Version       int64
}

// Applied is what Redis holds of a line's settings after Lines.Settings.
type Applied struct {
	Settings
	NowServing     int64
	ServingCeiling int64
}

// Settings puts a change of the origin's copy, at its settings version,
// into Redis, bringing the serving ceiling down to the cursor plus block
// (settings.lua), and returns what Redis holds afterwards (a newer version
// that raced ahead stays). seen is what the calling node has read of the
// line. ErrLost when Redis does not hold the line, or lost writes to it.
func (l *Lines) Settings(ctx context.Context, sale string, s Settings, block int64, seen Seen) (Applied, error) {
	p := "0"
	if s.Paused {
		p = "1"
	}
	v, err := settingsScript.Run(ctx, l.rdb,
		[]string{l.keys.Cursor(sale), l.keys.Line(sale), l.keys.Pre(sale), l.keys.Post(sale)},
		formatRate(s.RatePerSecond), p, s.Version, block, seen.Pre, seen.Post, seen.NowServing, s.ChallengeBits, l.now()).Slice()
	if err = lineErr(err); err != nil {
		return Applied{}, fmt.Errorf("admission settings of sale %s: %w", sale, err)
	}
	if len(v) != settingsValues {
		return Applied{}, fmt.Errorf("admission settings of sale %s: script answered %d values", sale, len(v))
	}
	var a Applied
	rs, _ := v[0].(string)
	a.RatePerSecond, _ = strconv.ParseFloat(rs, 64)
	ps, _ := v[1].(int64)
	a.Paused = ps == replyTrue
	a.NowServing, _ = v[2].(int64)
	a.ServingCeiling, _ = v[3].(int64)
	a.Version, _ = v[4].(int64)
	bits, _ := v[5].(int64)
	a.ChallengeBits = int(bits)
	return a, nil
}

// Current is what Redis holds of a line right now, whole or not: what a
// restore proposes to the origin when the origin has no copy yet (a line
// that predates it), and the floor of what it restores.
type Current struct {
	Pre, Post, NowServing int64
	Seed                  []byte // nil when missing
	RatePerSecond         float64
	HasRate               bool
	Paused                bool
}

// Current reads a sale's line as Redis holds it.
func (l *Lines) Current(ctx context.Context, sale string) (Current, error) {
	pipe := l.rdb.Pipeline()
	pre := pipe.Get(ctx, l.keys.Pre(sale))
	post := pipe.Get(ctx, l.keys.Post(sale))
	seed := pipe.Get(ctx, l.keys.Seed(sale))
	cur := pipe.HMGet(ctx, l.keys.Cursor(sale), CursorNowServing, CursorRate, CursorPaused)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Current{}, fmt.Errorf("read line of sale %s: %w", sale, err)
	}
	var c Current
	c.Pre, _ = pre.Int64()
	c.Post, _ = post.Int64()
	if s, err := seed.Result(); err == nil {
		if b, err := hex.DecodeString(s); err == nil && len(b) > 0 {
			c.Seed = b
		}
	}
	h := cur.Val()
	if s, ok := h[0].(string); ok {
		c.NowServing, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := h[1].(string); ok {
		if r, err := strconv.ParseFloat(s, 64); err == nil {
			c.RatePerSecond, c.HasRate = r, true
		}
	}
	c.Paused = h[2] == "1"
	return c, nil
}

// Seed reads a sale's shuffle seed; ErrLost when Redis does not hold it.
func (l *Lines) Seed(ctx context.Context, sale string) ([]byte, error) {
	s, err := l.rdb.Get(ctx, l.keys.Seed(sale)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seed of sale %s: %w", sale, ErrLost)
	}
	if err != nil {
		return nil, fmt.Errorf("seed of sale %s: %w", sale, err)
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("seed of sale %s: not hex: %w", sale, ErrLost)
	}
	return b, nil
}
