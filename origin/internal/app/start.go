package app

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// The origin opens its listeners before it has reached Redis and Postgres
// and waits for them in the background, answering /readyz 503 and its sale,
// line and webhook routes please_wait meanwhile (api.Deps.Ready). A process
// that exited instead would, under an orchestrator, sit in a crash loop's
// back-off for minutes after its dependencies were back.

// Start-up retries: the first after startRetryMin, each wait twice the
// last, up to startRetryMax. Each attempt has startAttemptBudget, the whole
// start-up's budget when it did not retry (migrations included).
const (
	startRetryMin      = 100 * time.Millisecond
	startRetryMax      = 5 * time.Second
	startAttemptBudget = 30 * time.Second
)

// startStep is one thing the origin does before it takes requests.
type startStep struct {
	name string // what the origin waits for, in logs and /readyz
	run  func(context.Context) error
}

// startSteps are Connect's steps, in order. Each is safe to repeat.
func (a *App) startSteps() []startStep {
	return []startStep{
		{"redis", func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() }},
		{"postgres", a.pool.Ping},
		{"postgres migrations", func(ctx context.Context) error { return ledger.Migrate(ctx, a.pool) }},
		{"the catalog of sales", a.Catalog.Refresh},
		// A Redis that restarted empty, or failed over, may have lost
		// sales: put back, from Postgres, those that are not over, before
		// taking any request.
		{"the check of redis for lost sales", func(ctx context.Context) error { return a.Sales.CheckCurrent(ctx, 0) }},
	}
}

// Ready reports whether the origin takes requests and, when it does not,
// what it waits for (api.Deps.Ready).
func (a *App) Ready() (ready bool, waitingFor string) {
	if p := a.waitingFor.Load(); p != nil {
		return false, *p
	}
	return true, ""
}

// waitFor marks the origin not ready, waiting for name.
func (a *App) waitFor(name string) { a.waitingFor.Store(&name) }

// readyGauge is flashgate_origin_ready, the metric of Ready.
func (a *App) readyGauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashgate_origin_ready",
		Help: "1 once this origin has reached Redis and Postgres and takes requests (GET /readyz answers 200), else 0."},
		func() float64 {
			if ready, _ := a.Ready(); ready {
				return 1
			}
			return 0
		})
}

// Connect makes the origin ready in one attempt: it reaches Redis and
// Postgres, applies migrations, loads the catalog and rebuilds the sales
// Redis has lost (startSteps). It returns the first failure, named after
// its step. On a ready origin it does nothing. Start retries it; tests and
// benchmarks that need a ready origin at once call it themselves.
func (a *App) Connect(ctx context.Context) error {
	_, err := a.connect(ctx, a.startSteps())
	return err
}

// connect is Connect that also returns how far it got: the index of the
// step that failed, or len(steps) when the origin is ready.
func (a *App) connect(ctx context.Context, steps []startStep) (reached int, err error) {
	if ready, _ := a.Ready(); ready {
		return len(steps), nil
	}
	for i, s := range steps {
		a.waitFor(s.name)
		if err := s.run(ctx); err != nil {
			return i, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	a.waitingFor.Store(nil)
	return len(steps), nil
}

// Start runs, in the background, Connect until it succeeds (at once when it
// already has), then the workers: catalog refresh, order writer, sweeper,
// the watch for sales Redis has lost (sales.Service.Run), and the payment
// reconciler. Stop ends whichever is running.
func (a *App) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopWorkers = cancel
	a.workers.Add(1)
	go func() {
		defer a.workers.Done()
		if a.waitReady(ctx) {
			a.startWorkers(ctx)
		}
	}()
}

// waitReady tries Connect, backing off between attempts, until the origin
// is ready (true) or ctx ends (false).
func (a *App) waitReady(ctx context.Context) bool {
	steps := a.startSteps()
	failing, wait := -1, startRetryMin
	for {
		c, cancel := context.WithTimeout(ctx, startAttemptBudget)
		reached, err := a.connect(c, steps)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		a.logAttempt(steps, failing, reached, err)
		if err == nil {
			return true
		}
		failing = reached
		if !pause(ctx, wait) {
			return false
		}
		wait = min(2*wait, startRetryMax)
	}
}

// logAttempt logs what changed since the last attempt, which failed at step
// failing (-1: none): a step got past, a step began failing, the origin is
// ready. An attempt failing where the last one did logs nothing, so a
// dependency down for minutes costs two lines, not one per retry.
func (a *App) logAttempt(steps []startStep, failing, reached int, err error) {
	if failing >= 0 && reached > failing {
		a.log.Info("origin start-up: " + steps[failing].name + " recovered")
	}
	switch {
	case err == nil:
		a.log.Info("origin ready")
	case reached != failing:
		a.log.Warn("origin start-up waiting for "+steps[reached].name, "err", err)
	}
}

// pause waits d, or less if ctx ends first; it reports whether ctx is
// still going.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// startWorkers runs each worker until ctx ends.
func (a *App) startWorkers(ctx context.Context) {
	runs := []func(context.Context){a.Catalog.Run, a.Writer.Run, a.Sweeper.Run, a.Sales.Run, a.Autotune.Run}
	if a.Orders != nil && a.cfg.ReconcileInterval > 0 {
		runs = append(runs, a.Orders.Run)
	}
	for _, run := range runs {
		a.workers.Add(1)
		go func() {
			defer a.workers.Done()
			run(ctx)
		}()
	}
}
