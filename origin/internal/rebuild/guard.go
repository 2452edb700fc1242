package rebuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Guard finds sales whose state Redis has lost, reports each loss, and
// rebuilds the sale from Postgres and the reserve journal.
//
// Loss is detected, not inferred from a missing key: every load and rebuild
// gives the sale a new epoch in Redis and records it in Postgres first, and
// every granted reserve is numbered in its epoch and journaled in Postgres
// before it is answered. So a Redis whose epoch is missing or is not the
// recorded one has lost the sale's state (restarted empty, flushed, an empty
// replica promoted), and one whose sequence is behind the journal's has lost
// its latest writes (a replica promoted before it caught up).
type Guard struct {
	redis  *checkout.Store
	ledger *ledger.Store
	log    *slog.Logger

	losses   *prometheus.CounterVec
	restored prometheus.Counter
	lost     prometheus.Counter
}

// NewGuard returns a Guard; its metrics are registered with reg.
func NewGuard(rs *checkout.Store, ls *ledger.Store, log *slog.Logger, reg prometheus.Registerer) *Guard {
	g := &Guard{
		redis: rs, ledger: ls, log: log,
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_redis_losses_total",
			Help: "Times Redis was found to have lost a sale's state, by how it was found (state_missing, epoch_foreign, sequence_behind).",
		}, []string{"kind"}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_reservations_restored_total",
			Help: "Granted holds that Redis lost and a rebuild put back from the reserve journal.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_reservations_lost_total",
			Help: "Granted holds that Redis lost and Postgres could not take back (cancelled, with the reason). Alert on any.",
		}),
	}
	reg.MustRegister(g.losses, g.restored, g.lost)
	return g
}

// Check looks at each sale and rebuilds those Redis has lost, waiting up to
// drain for intents still in the stream. A sale being rebuilt by another
// origin is left to it; a sale whose intents do not drain in time is left
// for the next call (its reserves answer please_wait meanwhile). A sale that
// cannot be checked does not stop the others: the errors are joined. It
// returns the sales it rebuilt.
func (g *Guard) Check(ctx context.Context, sales []ledger.Sale, drain time.Duration) (rebuilt []string, err error) {
	if len(sales) == 0 {
		return nil, nil
	}
	replid, err := g.redis.ReplicationID(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, sale := range sales {
		did, err := g.checkSale(ctx, sale, replid, drain)
		if err != nil {
			errs = append(errs, fmt.Errorf("sale %s: %w", sale.ID, err))
		}
		if did {
			rebuilt = append(rebuilt, sale.ID)
		}
	}
	return rebuilt, errors.Join(errs...)
}

func (g *Guard) checkSale(ctx context.Context, sale ledger.Sale, replid string, drain time.Duration) (bool, error) {
	// Postgres first: a reserve is journaled only after Redis numbered it,
	// so the journal read first can only be behind Redis read after, unless
	// Redis lost writes.
	epoch, recordedReplid, journalSeq, err := g.ledger.RedisEpoch(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	redisEpoch, redisSeq, err := g.redis.Meta(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	busy, err := g.redis.RebuildInProgress(ctx, sale.ID)
	if err != nil || busy {
		return false, err
	}
	again, _, _, err := g.ledger.RedisEpoch(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	if again != epoch {
		return false, nil // a rebuild moved the epoch meanwhile; look next time
	}

	var kind ledger.LossKind
	switch {
	case epoch == "" && redisEpoch != "":
		// Loaded, but Postgres never recorded the epoch (an origin stopped
		// between the two): record what Redis holds.
		_, err := g.ledger.SetRedisEpoch(ctx, sale.ID, redisEpoch, replid, true)
		return false, err
	case epoch == "":
		// Never loaded with an epoch (created before epochs, or a create
		// that did not finish): nothing was promised from this Redis under
		// an epoch, so there is nothing to report; build it from Postgres.
	case redisEpoch == "":
		kind = ledger.LossStateMissing
	case redisEpoch != epoch:
		kind = ledger.LossEpochForeign
	case redisSeq < journalSeq:
		kind = ledger.LossSequenceBehind
	case recordedReplid != "" && recordedReplid != replid:
		// Everything matches so far, but another server holds it: a
		// replica promoted, which may lack the last writes even where
		// the sequence has run on past the journal's.
		kind = ledger.LossServerReplaced
	default:
		return false, nil
	}

	var lossID int64
	if kind != "" {
		id, fresh, err := g.ledger.RecordLoss(ctx, ledger.Loss{Sale: sale.ID, Kind: kind, Epoch: epoch,
			RedisEpoch: redisEpoch, RedisSeq: redisSeq, JournalSeq: journalSeq})
		if err != nil {
			return false, err
		}
		lossID = id
		if fresh {
			g.losses.WithLabelValues(string(kind)).Inc()
			if kind == ledger.LossServerReplaced {
				g.log.Warn("another redis server holds the sale (a failover or a restart); rebuilding it from postgres and the reserve journal",
					"sale", sale.ID, "epoch", epoch)
			} else {
				g.log.Error("redis lost the state of a sale; rebuilding it from postgres and the reserve journal",
					"sale", sale.ID, "kind", kind, "epoch", epoch, "redis_epoch", redisEpoch,
					"redis_seq", redisSeq, "journal_seq", journalSeq)
			}
		}
	}
	res, err := g.Rebuild(ctx, sale, drain)
	if errors.Is(err, checkout.ErrRebuildInProgress) || errors.Is(err, ErrDrainTimeout) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if lossID != 0 {
		if err := g.ledger.FinishLoss(ctx, lossID, len(res.Restored), len(res.Refused)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Rebuild rebuilds one sale (see Sale) and reports what it put back from
// the reserve journal: counted, and logged as an error for every hold it
// could not restore.
func (g *Guard) Rebuild(ctx context.Context, sale ledger.Sale, drain time.Duration) (Result, error) {
	res, err := Sale(ctx, g.redis, g.ledger, sale, drain)
	if err != nil {
		return res, fmt.Errorf("rebuild sale %s: %w", sale.ID, err)
	}
	g.restored.Add(float64(len(res.Restored)))
	g.lost.Add(float64(len(res.Refused)))
	if len(res.Refused) > 0 {
		ids := make([]string, len(res.Refused))
		for i, in := range res.Refused {
			ids[i] = in.ReservationID
		}
		g.log.Error("granted holds lost with redis could not be restored; they are cancelled",
			"sale", sale.ID, "lost", len(ids), "reservations", ids)
	}
	g.log.Warn("sale rebuilt from postgres", "sale", sale.ID, "restored_from_journal", len(res.Restored),
		"lost", len(res.Refused))
	return res, nil
}
