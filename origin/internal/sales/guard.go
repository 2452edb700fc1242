package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// The guard finds sales whose state Redis has lost, reports each loss, and
// rebuilds the sale from Postgres and the reserve journal.
//
// Loss is detected, not inferred from a missing key: every load and rebuild
// gives the sale a new epoch in Redis and records it in Postgres first, and
// every granted reserve is numbered in its epoch and journaled in Postgres
// before it is answered. So a Redis whose epoch is missing or is not the
// recorded one has lost the sale's state (restarted empty, flushed, an empty
// replica promoted), and one whose sequence is behind the journal's has lost
// its latest writes (a replica promoted before it caught up).

// CheckCurrent rebuilds every current sale (not ended) whose state Redis
// has lost, waiting up to drain for each one's pending intents. The origin
// calls it before taking requests: a Redis that restarted empty, or failed
// over, may have lost sales.
func (s *Service) CheckCurrent(ctx context.Context, drain time.Duration) error {
	now := s.opts.Clock.Now()
	var current []ledger.Sale
	for _, sale := range s.catalog.All() {
		if now.Before(sale.EndsAt) {
			current = append(current, sale)
		}
	}
	_, err := s.check(ctx, current, drain)
	return err
}

// Run checks, every CheckEvery, that Redis still holds the current sales'
// state (a failover, a flush, a restart without data) and restores lost
// sales, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	every := s.opts.CheckEvery
	t := s.opts.Clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c, cancel := context.WithTimeout(ctx, every+time.Minute)
			if err := s.CheckCurrent(c, max(every, time.Second)); err != nil && ctx.Err() == nil {
				s.log.Warn("cannot check redis for lost sales", "err", err)
			}
			cancel()
		}
	}
}

// check looks at each sale and rebuilds those Redis has lost, waiting up to
// drain for intents still in the stream. A sale being rebuilt by another
// origin is left to it; a sale whose intents do not drain in time is left
// for the next call (its reserves answer please_wait meanwhile). A sale that
// cannot be checked does not stop the others: the errors are joined. It
// returns the sales it rebuilt.
func (s *Service) check(ctx context.Context, sales []ledger.Sale, drain time.Duration) (rebuilt []string, err error) {
	if len(sales) == 0 {
		return nil, nil
	}
	var errs []error
	for _, sale := range sales {
		did, err := s.checkSale(ctx, sale, drain)
		if err != nil {
			errs = append(errs, fmt.Errorf("sale %s: %w", sale.ID, err))
		}
		if did {
			rebuilt = append(rebuilt, sale.ID)
		}
	}
	return rebuilt, errors.Join(errs...)
}

func (s *Service) checkSale(ctx context.Context, sale ledger.Sale, drain time.Duration) (bool, error) {
	replid, err := s.checkout.ReplicationID(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	// Postgres first: a reserve is journaled only after Redis numbered it,
	// so the journal read first can only be behind Redis read after, unless
	// Redis lost writes.
	epoch, recordedReplid, journalSeq, err := s.ledger.RedisEpoch(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	redisEpoch, redisSeq, err := s.checkout.Meta(ctx, sale.ID)
	if err != nil {
		return false, err
	}
	busy, err := s.checkout.RebuildInProgress(ctx, sale.ID)
	if err != nil || busy {
		return false, err
	}
	again, _, _, err := s.ledger.RedisEpoch(ctx, sale.ID)
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
		_, err := s.ledger.SetRedisEpoch(ctx, sale.ID, redisEpoch, replid, true)
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
		id, fresh, err := s.ledger.RecordLoss(ctx, ledger.Loss{Sale: sale.ID, Kind: kind, Epoch: epoch,
			RedisEpoch: redisEpoch, RedisSeq: redisSeq, JournalSeq: journalSeq})
		if err != nil {
			return false, err
		}
		lossID = id
		if fresh {
			s.m.losses.WithLabelValues(string(kind)).Inc()
			if kind == ledger.LossServerReplaced {
				s.log.Warn("another redis server holds the sale (a failover or a restart); rebuilding it from postgres and the reserve journal",
					"sale", sale.ID, "epoch", epoch)
			} else {
				s.log.Error("redis lost the state of a sale; rebuilding it from postgres and the reserve journal",
					"sale", sale.ID, "kind", kind, "epoch", epoch, "redis_epoch", redisEpoch,
					"redis_seq", redisSeq, "journal_seq", journalSeq)
			}
		}
	}
	res, err := s.rebuild(ctx, sale, drain)
	if errors.Is(err, checkout.ErrRebuildInProgress) || errors.Is(err, ErrDrainTimeout) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if lossID != 0 {
		if err := s.ledger.FinishLoss(ctx, lossID, len(res.Restored), len(res.Refused)); err != nil {
			return true, err
		}
	}
	return true, nil
}
