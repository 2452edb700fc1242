package autotune

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Signals reads what the back end showed of a sale since the last read.
type Signals interface {
	Read(ctx context.Context, sale string) (Reading, error)
}

// Lines is the ledger as the controller uses it: ledger.Store.
type Lines interface {
	TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error)
	AutotunedLines(ctx context.Context, now time.Time) ([]ledger.Line, error)
	SetLineSettings(ctx context.Context, sale string, change ledger.SettingsChange) (ledger.Line, error)
}

var _ Lines = (*ledger.Store)(nil)

// Options tune a Controller; zero values take the defaults.
type Options struct {
	// Period is how often the rate may change; 0 means 5 s, the edges'
	// sync interval (a change reaches every edge within one).
	Period  time.Duration
	Targets Targets // zero: DefaultTargets
	Clock   func() time.Time
}

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
	limits map[string]float64 // by sale: the rate at which the back end last showed its limit (Step)
}

// New returns a Controller; Run starts it.
func New(lines Lines, signals Signals, opts Options, log *slog.Logger, reg prometheus.Registerer) *Controller {
	if opts.Period <= 0 {
		opts.Period = 5 * time.Second
	}
	if opts.Targets == (Targets{}) {
		opts.Targets = DefaultTargets()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
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

// Run tunes every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Period)
	defer t.Stop()
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

// Tune runs one period, if no other origin is tuning: for each open sale
// with autotune on, it reads the signals, steps the rate, and records a
// change like an operator's — unless ops changed the settings meanwhile.
func (c *Controller) Tune(ctx context.Context) error {
	unlock, ok, err := c.lines.TryLock(ctx, lockName)
	if err != nil || !ok {
		return err
	}
	defer unlock()
	lines, err := c.lines.AutotunedLines(ctx, c.opts.Clock())
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range lines {
		if err := c.tune(ctx, l); err != nil {
			c.steps.WithLabelValues(l.SaleID, "failed").Inc()
			errs = append(errs, fmt.Errorf("sale %s: %w", l.SaleID, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) tune(ctx context.Context, l ledger.Line) error {
	r, err := c.signals.Read(ctx, l.SaleID)
	if err != nil {
		return err
	}
	// The limit is this origin's memory: another taking over the tuning
	// starts without one, and finds it at the first overload.
	c.mu.Lock()
	limit := c.limits[l.SaleID]
	c.mu.Unlock()
	next, why, limit := Step(l.RatePerSecond, limit, r, l.AutotuneMin, l.AutotuneMax, c.opts.Targets)
	c.mu.Lock()
	c.limits[l.SaleID] = limit
	c.mu.Unlock()
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
