// Package workers holds the origin's background jobs: the order writer,
// which carries intents from Redis into the Postgres ledger, and the hold
// sweeper, which returns expired holds' units.
package workers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Sales lists the sales the workers look after.
type Sales interface {
	SaleIDs() []string
}

// WriterOptions tune the order writer; zero values take the defaults.
type WriterOptions struct {
	// Consumer names this writer in the stream's consumer group; it should be
	// stable across restarts of one origin, so a restarted writer takes back
	// its own unacknowledged entries at once. Required.
	Consumer string
	// BatchSize caps intents per Postgres transaction. Required
	// (app.Config.WriterBatch).
	BatchSize int
	// Block is how long one read waits for new intents; 0 means 1 s.
	Block time.Duration
	// ClaimIdle is the lease of a sale's stream: a writer that stops
	// renewing it (it died) is taken over after this long, and its
	// unacknowledged intents with it. Required (app.Config.WriterClaimIdle).
	ClaimIdle time.Duration
	// Retry is the pause after a failed batch; 0 means 500 ms.
	Retry time.Duration
	// Discover is how often the writer looks for new sales; 0 means 1 s.
	Discover time.Duration
}

// Writer applies every sale's intents to the ledger: it reads the sale's
// stream in the writers' group, applies a batch in one transaction, cancels
// in Redis what Postgres refused, and acknowledges only after the commit.
// One writer at a time reads a sale's stream (a lease in Redis), so intents
// reach Postgres in stream order; a writer that died is taken over after
// ClaimIdle, its unacknowledged entries first. The ledger ignores intents
// it has already applied.
type Writer struct {
	redis  *checkout.Store
	ledger *ledger.Store
	sales  Sales
	opts   WriterOptions
	log    *slog.Logger

	applied    *prometheus.CounterVec
	refused    prometheus.Counter
	payRefused prometheus.Counter
	failures   prometheus.Counter
	parked     prometheus.Counter
	batch      prometheus.Histogram

	// afterCommit, when set, runs between a batch's commit and its
	// acknowledgement; tests use it to kill a writer at the worst moment.
	afterCommit func(ctx context.Context)
}

// NewWriter returns a writer; Run starts it.
func NewWriter(rs *checkout.Store, ls *ledger.Store, sales Sales, opts WriterOptions, log *slog.Logger, reg prometheus.Registerer) *Writer {
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 500 * time.Millisecond
	}
	if opts.Discover <= 0 {
		opts.Discover = time.Second
	}
	w := &Writer{
		redis: rs, ledger: ls, sales: sales, opts: opts, log: log,
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_writer_intents_total",
			Help: "Intents handled by the order writer, by result (applied, duplicate, malformed).",
		}, []string{"result"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_writer_refused_total",
			Help: "Reserves Postgres refused, whose Redis holds were cancelled.",
		}),
		payRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_writer_pay_refused_total",
			Help: "Payments for reservations Postgres does not hold; their orders owe refunds (alert on any).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_writer_batch_failures_total",
			Help: "Batches that failed to apply and will be retried.",
		}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_writer_parked_total",
			Help: "Intents Postgres refused for good, set aside in parked_intents for a person to look at.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flashgate_writer_batch_size",
			Help:    "Intents per applied batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 6),
		}),
	}
	if reg != nil {
		reg.MustRegister(w.applied, w.refused, w.payRefused, w.failures, w.parked, w.batch)
	}
	return w
}

// Run writes until ctx ends, one loop per sale, and returns when every loop
// has stopped (after finishing the batch in hand).
func (w *Writer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	running := map[string]bool{}
	t := time.NewTicker(w.opts.Discover)
	defer t.Stop()
	for {
		for _, id := range w.sales.SaleIDs() {
			if !running[id] {
				running[id] = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.runSale(ctx, id)
				}()
			}
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		}
	}
}

// maxStrikes is how often the same batch may fail for good before an
// intent that fails alone is parked anyway (see applyEach).
const maxStrikes = 5

func (w *Writer) runSale(ctx context.Context, sale string) {
	log := w.log.With("sale", sale, "consumer", w.opts.Consumer)
	defer func() {
		// Let another writer take over at once rather than after ClaimIdle.
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = w.redis.Unlease(stop, sale, w.opts.Consumer)
	}()
	own := true           // first take back what this consumer read before a restart
	mustTakeOver := false // the lease was just taken: claim what others left first
	var strikeID string
	strikes := 0
	for ctx.Err() == nil {
		lease, err := w.redis.Lease(ctx, sale, w.opts.Consumer, w.opts.ClaimIdle)
		if err != nil || lease == checkout.LeaseHeldByOther {
			if err != nil && ctx.Err() == nil {
				log.Warn("order writer cannot take its lease", "err", err)
			}
			sleep(ctx, min(w.opts.Block, w.opts.ClaimIdle/4))
			continue
		}
		if lease == checkout.LeaseTaken {
			mustTakeOver = true
		}
		if mustTakeOver {
			// Until every entry another writer left is claimed and applied,
			// nothing newer is read: the stream's order is the ledger's.
			if err := w.redis.EnsureGroup(ctx, sale); err != nil {
				log.Warn("order writer cannot create its group", "err", err)
				sleep(ctx, w.opts.Retry)
				continue
			}
			if !w.takeOver(ctx, log, sale) {
				sleep(ctx, w.opts.Retry)
				continue
			}
			mustTakeOver, own = false, false
		}
		entries, err := w.redis.ReadIntents(ctx, sale, w.opts.Consumer, w.opts.BatchSize, w.opts.Block, own)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("order writer cannot read", "err", err)
				sleep(ctx, w.opts.Retry)
				// Redis may have lost the stream and its group (a restart
				// without persistence, a failover): make them again.
				if err := w.redis.EnsureGroup(ctx, sale); err != nil {
					log.Warn("order writer cannot create its group", "err", err)
				}
			}
			continue
		}
		if own && len(entries) == 0 {
			own = false // own pending list is empty: go on with new entries
			continue
		}
		if len(entries) == 0 {
			continue
		}
		if entries[0].Intent.ID == strikeID {
			strikes++
		} else {
			strikeID, strikes = entries[0].Intent.ID, 0
		}
		if !w.process(ctx, log, sale, entries, strikes >= maxStrikes) {
			own = true // unacknowledged entries wait in our pending list
			sleep(ctx, w.opts.Retry)
		}
	}
}

// takeOver claims, in stream order, every entry another writer read and
// left unacknowledged (it died or gave the lease up), and applies them; it
// reports whether all went through.
func (w *Writer) takeOver(ctx context.Context, log *slog.Logger, sale string) bool {
	cursor := "0-0"
	for ctx.Err() == nil {
		entries, next, err := w.redis.ClaimIntents(ctx, sale, w.opts.Consumer, 0, w.opts.BatchSize, cursor)
		if err != nil {
			log.Warn("order writer cannot claim", "err", err)
			return false
		}
		if len(entries) > 0 && !w.process(ctx, log, sale, entries, false) {
			return false
		}
		cursor = next
		if cursor == "0-0" || len(entries) == 0 {
			return true
		}
	}
	return false
}

// process applies one batch and acknowledges it; it reports whether the
// batch is done with (false leaves it pending for a retry).
//
// force parks an intent Postgres refuses for good even when it fails alone
// (the batch has struck out maxStrikes times).
func (w *Writer) process(ctx context.Context, log *slog.Logger, sale string, entries []checkout.Entry, force bool) bool {
	ids := make([]string, 0, len(entries))
	batch := make([]intent.Intent, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Intent.ID)
		if e.Err != nil {
			// Only our scripts write the stream, so this is a bug, not
			// input: say so loudly and do not block the sale on it.
			log.Error("order writer skips a malformed intent", "id", e.Intent.ID, "err", e.Err)
			w.applied.WithLabelValues("malformed").Inc()
			continue
		}
		batch = append(batch, e.Intent)
	}
	// The batch is finished even if ctx ends meanwhile: a commit must not
	// be cut off between Postgres and the acknowledgement without need.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if len(batch) > 0 {
		res, err := w.ledger.Apply(work, sale, batch)
		if err != nil && ledger.IsPermanent(err) {
			// One intent Postgres will never take must not hold back the
			// rest of the sale: apply them one by one and park the culprit.
			res, err = w.applyEach(work, log, sale, batch, force)
		}
		if err != nil {
			w.failures.Inc()
			log.Warn("order writer batch failed; will retry", "intents", len(batch), "err", err)
			return false
		}
		w.batch.Observe(float64(len(batch)))
		w.applied.WithLabelValues("applied").Add(float64(res.New))
		w.applied.WithLabelValues("duplicate").Add(float64(res.Duplicates))
		if w.afterCommit != nil {
			w.afterCommit(ctx)
			if ctx.Err() != nil {
				return false
			}
		}
		if len(res.PayRefused) > 0 {
			// Redis sold what Postgres never held: the orders now owe
			// refunds (the reconciler issues them) and the ledger shows
			// the drift until a rebuild.
			w.payRefused.Add(float64(len(res.PayRefused)))
			for _, in := range res.PayRefused {
				log.Error("postgres holds no reservation for a payment; its order owes a refund",
					"reservation", in.ReservationID, "account", in.Account, "sku", in.SKU)
			}
		}
		if len(res.Refused) > 0 {
			holds := make([]checkout.Hold, len(res.Refused))
			for i, r := range res.Refused {
				holds[i] = checkout.Hold{ID: r.Intent.ReservationID, SKU: r.Intent.SKU, Account: r.Intent.Account, ReturnUnit: !r.NoStock}
			}
			n, err := w.redis.Cancel(work, sale, holds)
			if err != nil {
				log.Warn("order writer cannot cancel refused holds; will retry", "err", err)
				return false
			}
			w.refused.Add(float64(n))
			if n > 0 {
				log.Warn("postgres refused reserves; their holds were cancelled", "cancelled", n)
			}
		}
	}
	if err := w.redis.AckIntents(work, sale, ids); err != nil {
		log.Warn("order writer cannot acknowledge; entries will be seen again", "err", err)
		return false
	}
	return true
}

// applyEach applies a batch one intent at a time and parks those Postgres
// refuses for good — but only when others went through, or when forced:
// when every intent fails, the fault is likely Postgres's or ours as a
// whole (a broken migration, a trigger), not one intent's, so the batch
// waits and is retried, until it has struck out (force).
// A passing failure (Postgres unreachable) stops it; the intents are applied
// again later and the ledger skips those done.
func (w *Writer) applyEach(ctx context.Context, log *slog.Logger, sale string, batch []intent.Intent, force bool) (ledger.Applied, error) {
	var total ledger.Applied
	type failure struct {
		in  intent.Intent
		err error
	}
	var failed []failure
	for _, in := range batch {
		res, err := w.ledger.Apply(ctx, sale, []intent.Intent{in})
		if err != nil && ledger.IsPermanent(err) {
			failed = append(failed, failure{in, err})
			continue
		}
		if err != nil {
			return total, err
		}
		total.New += res.New
		total.Duplicates += res.Duplicates
		total.Refused = append(total.Refused, res.Refused...)
		total.PayRefused = append(total.PayRefused, res.PayRefused...)
	}
	if len(failed) == len(batch) && !force {
		return total, failed[0].err
	}
	for _, f := range failed {
		parked, err := w.ledger.Park(ctx, sale, f.in, f.err.Error())
		if err != nil {
			return total, err
		}
		if parked {
			w.parked.Inc()
			log.Error("postgres refuses an intent for good; parked it", "intent", f.in.ID, "kind", f.in.Kind,
				"reservation", f.in.ReservationID, "err", f.err)
		}
	}
	return total, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
