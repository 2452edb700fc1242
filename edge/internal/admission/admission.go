// Package admission is the edge's admission policy: who may buy now, and
// what a waiting shopper hears. Each tick the Controller advances every
// sale's admission cursor in Redis (Cursor, one round trip for all sales)
// at the pace Pacing computes from the node's last reading of it (pace.go:
// the slow start's ramps and the checkout's bound), lets the line keeper start what each line needs, and rebuilds the views
// the handlers answer from: the origin's snapshot of the sale (from the
// snapshot cache) with this node's reading of the cursor and the pre-queue
// draw (from the line's durable seed). A View says whether it is recent
// enough to answer from and gives a waiting shopper's estimates; Readiness
// says whether the node can answer sale requests at all.
//
// Its Redis keys are the line's, named in line.Keys: advance.lua writes the
// cursor hash (now_serving, last_ms), appends its moves to the steps list,
// and reads the counters and the line hash; the admission log (log.go)
// reads the places hash and the steps list. The restore (line.Lines) is
// the one place that creates the cursor hash.
package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/internal/clock"
)

// Errors a request about a sale may get instead of its view.
var (
	// ErrUnknownSale: a current list of the origin's sales does not have it.
	ErrUnknownSale = errors.New("admission: no such sale")
	// ErrNotReady: the node cannot know the sale's state now: it is
	// starting, its snapshot of the sale is older than SnapshotStaleAfter,
	// or the sale is newer than its last list of the origin's sales.
	ErrNotReady = errors.New("admission: the sale's state is not known here yet")
	// ErrCursorStale: the node's reading of the sale's cursor is older than
	// StaleAfter (Redis is unreachable), or Redis lost the line and it is
	// being restored.
	ErrCursorStale = errors.New("admission: the sale's admission cursor is not current")
	// ErrSaleClosed: the sale is over.
	ErrSaleClosed = errors.New("admission: the sale is over")
	// ErrSoldOut: no unit is available to a shopper at the front.
	ErrSoldOut = errors.New("admission: sold out")
)

// Lines is what the controller needs of the line keeper.
type Lines interface {
	// Maintain hears each tick, after the cursor's advance, and starts what
	// each sale's line needs in the background.
	Maintain(ticks []line.Tick)
	// Seed is a sale's durable draw seed, once the node has read it.
	Seed(sale string) ([]byte, bool)
}

var _ Lines = (*line.Keeper)(nil)

// Options tune a Controller; zero values take the defaults.
type Options struct {
	// StaleAfter: a cursor reading older than this means Redis is down, and
	// the sale's requests answer please_wait. Required.
	StaleAfter time.Duration
	// SnapshotStaleAfter: a sale's origin snapshot older than this is not
	// answered from (please_wait instead of a stale "open"), and a list of
	// the origin's sales older than this no longer proves a sale does not
	// exist. Required.
	SnapshotStaleAfter time.Duration
	// MaxPollAfter caps the poll interval told to a shopper far back in
	// line; 0 means 60 s. Far back a poll only refreshes the estimate (the
	// page learns its turn from the snapshot it re-reads through the CDN),
	// and a shorter cap brings the burst's joins back as a second burst of
	// polls while the checkout is busiest.
	MaxPollAfter time.Duration
	// Hold is asked once a tick whether the checkout behind this node is
	// congested (CheckoutHold): if so the tick advances no cursor, and
	// shoppers wait in line, hearing honest estimates, instead of being
	// admitted to a checkout that would answer them please_wait. nil means
	// never.
	Hold func() bool
	// Clock is the node's clock; nil means the machine's.
	Clock clock.Clock
	// Challenge is asked each tick, for a sale that can still be joined,
	// for the proof of work its snapshot publishes, given the sale's
	// setting (line.State's ChallengeBits); ok false: none. nil means
	// none is published (a join then learns its challenge from a 403).
	Challenge func(sale string, saleBits int, now time.Time) (ch Challenge, ok bool)
}

// Challenge is a sale's published proof of work, as the snapshot carries
// it (docs/API.md): pages solve it for their account before joining.
type Challenge struct {
	Value          string `json:"value"`
	DifficultyBits int    `json:"difficulty_bits"`
}

// Controller runs the tick and holds the views it builds. Views are rebuilt
// each tick and swapped in whole, so handlers read them without locks.
type Controller struct {
	cursor    *Cursor
	snapshots *snapshot.Cache
	lines     Lines
	opts      Options
	views     atomic.Pointer[map[string]*View]
	// heldAt is the Clock reading (unix ns) of this node's last held tick,
	// 0 before any: its slow start runs from then.
	heldAt atomic.Int64
	// tickedAt is the Clock reading (unix ns) of the last tick Redis
	// answered; 0 before the first.
	tickedAt atomic.Int64
	// answers maps a sale to the reserves of it this node saw the checkout
	// answer since its last tick (*atomic.Int64, Answered); the tick hands
	// them to the cursor, whose slow start follows the answer rate.
	answers sync.Map
	news    news // requests waiting for a sale's next headline (News)
	// refreshedAt is the Clock reading (unix ns) of the last Refresh that
	// asked for the snapshots.
	refreshedAt atomic.Int64
	metrics     metrics
}

type metrics struct {
	cursor      *prometheus.GaugeVec
	answerRate  *prometheus.GaugeVec
	queueLength *prometheus.GaugeVec
	paused      *prometheus.GaugeVec
	rate        *prometheus.GaugeVec
	snapshotAge *prometheus.GaugeVec
	ready       prometheus.Gauge
	held        prometheus.Counter
}

// New returns a Controller over cursor (which it alone ticks), the snapshot
// cache and the line keeper; its metrics register on reg.
func New(cursor *Cursor, snapshots *snapshot.Cache, lines Lines, opts Options, reg prometheus.Registerer) *Controller {
	if opts.MaxPollAfter <= 0 {
		opts.MaxPollAfter = 60 * time.Second
	}
	opts.Clock = clock.Or(opts.Clock)
	c := &Controller{cursor: cursor, snapshots: snapshots, lines: lines, opts: opts}
	c.metrics = metrics{
		cursor: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flashgate_edge_now_serving", Help: "Admission cursor as this node last read it."}, []string{"sale"}),
		answerRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_edge_checkout_answer_rate",
			Help: "Reserves a second the checkout answered, as every edge counted them and this node last read it; the slow start admits at most twice it.",
		}, []string{"sale"}),
		queueLength: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flashgate_edge_queue_length", Help: "Places handed out, as this node last read it."}, []string{"sale"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_edge_admission_paused", Help: "1 while ops have paused the sale's admission, as this node last read it, else 0.",
		}, []string{"sale"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_edge_admission_rate",
			Help: "Admissions a second ops set for the sale, as this node last read it: the setting, which the slow start, a checkout hold and low stock may undercut.",
		}, []string{"sale"}),
		snapshotAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_edge_snapshot_age_seconds", Help: "Age of this node's last good origin snapshot of each sale that has not ended.",
		}, []string{"sale"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashgate_edge_ready", Help: "1 while this node is ready (GET /readyz answers 200), else 0."}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_edge_admission_held_ticks_total", Help: "Ticks in which this node admitted no one because it found the checkout congested.",
		}),
	}
	m := c.metrics
	reg.MustRegister(m.cursor, m.answerRate, m.queueLength, m.paused, m.rate, m.snapshotAge, m.ready, m.held)
	return c
}

// publicSnapshot is the snapshot the edge serves: the origin's with the
// cursor filled in and the pre-queue draw's commitment (and, after the
// start, its seed) so anyone can check the shuffle.
type publicSnapshot struct {
	snapshot.Sale
	Draw      draw       `json:"draw"`
	Challenge *Challenge `json:"challenge,omitempty"`
}

type draw struct {
	SeedSHA256 string `json:"seed_sha256"`
	Seed       string `json:"seed,omitempty"` // revealed at the start
	PreQueue   int64  `json:"pre_queue"`
	Algorithm  string `json:"algorithm"`
}

// Tick is the edge's heartbeat, run every few hundred milliseconds: it
// advances and reads the admission cursors in one Redis round trip, lets
// the line keeper start what each sale's line needs (a restore, the draw's
// seal, a ceiling raise: in the background), and rebuilds the views. A sale
// shows once this node has its durable seed. A sale whose snapshot is stale
// still ticks with its last known stock (sending none would reset the
// cursor's clock for the nodes that know better); its requests answer
// please_wait instead. With no sale to tick it pings Redis, so readiness
// still says whether Redis answers.
func (c *Controller) Tick(ctx context.Context) error {
	entries := c.snapshots.All()
	ticks := make([]line.Tick, 0, len(entries))
	available := make([]int64, len(entries))
	hold := c.opts.Hold != nil && c.opts.Hold()
	if hold {
		c.heldAt.Store(c.opts.Clock.Now().UnixNano())
	}
	var heldAt time.Time
	if at := c.heldAt.Load(); at != 0 {
		heldAt = time.Unix(0, at)
	}
	for i, e := range entries {
		available[i] = e.Sale.Available()
		var left int64
		if !e.Sale.SoldOut {
			left = max(available[i], 1) // not sold out: something may be left
		}
		ticks = append(ticks, line.Tick{Sale: e.Sale.SaleID, StartsAt: e.Sale.StartsAt, Available: left, Hold: hold, HeldAt: heldAt,
			Answered: c.takeAnswers(e.Sale.SaleID)})
	}
	if hold && len(ticks) > 0 {
		c.metrics.held.Inc()
	}
	var tickErr error
	if len(ticks) > 0 {
		tickErr = c.cursor.Tick(ctx, ticks)
	} else {
		tickErr = c.cursor.Ping(ctx)
	}
	if tickErr == nil {
		c.tickedAt.Store(c.opts.Clock.Now().UnixNano())
	}
	c.lines.Maintain(ticks)
	now := c.opts.Clock.Now()
	next := make(map[string]*View, len(entries))
	for i, e := range entries {
		sale := e.Sale
		seed, ok := c.lines.Seed(sale.SaleID)
		if !ok {
			continue
		}
		v, err := c.view(e, seed, available[i])
		if err != nil {
			return err
		}
		next[sale.SaleID] = v
		if v.HasState {
			c.metrics.cursor.WithLabelValues(sale.SaleID).Set(float64(v.State.NowServing))
			c.metrics.answerRate.WithLabelValues(sale.SaleID).Set(v.State.AnswerRate)
			c.metrics.queueLength.WithLabelValues(sale.SaleID).Set(float64(v.State.QueueLength))
			paused := 0.0
			if v.State.Paused {
				paused = 1
			}
			c.metrics.paused.WithLabelValues(sale.SaleID).Set(paused)
			c.metrics.rate.WithLabelValues(sale.SaleID).Set(v.State.RatePerSecond)
		}
		if sale.Ended() {
			c.metrics.snapshotAge.DeleteLabelValues(sale.SaleID) // no longer fetched: its age says nothing
		} else {
			c.metrics.snapshotAge.WithLabelValues(sale.SaleID).Set(now.Sub(e.FetchedAt).Seconds())
		}
	}
	old := c.views.Swap(&next)
	if old != nil {
		for id, v := range next {
			if o, ok := (*old)[id]; ok && headlineOf(o) != headlineOf(v) {
				c.news.announce(id, now)
			}
		}
	}
	c.news.forget(next)
	ready := 0.0
	if c.Readiness().Ready {
		ready = 1
	}
	c.metrics.ready.Set(ready)
	return tickErr
}

// Answered counts a reserve of the sale that the checkout answered (any
// answer but a failure: a hold, sold out, a limit), for the next tick: the
// slow start admits at most twice the rate of these answers, so a checkout
// that answers slowly is not sent shoppers faster than it can take them.
func (c *Controller) Answered(sale string) {
	n, ok := c.answers.Load(sale)
	if !ok {
		n, _ = c.answers.LoadOrStore(sale, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// takeAnswers returns the sale's answers counted since the last call. A
// tick that then fails loses them: the slow start is only the more careful
// for a moment.
func (c *Controller) takeAnswers(sale string) int64 {
	if n, ok := c.answers.Load(sale); ok {
		return n.(*atomic.Int64).Swap(0)
	}
	return 0
}

// view builds a sale's view from its snapshot, its durable seed and the
// cursor's last reading.
func (c *Controller) view(e snapshot.Entry, seed []byte, available int64) (*View, error) {
	sale := e.Sale
	v := &View{Sale: sale, fetchedAt: e.FetchedAt, seed: seed, available: available, opts: &c.opts}
	seedHash := line.SeedHash(seed)
	v.State, v.HasState = c.cursor.State(sale.SaleID)
	// Redis's clock decides the start, as it does for joins; the draw
	// covers exactly the pre-queue size sealed, durably, after it.
	started := v.HasState && !v.State.RedisNow.Before(sale.StartsAt)
	if started && v.State.Drawn {
		v.shuffle, v.drawn = line.NewShuffle(seed, v.State.DrawSize), true
	}
	pub := publicSnapshot{Sale: sale, Draw: draw{SeedSHA256: seedHash, Algorithm: line.ShuffleAlgorithm}}
	if v.HasState {
		pub.NowServing, pub.QueueLength = v.State.NowServing, v.State.QueueLength
		pub.Draw.PreQueue = v.State.PreQueue
	}
	if v.drawn {
		pub.Draw.Seed = hex.EncodeToString(seed)
		pub.Draw.PreQueue = v.State.DrawSize
	}
	v.LongCache = (sale.SoldOut && sale.Final) || sale.Ended()
	if c.opts.Challenge != nil && v.HasState && !v.LongCache {
		if ch, ok := c.opts.Challenge(sale.SaleID, v.State.ChallengeBits, c.opts.Clock.Now()); ok {
			pub.Challenge = &ch
		}
	}
	body, err := json.Marshal(pub)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot of sale %s: %w", sale.SaleID, err)
	}
	v.Body = body
	sum := sha256.Sum256(body)
	v.ETag = `"` + hex.EncodeToString(sum[:8]) + `"`
	return v, nil
}

func (c *Controller) get(id string) (*View, bool) {
	m := c.views.Load()
	if m == nil {
		return nil, false
	}
	v, ok := (*m)[id]
	return v, ok
}

// View is the view a request about sale id is answered from. Without one,
// the error is ErrUnknownSale only when a current list of the origin's
// sales does not have the id; otherwise the node cannot know yet (it is
// starting, the origin or Redis is unreachable, or the sale is too new for
// the last refresh) and the error is ErrNotReady.
func (c *Controller) View(id string) (*View, error) {
	if v, ok := c.get(id); ok {
		return v, nil
	}
	if c.snapshots.Presence(id, c.opts.SnapshotStaleAfter) == snapshot.Absent {
		return nil, ErrUnknownSale
	}
	return nil, ErrNotReady
}

// TokenView is View for a request that carries a valid token this edge
// signed for the sale: the token proves the sale exists, so a current list
// without it only means the list is a moment older than the sale. The
// error is then ErrNotReady, and the snapshot cache refreshes at once.
func (c *Controller) TokenView(id string) (*View, error) {
	v, err := c.View(id)
	if errors.Is(err, ErrUnknownSale) {
		c.snapshots.Kick()
		return nil, ErrNotReady
	}
	return v, err
}

// News returns a channel closed when a tick's view of the sale first shows
// other news than the view in force when News was called — sold out, sold
// out for good, or the sale's status — and when the last such news came
// (on the Clock; zero: none since the node started).
func (c *Controller) News(sale string) (next <-chan struct{}, last time.Time) {
	return c.news.next(sale)
}

// Refresh has the snapshots fetched again at once rather than at their next
// period, as when the origin answers a reserve sold out that this node's
// view does not: the views take the news in at the next tick. It asks at
// most once every refreshGap: a stampede of such answers is a few fetches,
// not one each.
func (c *Controller) Refresh() {
	now := c.opts.Clock.Now().UnixNano()
	last := c.refreshedAt.Load()
	if now-last < int64(refreshGap) || !c.refreshedAt.CompareAndSwap(last, now) {
		return
	}
	c.snapshots.Kick()
}

// refreshGap is the least time between two Refresh fetches: a tick's.
const refreshGap = 100 * time.Millisecond

// State is the cursor's last reading of a sale's line; false before the
// first.
func (c *Controller) State(sale string) (line.State, bool) { return c.cursor.State(sale) }

// Readiness is whether the node can answer sale requests: it has a list of
// the origin's sales no older than SnapshotStaleAfter, and its last good
// tick (Redis answered) is no older than StaleAfter. A single sale whose
// snapshot is stale does not make the node unready (every node would share
// it); it is named in StaleSales and its requests answer please_wait.
type Readiness struct {
	Ready       bool
	ListCurrent bool          // the list of the origin's sales is recent enough
	TickCurrent bool          // the last good tick is recent enough
	ListAge     time.Duration // -1: no list yet
	TickAge     time.Duration // -1: no good tick yet
	StaleSales  []string
}

// Readiness says whether the node is ready now.
func (c *Controller) Readiness() Readiness {
	now := c.opts.Clock.Now()
	r := Readiness{ListAge: -1, TickAge: -1}
	if age, ok := c.snapshots.ListAge(); ok {
		r.ListAge = age
	}
	if t := c.tickedAt.Load(); t != 0 {
		r.TickAge = now.Sub(time.Unix(0, t))
	}
	r.ListCurrent = r.ListAge >= 0 && r.ListAge <= c.opts.SnapshotStaleAfter
	r.TickCurrent = r.TickAge >= 0 && r.TickAge <= c.opts.StaleAfter
	r.Ready = r.ListCurrent && r.TickCurrent
	for _, id := range c.snapshots.Listed() {
		v, ok := c.get(id)
		if !ok || (!v.Sale.Ended() && !v.Current(now)) {
			r.StaleSales = append(r.StaleSales, id)
		}
	}
	return r
}
