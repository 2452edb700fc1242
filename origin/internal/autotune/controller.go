package autotune

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Signals reads what the back end showed of a sale since the last read.
type Signals interface {
	Read(ctx context.Context, sale string) (Reading, error)
}

// Lines is the ledger as the controller uses it: ledger.Store.
type Lines interface {
	Hold(ctx context.Context, name string) (*ledger.Lock, error)
	AutotunedLines(ctx context.Context, now time.Time) ([]ledger.Line, error)
	SetLineSettings(ctx context.Context, sale string, change ledger.SettingsChange) (ledger.Line, error)
}

var _ Lines = (*ledger.Store)(nil)

// Options tune a Controller; zero values take the defaults.
type Options struct {
	// Period is how often the rate may change; 0 means 5 s, the edges'
	// sync interval (a change reaches every edge within one).
	Period  time.Duration
	Targets Targets     // zero: DefaultTargets
	Clock   clock.Clock // which sales are open, and Run's period; nil: clock.Real
}

// DefaultPeriod is the Period of Options that leave it 0: the edges' sync
// interval, so a change reaches every edge within one.
const DefaultPeriod = 5 * time.Second

// lockName is the Postgres lock the tuning origin holds.
const lockName = "autotune"

// Controller tunes the admission rate of every sale ops switched autotune
// on for. It is safe for concurrent use.
type Controller struct {
	lines   Lines
	signals Signals
	opts    Options
	log     *slog.Logger
	steps   *prometheus.CounterVec

	mu     sync.Mutex
	lock   *ledger.Lock       // while this origin is the tuning one
	limits map[string]float64 // by sale: the rate at which the back end last showed its limit (Step)
}

// New returns a Controller; Run starts it.
func New(lines Lines, signals Signals, opts Options, log *slog.Logger, reg prometheus.Registerer) *Controller {
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Targets == (Targets{}) {
		opts.Targets = DefaultTargets()
	}
	opts.Clock = clock.Or(opts.Clock)
	c := &Controller{lines: lines, signals: signals, opts: opts, log: log, limits: map[string]float64{},
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_autotune_steps_total",
			Help: "Periods of the admission controller by sale and what it did to the rate: up, down, hold (kept), failed (not read or not written).",
		}, []string{"sale", "step"})}
	if reg != nil {
		reg.MustRegister(c.steps)
	}
	return c
}

// Run tunes every Period until ctx ends, and then lets another origin
// tune.
func (c *Controller) Run(ctx context.Context) {
	t := c.opts.Clock.NewTicker(c.opts.Period)
	defer t.Stop()
	defer c.Resign()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.Tune(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("admission tuning incomplete", "err", err)
		}
	}
}

// Tune runs one period, if this origin is the tuning one or can become it:
// for each open sale with autotune on, it reads the signals, steps the
// rate, and records a change like an operator's — unless ops changed the
// settings meanwhile.
func (c *Controller) Tune(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines, err := c.lines.AutotunedLines(ctx, c.opts.Clock.Now())
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		// Nothing to tune: no lock, and no connection kept for one.
		c.resign()
		return nil
	}
	if ok, err := c.lead(ctx); err != nil || !ok {
		return err
	}
	tuned := make(map[string]float64, len(lines))
	var errs []error
	for _, l := range lines {
		if err := c.tune(ctx, l); err != nil {
			c.steps.WithLabelValues(l.SaleID, "failed").Inc()
			errs = append(errs, fmt.Errorf("sale %s: %w", l.SaleID, err))
		}
		tuned[l.SaleID] = c.limits[l.SaleID]
	}
	// A sale autotune is off for (or that ended) starts afresh when it
	// is switched on again: its old limit says nothing of then.
	c.limits = tuned
	return errors.Join(errs...)
}

// lead keeps this origin the tuning one, or makes it so if no other is. The
// lock is held across periods, so no two origins act on the same signals; a
// lock whose connection no longer answers (another origin may hold it now)
// is given up with what this origin learnt of the limits. The caller holds
// c.mu.
func (c *Controller) lead(ctx context.Context) (bool, error) {
	if c.lock != nil {
		err := c.lock.Held(ctx)
		if err == nil {
			return true, nil
		}
		c.log.Warn("no longer the tuning origin", "err", err)
		c.lock.Unlock()
		c.lock, c.limits = nil, map[string]float64{}
	}
	l, err := c.lines.Hold(ctx, lockName)
	if err != nil || l == nil {
		return false, err
	}
	c.lock = l
	return true, nil
}

// Resign lets another origin tune, from its next period.
func (c *Controller) Resign() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resign()
}

// resign is Resign with c.mu held.
func (c *Controller) resign() {
	if c.lock != nil {
		c.lock.Unlock()
		c.lock, c.limits = nil, map[string]float64{}
	}
}

func (c *Controller) tune(ctx context.Context, l ledger.Line) error {
	r, err := c.signals.Read(ctx, l.SaleID)
	if err != nil {
		return err
	}
	// The limit is this origin's memory: another taking over the tuning
	// starts without one, and finds it at the first overload.
	next, why, limit := Step(l.RatePerSecond, c.limits[l.SaleID], r, l.AutotuneMin, l.AutotuneMax, c.opts.Targets)
	c.limits[l.SaleID] = limit
	if next == l.RatePerSecond {
		c.steps.WithLabelValues(l.SaleID, "hold").Inc()
		return nil
	}
	version := l.SettingsVersion
	_, err = c.lines.SetLineSettings(ctx, l.SaleID, ledger.SettingsChange{
		RatePerSecond: &next, AtVersion: &version, Actor: "autotune: " + why,
	})
	if errors.Is(err, ledger.ErrSettingsChanged) {
		return nil // ops changed it meanwhile: theirs stands; the next period starts from it
	}
	if err != nil {
		return err
	}
	step := "up"
	if next < l.RatePerSecond {
		step = "down"
	}
	c.steps.WithLabelValues(l.SaleID, step).Inc()
	c.log.Info("admission rate tuned", "sale", l.SaleID, "from", l.RatePerSecond, "to", next, "why", why)
	return nil
}
