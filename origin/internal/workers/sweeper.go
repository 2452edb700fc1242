package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/checkout"
)

// SweeperOptions tune the hold sweeper; zero values take the defaults.
type SweeperOptions struct {
	// Interval between sweeps; 0 means DefaultSweepInterval (tests build
	// sweepers without a Config; the origin's Config starts from it).
	Interval time.Duration
	// Batch caps the holds released per script round; 0 means 500.
	Batch int
}

// Sweeper releases expired, unpaid holds by scanning each sale's expiry
// index. Any number of origins may sweep at once: the release script lets
// exactly one of them release a given hold.
type Sweeper struct {
	redis *checkout.Store
	sales Sales
	opts  SweeperOptions
	log   *slog.Logger

	released prometheus.Counter
	failures prometheus.Counter
}

// DefaultSweepInterval is the pause between sweeps unless told otherwise.
const DefaultSweepInterval = 200 * time.Millisecond

// NewSweeper returns a sweeper; Run starts it.
func NewSweeper(rs *checkout.Store, sales Sales, opts SweeperOptions, log *slog.Logger, reg prometheus.Registerer) *Sweeper {
	if opts.Interval <= 0 {
		opts.Interval = DefaultSweepInterval
	}
	if opts.Batch <= 0 {
		opts.Batch = 500
	}
	s := &Sweeper{
		redis: rs, sales: sales, opts: opts, log: log,
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_sweeper_released_total",
			Help: "Expired holds whose unit this origin returned to stock.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_sweeper_failures_total",
			Help: "Sweeps that failed and will be tried again.",
		}),
	}
	if reg != nil {
		reg.MustRegister(s.released, s.failures)
	}
	return s
}

// Run sweeps until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(ctx)
		}
	}
}

// Sweep releases every hold that is due now, in every sale, and returns how
// many this call released.
func (s *Sweeper) Sweep(ctx context.Context) int {
	total := 0
	for _, sale := range s.sales.SaleIDs() {
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := s.redis.ReleaseDue(sctx, sale, s.opts.Batch)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					s.failures.Inc()
					s.log.Warn("sweep failed", "sale", sale, "err", err)
				}
				break
			}
			total += n
			s.released.Add(float64(n))
			if n < s.opts.Batch {
				break
			}
		}
	}
	return total
}
