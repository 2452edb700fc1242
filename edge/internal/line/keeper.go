// Package line is each sale's waiting line: its shared state in Redis (the
// key schema in keys.go, State, what a read of a line says), places in it
// (joins batched into one script call, joiner.go), the pre-queue shuffle,
// and the Keeper, which owns the joins and keeps the line safe from Redis
// losing it. Package admission advances and reads the cursor.
//
// The origin holds a durable copy of every line (its /v1/lines routes): the
// draw seed, the rate and pause ops set, and high-water ceilings of the
// pre and post counters and of the admission cursor. Keeper writes that copy
// first and Redis second; raises each ceiling a block ahead of need, so
// joins and admission normally never wait for it; seals the pre-queue's
// draw size at the start; and, when a tick or a join finds that Redis lost
// a line — its keys gone, or writes to it lost in a failover to a replica
// that lagged — puts it back from the copy: counters at their ceilings (no
// place handed out twice), the cursor at its ceiling (nobody admitted sent
// back), the same seed, rate and pause. A settings change the origin
// recorded is the setting: every node pushes it into Redis on its next tick
// if Redis does not hold it yet.
//
// The serving ceiling is also what a restore admits up to, so it is kept
// within one serving block of the cursor — about two seconds of admissions
// at the rate in force, none while paused — and follows the settings down:
// applying new settings brings it down in Redis, and the node then reports
// that to the origin, which lowers its copy (Store.LowerServing). The
// origin's copy stays above Redis's throughout: it takes a serving raise
// only at the settings version the raise was sized for and remembers the
// highest it took at that version, and it lowers only to that or to what
// Redis was seen to hold at that version, whichever is more.
package line

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/clock"
)

// StateReader is the admission cursor's cache of each sale's state
// (admission.Cursor).
type StateReader interface {
	State(sale string) (State, bool)
}

// Options tune a Keeper; zero values take the defaults.
type Options struct {
	// DefaultRatePerSecond is the admission rate a line starts with when
	// the origin has no copy of it yet.
	DefaultRatePerSecond float64
	// BlockWindow sizes the join ceilings' blocks: a ceiling is raised to
	// a block beyond its counter once the counter comes within half a block
	// of it, a block being this long of joins at the recent join rate; 0
	// means 1 s; four times the last raise's round trip when that is
	// longer (up to eight BlockWindows); before the start, for the post
	// counter, the pre-queue's size when that is more (openingBlock). After
	// Redis loses a line, up to a block of places goes unused (the cursor
	// passes them at the admission rate), so it is kept short; half a block
	// is the lead a raise has over the joins.
	BlockWindow time.Duration
	// MinBlock is the smallest join block; 0 means 256.
	MinBlock int64
	// MaxBlock is the largest join block; 0 means 1<<20.
	MaxBlock int64
	// ServingWindow sizes the serving ceiling's block: this long of
	// admissions at the set rate (at least one position; none while
	// paused); 0 means 2 s. After a loss the cursor resumes at the
	// ceiling, admitting up to a block early.
	ServingWindow time.Duration
	// Timeout bounds one step (a restore, a raise, a seal, a settings
	// change), origin and Redis together; 0 means 3 s.
	Timeout time.Duration
	// SyncInterval is how long a node goes without hearing the origin's
	// copy of a line before it reads it: a settings change the origin
	// recorded reaches Redis within this even when the node that took it
	// could not put it there. 0 means 5 s.
	SyncInterval time.Duration
	// JoinWait is how long Join holds a join that found the line at its
	// ceiling (or lost) for the raise (or restore) under way, before it
	// gives up with the error; 0 means 1 s. A burst larger than a block
	// then waits a round trip to the origin, not for the shopper's retry.
	JoinWait time.Duration
	// Joiner batches the joins (Pipelines, MaxBatch); its Observe is the
	// Keeper's own.
	Joiner JoinerOptions
	// Clock is the Go side's clock; nil means the machine's.
	Clock clock.Clock
}

// rateWindow is how far back the join rate looks.
const rateWindow = 2 * time.Second

// Keeper keeps every sale's line and its durable copy in step. Maintain (each
// tick) and Observe (each join round trip) decide what a sale needs and run
// it in the background, one step per sale at a time, so neither a tick nor
// a join ever waits for the origin.
type Keeper struct {
	lines  *Lines
	joiner *Joiner
	store  Store
	states StateReader
	opts   Options
	log    *slog.Logger

	ctx    context.Context // the steps' parent; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // steps in flight

	mu     sync.Mutex // guards sales and closed
	sales  map[string]*saleLine
	closed bool

	restores prometheus.Counter
	raises   prometheus.Counter
	waits    prometheus.Counter
	failures *prometheus.CounterVec
}

// saleLine is what the Keeper knows of one sale.
type saleLine struct {
	startsAt time.Time     // as the last tick knew it; zero until then
	changed  chan struct{} // closed (and replaced) when a raise or restore lands
	busy     bool          // a step is in flight
	seed     []byte        // the durable seed once read; it never changes
	samples  []sample
	epoch    string // of the line the samples were read from
	failing  bool   // the last step failed (logged once until one succeeds)
	// durable is the origin's copy with the newest settings this node has
	// had from the origin (valid when heard); heardAt is when the node last
	// had a row from the origin or last asked for one.
	durable Row
	heard   bool
	heardAt time.Time
	// raiseTook is how long the last raise that landed took, origin and
	// Redis: the join blocks give a raise at least twice that long.
	raiseTook time.Duration
	// rate is the admission rate as the last tick read it: it bounds the
	// opening block (openingBlock).
	rate float64
	// lowered is the last serving ceiling reported to the origin
	// (LowerServing), so a tick does not report the same one again.
	lowered servingReport
}

// servingReport is a serving ceiling Redis held at a settings version.
type servingReport struct {
	version, ceiling int64
}

type sample struct {
	at     time.Time
	length int64
}

// New returns a Keeper; its metrics register on reg.
func New(lines *Lines, store Store, states StateReader, opts Options, log *slog.Logger, reg prometheus.Registerer) *Keeper {
	if opts.BlockWindow <= 0 {
		opts.BlockWindow = time.Second
	}
	if opts.MinBlock <= 0 {
		opts.MinBlock = 256
	}
	if opts.MaxBlock <= 0 {
		opts.MaxBlock = 1 << 20
	}
	opts.MaxBlock = max(opts.MaxBlock, opts.MinBlock)
	if opts.ServingWindow <= 0 {
		opts.ServingWindow = 2 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	if opts.JoinWait <= 0 {
		opts.JoinWait = time.Second
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 5 * time.Second
	}
	opts.Clock = clock.Or(opts.Clock)
	ctx, cancel := context.WithCancel(context.Background())
	k := &Keeper{lines: lines, store: store, states: states, opts: opts, log: log, ctx: ctx, cancel: cancel,
		sales: map[string]*saleLine{},
		restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_line_restores_total",
			Help: "Sale lines this node put back into Redis from the origin's durable copy after Redis lost them (keys gone, or writes lost in a failover)."}),
		raises: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_line_raises_total",
			Help: "Durable ceiling raises (origin, then Redis)."}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_line_waits_total",
			Help: "Joins answered please_wait because the line was at its durable ceiling."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_line_failures_total",
			Help: "Line steps that failed, by step (restore, seed, seal, raise, settings, sync); the origin or Redis was unreachable."}, []string{"step"}),
	}
	reg.MustRegister(k.restores, k.raises, k.waits, k.failures)
	jo := opts.Joiner
	jo.Observe = k.Observe
	k.joiner = NewJoiner(lines.rdb, lines.keys, jo)
	return k
}

// Join joins account to the sale's line. A join that finds the
// line at its ceiling, or lost, waits for the raise or restore that its
// round trip set off (Observe) and tries again, for up to JoinWait; then
// it returns the error (ErrWait or ErrLost), which the shopper
// hears as please_wait.
func (k *Keeper) Join(ctx context.Context, sale string, startsAt time.Time, account string) (Place, error) {
	giveUp := k.opts.Clock.NewTimer(k.opts.JoinWait)
	defer giveUp.Stop()
	for {
		changed := k.changedOf(sale) // before the attempt: a raise landing after it is not missed
		p, _, err := k.joiner.Join(ctx, sale, startsAt, account)
		if !errors.Is(err, ErrWait) && !errors.Is(err, ErrLost) {
			return p, err
		}
		select {
		case <-changed:
		case <-giveUp.C:
			return p, err
		case <-ctx.Done():
			return p, err
		}
	}
}

// Claim puts account back at the place its queue token shows, as a rejoin
// would (Joiner.Claim).
func (k *Keeper) Claim(ctx context.Context, sale, account string, p Place) (Place, error) {
	return k.joiner.Claim(ctx, sale, account, p)
}

// changedOf returns the channel closed when the sale's next raise or
// restore lands.
func (k *Keeper) changedOf(sale string) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sale(sale)
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// landed wakes the joins waiting for the sale's ceiling or restore.
func (k *Keeper) landed(sale string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sale(sale)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Durable returns the origin's copy of a sale's line with the newest
// settings this node has heard of (within SyncInterval of the origin's).
func (k *Keeper) Durable(sale string) (Row, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.sales[sale]; s != nil && s.heard {
		return s.durable, true
	}
	return Row{}, false
}

// Seed returns a sale's durable draw seed once this node has read it.
func (k *Keeper) Seed(sale string) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.sales[sale]; s != nil && s.seed != nil {
		return s.seed, true
	}
	return nil, false
}

// Maintain looks at every sale after a cursor tick and starts what each
// needs: a restore when Redis lost its line, reading its seed, sealing the
// draw once it started, putting settings the origin recorded into Redis,
// reading the origin's copy when it has not heard it for SyncInterval, or
// raising ceilings that its counters or cursor come near. It never blocks.
func (k *Keeper) Maintain(ticks []Tick) {
	now := k.opts.Clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range ticks {
		st, ok := k.states.State(t.Sale)
		if !ok {
			continue
		}
		s := k.sale(t.Sale)
		s.startsAt, s.rate = t.StartsAt, st.RatePerSecond
		if !st.Lost {
			s.record(st.Epoch, st.ReadAt, st.QueueLength)
		}
		if s.busy || k.closed {
			continue
		}
		started := !st.RedisNow.Before(t.StartsAt)
		switch {
		case st.Lost:
			k.start(t.Sale, s, "restore", func(ctx context.Context) error { return k.restore(ctx, t.Sale) })
		case s.seed == nil:
			k.start(t.Sale, s, "seed", func(ctx context.Context) error { return k.loadSeed(ctx, t.Sale) })
		case started && !st.Drawn:
			pre := st.PreQueue // final: Redis's clock has passed the start
			k.start(t.Sale, s, "seal", func(ctx context.Context) error { return k.seal(ctx, t.Sale, pre) })
		case s.heard && st.SettingsVersion < s.durable.SettingsVersion:
			row := s.durable
			k.start(t.Sale, s, "settings", func(ctx context.Context) error {
				_, err := k.pushSettings(ctx, t.Sale, row)
				return err
			})
		case s.heard && st.SettingsVersion == s.durable.SettingsVersion && st.ServingCeiling < s.durable.ServingCeiling &&
			s.lowered != (servingReport{st.SettingsVersion, st.ServingCeiling}):
			report := servingReport{st.SettingsVersion, st.ServingCeiling}
			s.lowered = report
			k.start(t.Sale, s, "lower", func(ctx context.Context) error { return k.lowerServing(ctx, t.Sale, report) })
		case now.Sub(s.heardAt) >= k.opts.SyncInterval:
			s.heardAt = now // at most one read per interval, answered or not
			k.start(t.Sale, s, "sync", func(ctx context.Context) error { return k.sync(ctx, t.Sale) })
		default:
			c := k.joinRaise(s, !started, st.PreQueue, st.PreCeiling, st.Post, st.PostCeiling, false)
			c.Serving, c.SettingsVersion = k.servingRaise(st.RatePerSecond, st.Paused, st.NowServing, st.ServingCeiling, st.SettingsVersion)
			if c != (Ceilings{}) {
				k.start(t.Sale, s, "raise", func(ctx context.Context) error { return k.raise(ctx, t.Sale, c) })
			}
		}
	}
}

// Observe hears a join round trip's level (JoinerOptions.Observe): it
// counts joins that found the line at its ceiling and starts a raise, or a
// restore, at once rather than at the next tick. It never blocks.
func (k *Keeper) Observe(sale string, lv Level) {
	k.waits.Add(float64(lv.Refused))
	now := k.opts.Clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sale(sale)
	if !lv.Lost {
		s.record(lv.Epoch, now, lv.Pre+lv.Post)
	}
	if s.busy || k.closed {
		return
	}
	if lv.Lost {
		k.start(sale, s, "restore", func(ctx context.Context) error { return k.restore(ctx, sale) })
		return
	}
	c := k.joinRaise(s, lv.BeforeStart, lv.Pre, lv.PreCeiling, lv.Post, lv.PostCeiling, lv.Refused > 0)
	if c != (Ceilings{}) {
		k.start(sale, s, "raise", func(ctx context.Context) error { return k.raise(ctx, sale, c) })
	}
}

// Settings changes a sale's admission settings (what c names) in the
// origin's copy — if the origin cannot be reached nothing changes and
// the error says so — and then tries to put it into Redis, where every
// node's next tick obeys it. Once the origin recorded it the change is the
// setting: when Redis does not take it now, every node's tick puts it there
// as soon as Redis answers (and a restore brings it back with the line).
// It returns the state with the new settings and whether Redis holds them.
func (k *Keeper) Settings(ctx context.Context, sale string, c Change) (State, bool, error) {
	row, err := k.store.Settings(ctx, sale, c)
	if err != nil {
		k.failures.WithLabelValues("settings").Inc()
		return State{}, false, fmt.Errorf("settings of sale %s in the origin: %w", sale, err)
	}
	k.heard(sale, row)
	applied, err := k.pushSettings(ctx, sale, row)
	st, _ := k.states.State(sale)
	if err != nil {
		k.failures.WithLabelValues("settings").Inc()
		k.log.Warn("admission settings recorded by the origin, not yet in redis; the nodes' ticks put them there",
			"sale", sale, "settings_version", row.SettingsVersion, "err", err)
		st.RatePerSecond, st.Paused, st.ChallengeBits = row.RatePerSecond, row.Paused, row.ChallengeBits
		return st, false, nil
	}
	st.RatePerSecond, st.Paused, st.NowServing = applied.RatePerSecond, applied.Paused, max(st.NowServing, applied.NowServing)
	st.ChallengeBits, st.SettingsVersion, st.ServingCeiling = applied.ChallengeBits, applied.Version, applied.ServingCeiling
	// A resume or a higher rate needs a higher serving ceiling than the
	// one the old settings left: raise it now rather than at the next
	// tick, so the change is in effect when the caller hears it is. If it
	// fails, the next tick raises it.
	raise := Ceilings{}
	raise.Serving, raise.SettingsVersion = k.servingRaise(applied.RatePerSecond, applied.Paused, applied.NowServing,
		applied.ServingCeiling, applied.Version)
	if raise.Serving > 0 && applied.Version == row.SettingsVersion {
		if err := k.raise(ctx, sale, raise); err != nil {
			k.failures.WithLabelValues("raise").Inc()
		} else {
			st.ServingCeiling = max(st.ServingCeiling, raise.Serving)
		}
	}
	return st, true, nil
}

// pushSettings puts the settings of the origin's copy row into Redis (a
// newer version there stays), which brings the serving ceiling down to a
// block of the new settings, and then reports that ceiling to the origin,
// which lowers its copy to match. It returns what Redis holds afterwards.
func (k *Keeper) pushSettings(ctx context.Context, sale string, row Row) (Applied, error) {
	block := k.servingBlock(row.RatePerSecond, row.Paused)
	settings := row.settings()
	applied, err := k.lines.Settings(ctx, sale, settings, block, k.seen(sale))
	if errors.Is(err, ErrLost) {
		// Redis lost the line: the restore brings the change back with it.
		if err = k.restore(ctx, sale); err == nil {
			applied, err = k.lines.Settings(ctx, sale, settings, block, k.seen(sale))
		}
	}
	if err != nil {
		return Applied{}, err
	}
	if applied.Version == row.SettingsVersion && applied.ServingCeiling < row.ServingCeiling {
		report := servingReport{applied.Version, applied.ServingCeiling}
		k.mu.Lock()
		k.sale(sale).lowered = report
		k.mu.Unlock()
		if err := k.lowerServing(ctx, sale, report); err != nil {
			// The setting is in force; the origin's copy stays higher until
			// a tick reports the ceiling again (Maintain).
			k.failures.WithLabelValues("lower").Inc()
			k.mu.Lock()
			k.sale(sale).lowered = servingReport{}
			k.mu.Unlock()
		}
	}
	return applied, nil
}

// lowerServing reports a serving ceiling Redis held at a settings version
// to the origin, which lowers its copy to it (or to the highest raise it
// took at that version, if more).
func (k *Keeper) lowerServing(ctx context.Context, sale string, r servingReport) error {
	row, err := k.store.LowerServing(ctx, sale, r.version, r.ceiling)
	if err != nil {
		return fmt.Errorf("lower the serving ceiling in the origin: %w", err)
	}
	k.heard(sale, row)
	return nil
}

// seen is what this node has read of a sale's line: Redis holding less
// has lost writes.
func (k *Keeper) seen(sale string) Seen {
	st, ok := k.states.State(sale)
	if !ok {
		return Seen{}
	}
	return Seen{Pre: st.PreQueue, Post: st.Post, NowServing: st.NowServing}
}

// sync reads the origin's copy of a line, so that settings it recorded
// reach Redis (Maintain pushes them on the next tick).
func (k *Keeper) sync(ctx context.Context, sale string) error {
	row, err := k.store.Line(ctx, sale)
	if err != nil {
		return fmt.Errorf("read the line in the origin: %w", err)
	}
	k.heard(sale, row)
	return nil
}

// heard keeps a row the origin answered: its settings when newer than the
// newest this node had.
func (k *Keeper) heard(sale string, row Row) {
	now := k.opts.Clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sale(sale)
	if !s.heard || row.SettingsVersion >= s.durable.SettingsVersion {
		s.durable, s.heard = row, true
	}
	s.heardAt = now
}

// Idle reports whether no step is in flight, for tests that tick by hand.
func (k *Keeper) Idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.sales {
		if s.busy {
			return false
		}
	}
	return true
}

// Close stops the steps in flight and waits for them.
func (k *Keeper) Close() {
	k.joiner.Close()
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
}

// sale returns the sale's record, making it; the caller holds mu.
func (k *Keeper) sale(id string) *saleLine {
	s := k.sales[id]
	if s == nil {
		s = &saleLine{}
		k.sales[id] = s
	}
	return s
}

// start runs step in the background as the sale's one step in flight; the
// caller holds mu.
func (k *Keeper) start(sale string, s *saleLine, step string, run func(context.Context) error) {
	s.busy = true
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		ctx, cancel := context.WithTimeout(k.ctx, k.opts.Timeout)
		err := run(ctx)
		cancel()
		if err != nil {
			k.failures.WithLabelValues(step).Inc()
		}
		k.mu.Lock()
		s.busy = false
		was := s.failing
		s.failing = err != nil
		k.mu.Unlock()
		switch {
		case err != nil && !was && k.ctx.Err() == nil:
			k.log.Warn("sale line step failing", "sale", sale, "step", step, "err", err)
		case err == nil && was:
			k.log.Info("sale line steps recovered", "sale", sale, "step", step)
		}
	}()
}

// record adds a reading of the line's length for the join rate. A reading
// of a line restored since the last one starts the samples over: the
// restore's jump to the ceilings is no rate of joins to size blocks by.
func (s *saleLine) record(epoch string, at time.Time, length int64) {
	if epoch != s.epoch {
		s.samples, s.epoch = nil, epoch
	}
	// Readings closer than 20 ms to the one before the last replace the
	// last: the samples stay few, and the newest reading is always in
	// them (a burst shorter than that is still a burst).
	if n := len(s.samples); n > 1 && at.Sub(s.samples[n-2].at) < 20*time.Millisecond {
		s.samples[n-1] = sample{at: at, length: length}
		return
	}
	s.samples = append(s.samples, sample{at: at, length: length})
	cut := 0
	for cut < len(s.samples)-1 && at.Sub(s.samples[cut].at) > rateWindow {
		cut++
	}
	s.samples = s.samples[cut:]
}

// JoinRate is the sale's recent join rate, joins a second over the whole
// line (every node's), as this node's readings of its length show it.
func (k *Keeper) JoinRate(sale string) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.sales[sale]; ok {
		return s.joinRate()
	}
	return 0
}

// minRateSpan is the shortest span the join rate is taken over: a handful
// of joins arriving together is not a rate of thousands a second.
const minRateSpan = 250 * time.Millisecond

// joinRate is joins per second over the last rateWindow.
func (s *saleLine) joinRate() float64 {
	if len(s.samples) < 2 {
		return 0
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	if last.length < first.length {
		return 0
	}
	return float64(last.length-first.length) / max(last.at.Sub(first.at), minRateSpan).Seconds()
}

// maxBlockWindows caps how far a slow raise stretches the join blocks, in
// BlockWindows: a raise that timed out once does not make them huge.
const maxBlockWindows = 8

// joinBlock is how far ahead of its counter a join ceiling is raised:
// BlockWindow of joins at the recent rate, or four times the last raise's
// round trip if that is longer (up to maxBlockWindows), so that the raise
// set off at half a block has twice its round trip to land before joins
// reach the ceiling. In a burst the origin answers slowest just when joins
// come fastest.
func (k *Keeper) joinBlock(s *saleLine) int64 {
	window := min(max(k.opts.BlockWindow, 4*s.raiseTook), maxBlockWindows*k.opts.BlockWindow)
	b := int64(math.Ceil(s.joinRate() * window.Seconds()))
	return min(max(b, k.opts.MinBlock), k.opts.MaxBlock)
}

// servingBlock is how far ahead of the cursor the serving ceiling may be:
// ServingWindow of admissions at rate, at least one position while the
// cursor may move, none while paused. It bounds how many shoppers a
// restore admits early after Redis loses the line.
func (k *Keeper) servingBlock(rate float64, paused bool) int64 {
	if paused || rate <= 0 {
		return 0
	}
	return max(int64(math.Ceil(rate*k.opts.ServingWindow.Seconds())), 1)
}

// servingRaise returns the serving ceiling to raise to, and the settings
// version it is sized for (0, 0: leave it): a block beyond the cursor once
// the ceiling is within half a block of it.
func (k *Keeper) servingRaise(rate float64, paused bool, nowServing, ceiling, version int64) (int64, int64) {
	b := k.servingBlock(rate, paused)
	if b == 0 || ceiling-nowServing > b/2 {
		return 0, 0
	}
	return nowServing + b, version
}

// joinRaise returns the join ceilings to raise (0: leave one): a counter
// within half a block of its ceiling, or one that refused joins, gets a
// block beyond it. The pre-queue's only before the start: it is closed
// after. Before the start the line after it is readied for the open, with
// a block at least the pre-queue's size (openingBlock).
func (k *Keeper) joinRaise(s *saleLine, before bool, pre, preCeiling, post, postCeiling int64, refused bool) Ceilings {
	b := k.joinBlock(s)
	var c Ceilings
	if before && (preCeiling-pre <= b/2 || refused) {
		c.Pre = pre + b
	}
	postBlock := b
	if before {
		postBlock = k.openingBlock(s, b, pre)
	}
	if postCeiling-post <= postBlock/2 || (refused && !before) {
		c.Post = post + postBlock
	}
	return c
}

// openingWindow bounds the opening block: at most this long of admissions
// at the set rate.
const openingWindow = 5 * time.Second

// openingBlock is the post line's block before the start: the join block
// b, or the pre-queue's size pre if that is more, but no more than
// openingWindow of admissions at the sale's rate (nor MaxBlock). The early
// crowd forecasts the open's burst, when raises are slowest, so its joins
// find places without waiting for one; the bound caps the places a loss
// before the open leaves unused (docs/OPERATIONS.md, "The price of a loss").
func (k *Keeper) openingBlock(s *saleLine, b, pre int64) int64 {
	forecast := min(pre, int64(math.Ceil(s.rate*openingWindow.Seconds())))
	return min(max(b, forecast), k.opts.MaxBlock)
}

// raise raises ceilings in the origin's copy, then in Redis: the join
// ceilings to what the origin holds (which may be more: other nodes raise
// too), the serving ceiling to the one asked for, and only if the origin
// took it at the settings version it was sized for.
func (k *Keeper) raise(ctx context.Context, sale string, c Ceilings) error {
	started := k.opts.Clock.Now()
	row, err := k.store.Raise(ctx, sale, c)
	if err != nil {
		return fmt.Errorf("raise in the origin: %w", err)
	}
	k.heard(sale, row)
	next := Ceilings{Pre: row.PreCeiling, Post: row.PostCeiling}
	if c.Serving > 0 && row.SettingsVersion == c.SettingsVersion {
		next.Serving, next.SettingsVersion = c.Serving, c.SettingsVersion
	}
	_, err = k.lines.Raise(ctx, sale, next)
	if errors.Is(err, ErrLost) {
		return nil // the restore takes the ceilings from the origin
	}
	if err == nil {
		k.raises.Inc()
		k.mu.Lock()
		k.sale(sale).raiseTook = k.opts.Clock.Now().Sub(started)
		k.mu.Unlock()
		k.landed(sale)
	}
	return err
}

// seal records the pre-queue's size at the start in the origin's copy (the
// first edge wins) and then in Redis; the draw permutes exactly that many.
func (k *Keeper) seal(ctx context.Context, sale string, pre int64) error {
	row, err := k.store.SealDraw(ctx, sale, pre)
	if err != nil {
		return fmt.Errorf("seal the draw in the origin: %w", err)
	}
	k.heard(sale, row)
	if row.DrawSize == nil {
		return fmt.Errorf("seal the draw: the origin answered no draw size")
	}
	if _, err := k.lines.Seal(ctx, sale, *row.DrawSize); err != nil && !errors.Is(err, ErrLost) {
		return err
	}
	return nil
}

// loadSeed reads the sale's seed from Redis, or restores the line when
// Redis lost it.
func (k *Keeper) loadSeed(ctx context.Context, sale string) error {
	seed, err := k.lines.Seed(ctx, sale)
	if errors.Is(err, ErrLost) {
		return k.restore(ctx, sale)
	}
	if err != nil {
		return err
	}
	k.setSeed(sale, seed)
	return nil
}

func (k *Keeper) setSeed(sale string, seed []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sale(sale).seed = seed
}

// restore puts a sale's line back into Redis from the origin's copy, making
// the copy first when the origin has none (a new sale, or a line that
// predates it: then what Redis still holds is proposed and kept). It also
// raises a line Redis holds whole but with writes lost (restore.lua: a
// replica that lagged was promoted, or Redis holds less than this node
// read). Several nodes may restore at once; the first to reach Redis wins
// and the others change nothing.
func (k *Keeper) restore(ctx context.Context, sale string) error {
	cur, err := k.lines.Current(ctx, sale)
	if err != nil {
		return err
	}
	p := Proposal{Seed: hex.EncodeToString(cur.Seed), RatePerSecond: k.opts.DefaultRatePerSecond, Paused: cur.Paused}
	if cur.Seed == nil {
		var fresh [32]byte
		if _, err := rand.Read(fresh[:]); err != nil {
			return fmt.Errorf("new seed: %w", err)
		}
		p.Seed = hex.EncodeToString(fresh[:])
	}
	if cur.HasRate {
		p.RatePerSecond = cur.RatePerSecond
	}
	row, err := k.store.Ensure(ctx, sale, p)
	if err != nil {
		return fmt.Errorf("line in the origin: %w", err)
	}
	seed, err := hex.DecodeString(row.Seed)
	if err != nil || len(seed) == 0 {
		return fmt.Errorf("line in the origin: seed %q is not hex", row.Seed)
	}
	// Resume every counter at its ceiling (or what Redis still holds, if
	// more), and the cursor at the serving ceiling (never past the line's
	// end): nobody admitted is sent back. The serving ceiling then is a
	// block of the restored settings beyond the cursor, and the origin
	// takes it as a raise at their version before Redis has it, so its
	// copy covers it. The line lands before any join ceiling is raised: a
	// node that lands a new sale's line at zero has then raised nothing
	// yet, so another node that read the copy meanwhile read zero ceilings
	// and lands the same line (or finds it landed); had the first raised
	// first, the second could land the new line at the raised ceilings and
	// leave a block of places unused. The next tick raises the ceilings a
	// block ahead, and joins that meet a ceiling meanwhile wait for that
	// raise.
	pre, post := max(row.PreCeiling, cur.Pre), max(row.PostCeiling, cur.Post)
	serving := max(cur.NowServing, min(row.ServingCeiling, pre+post))
	ceiling := max(serving, min(row.ServingCeiling, serving+k.servingBlock(row.RatePerSecond, row.Paused)))
	k.mu.Lock()
	k.sale(sale).samples = nil
	k.mu.Unlock()
	raised := row
	if ceiling > 0 || pre > row.PreCeiling || post > row.PostCeiling {
		c := Ceilings{Serving: ceiling, SettingsVersion: row.SettingsVersion}
		if pre > row.PreCeiling || post > row.PostCeiling {
			// Redis holds more than the copy (a line from before the copy):
			// the copy must cover it before the line is called landed.
			c.Pre, c.Post = pre, post
		}
		if raised, err = k.store.Raise(ctx, sale, c); err != nil {
			return fmt.Errorf("raise in the origin: %w", err)
		}
		if raised.SettingsVersion != row.SettingsVersion {
			return fmt.Errorf("restore line of sale %s: its settings changed meanwhile; the next tick restores again", sale)
		}
	}
	k.heard(sale, raised)
	d := Durable{
		Seed: seed, RatePerSecond: raised.RatePerSecond, Paused: raised.Paused, ChallengeBits: raised.ChallengeBits,
		SettingsVersion: raised.SettingsVersion,
		Pre:             pre, Post: post, NowServing: serving,
		PreCeiling: raised.PreCeiling, PostCeiling: raised.PostCeiling, ServingCeiling: ceiling,
		Seen: k.seen(sale),
	}
	if raised.DrawSize != nil {
		d.DrawSize, d.Drawn = *raised.DrawSize, true
	}
	var epoch [8]byte
	_, _ = rand.Read(epoch[:])
	restored, err := k.lines.Restore(ctx, sale, hex.EncodeToString(epoch[:]), d)
	if err != nil {
		return err
	}
	switch restored {
	case Newer:
		return fmt.Errorf("restore line of sale %s: redis holds newer settings than the copy read; the next tick restores again", sale)
	case Missing:
		k.restores.Inc()
		k.log.Warn("sale line was not in redis; restored from the origin's durable copy", "sale", sale,
			"pre", pre, "post", post, "now_serving", serving, "serving_ceiling", ceiling, "paused", d.Paused, "rate_per_s", d.RatePerSecond)
	case Behind:
		k.restores.Inc()
		k.log.Warn("redis lost writes to the sale line (failover or restart); raised to the origin's durable copy", "sale", sale,
			"pre", pre, "post", post, "now_serving", serving, "serving_ceiling", ceiling, "paused", d.Paused, "rate_per_s", d.RatePerSecond)
	}
	k.landed(sale)
	k.setSeed(sale, seed)
	return nil
}
