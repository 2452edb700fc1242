package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// A rebuild that ops ask for waits up to rebuildDrain for the order writer
// to apply the pending intents, and may then take up to rebuildWork more to
// replay the journal and write Redis and the answer.
const (
	rebuildDrain = 30 * time.Second
	rebuildWork  = 10 * time.Second
)

// maxPending bounds how many pending intents one look reads.
const maxPending = 100_000

// Rebuild rebuilds a sale from Postgres on request and returns its books as
// they then stand. It stops the sale's reserves and sweeps (they answer
// please_wait), waits for the order writer to apply every pending intent,
// rebuilds Redis from Postgres and the reserve journal, and lets the sale
// go on. It runs on its own deadline (rebuildDrain + rebuildWork), not the
// caller's, which only lends its values. It fails with ErrRebuildRunning
// when another rebuild of the sale runs, and ErrDrainTimeout when the
// intents did not drain in time (nothing was rebuilt).
func (s *Service) Rebuild(ctx context.Context, saleID string) (Books, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildDrain+rebuildWork)
	defer cancel()
	sale, err := s.catalog.Get(ctx, saleID)
	if err != nil {
		return Books{}, err
	}
	_, err = s.rebuild(ctx, sale, rebuildDrain)
	if errors.Is(err, checkout.ErrRebuildInProgress) {
		// Not wrapped: to the caller of a rebuild this is a conflict, not
		// the "try again" it means on the shopper's paths.
		return Books{}, fmt.Errorf("sale %s: %w", saleID, ErrRebuildRunning)
	}
	if err != nil {
		return Books{}, err
	}
	return s.books(ctx, sale)
}

// rebuilt is what a rebuild put back from the reserve journal.
type rebuilt struct {
	// Restored are journaled holds the ledger never got (Redis lost them
	// with their intents) and now has.
	Restored []intent.Intent
	// Refused are journaled holds Postgres would not take (no stock, or the
	// account holds another): recorded cancelled, with the reason.
	Refused []intent.Intent
}

// rebuild rebuilds one sale (see rebuildSale) and reports what it put back
// from the reserve journal: counted, and logged as an error for every hold
// it could not restore.
func (s *Service) rebuild(ctx context.Context, sale ledger.Sale, drain time.Duration) (rebuilt, error) {
	res, err := s.rebuildSale(ctx, sale, drain)
	if err != nil {
		return res, fmt.Errorf("rebuild sale %s: %w", sale.ID, err)
	}
	s.m.restored.Add(float64(len(res.Restored)))
	s.m.lost.Add(float64(len(res.Refused)))
	if len(res.Refused) > 0 {
		ids := make([]string, len(res.Refused))
		for i, in := range res.Refused {
			ids[i] = in.ReservationID
		}
		s.log.Error("granted holds lost with redis could not be restored; they are cancelled",
			"sale", sale.ID, "lost", len(ids), "reservations", ids)
	}
	s.log.Warn("sale rebuilt from postgres", "sale", sale.ID, "restored_from_journal", len(res.Restored),
		"lost", len(res.Refused))
	return res, nil
}

// rebuildSale makes a sale's Redis state agree with Postgres again, after a
// Redis failover lost acknowledged writes or when Redis restarted empty: it
// stops the sale's reserves and sweeps (they answer "try again"), waits up
// to drain for the order writer to apply every pending intent, applies the
// journaled reserves the ledger never got, replaces Redis's counters, holds
// and account keys with Postgres's under a new epoch, and lets the sale go
// on.
func (s *Service) rebuildSale(ctx context.Context, sale ledger.Sale, drain time.Duration) (res rebuilt, err error) {
	token, err := s.checkout.BeginRebuild(ctx, sale.ID, drain+time.Minute)
	if err != nil {
		return rebuilt{}, err
	}
	defer func() {
		if endErr := s.checkout.EndRebuild(context.WithoutCancel(ctx), sale.ID, token); endErr != nil && err == nil {
			err = endErr
		}
	}()
	deadline := time.Now().Add(drain)
	for {
		pending, err := s.unapplied(ctx, sale.ID)
		if err != nil {
			return rebuilt{}, err
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return rebuilt{}, fmt.Errorf("sale %s: %d intents pending: %w", sale.ID, len(pending), ErrDrainTimeout)
		}
		select {
		case <-ctx.Done():
			return rebuilt{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s.fromLedger(ctx, sale)
}

// unapplied returns the intents of a sale that Postgres has not applied
// yet: in the stream, unacknowledged, and not recorded as applied (an entry
// read but not yet acknowledged may already be committed).
func (s *Service) unapplied(ctx context.Context, sale string) ([]intent.Intent, error) {
	entries, err := s.checkout.PendingIntents(ctx, sale, maxPending)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Intent.ID)
	}
	applied, err := s.ledger.AppliedAmong(ctx, sale, ids)
	if err != nil {
		return nil, err
	}
	var out []intent.Intent
	for _, e := range entries {
		if e.Err == nil && !applied[e.Intent.ID] {
			out = append(out, e.Intent)
		}
	}
	return out, nil
}

// fromLedger writes Postgres's view of a sale into Redis. First it applies
// the journaled reserves the ledger never got (Redis lost them with their
// intents), then counts as sold every unit Postgres knows was paid for (a
// pay that Redis lost with its intents must not come back as a held unit
// that expires).
func (s *Service) fromLedger(ctx context.Context, sale ledger.Sale) (rebuilt, error) {
	// Postgres moves to a new epoch first: a journal write still in flight
	// for a grant of the old one waits for this, then finds its epoch gone
	// and is not promised, so every grant ever promised is in the journal
	// the replay below reads. Should the Redis write at the end fail, the
	// next check sees a Redis epoch Postgres did not record and rebuilds
	// again, rather than trusting half a rebuild.
	epoch, err := checkout.NewEpoch()
	if err != nil {
		return rebuilt{}, err
	}
	replid, err := s.checkout.ReplicationID(ctx, sale.ID)
	if err != nil {
		return rebuilt{}, err
	}
	if _, err := s.ledger.SetRedisEpoch(ctx, sale.ID, epoch, replid, false); err != nil {
		return rebuilt{}, err
	}
	var res rebuilt
	if res.Restored, res.Refused, err = s.ledger.Replay(ctx, sale.ID, s.opts.Clock.Now()); err != nil {
		return rebuilt{}, err
	}
	if _, err := s.ledger.SettlePaid(ctx, sale.ID); err != nil {
		return res, err
	}
	rows, err := s.ledger.Inventory(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	live, err := s.ledger.LiveReservations(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	isLive := make(map[string]bool, len(live))
	for _, r := range live {
		isLive[r.ID] = true
	}
	// Holds Redis believes in but Postgres does not: they take Postgres's
	// status, or cancelled when Postgres never heard of them.
	held, err := s.checkout.HeldIDs(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	var gone []string
	for _, id := range held {
		if !isLive[id] {
			gone = append(gone, id)
		}
	}
	statuses, err := s.ledger.Statuses(ctx, gone)
	if err != nil {
		return res, err
	}
	settled := make(map[string]intent.Status, len(gone))
	for _, id := range gone {
		settled[id] = intent.Cancelled
		if st, ok := statuses[id]; ok {
			settled[id] = st
		}
	}
	grants, err := s.ledger.Grants(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	burned := make([]checkout.Burned, len(grants))
	for i, g := range grants {
		burned[i] = checkout.Burned{Account: g.Account, TokenID: g.TokenID, IdempotencyKey: g.IdempotencyKey, ReservationID: g.ReservationID}
	}
	return res, s.checkout.Rebuild(ctx, sale.ID, epoch, rows, live, settled, burned)
}
