// Package rebuild makes a sale's Redis state agree with Postgres again:
// after a Redis failover lost acknowledged writes, or when Redis restarted
// empty. Postgres has the last word on stock.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// ErrDrainTimeout: the intents did not drain in time; nothing was rebuilt.
var ErrDrainTimeout = errors.New("rebuild: pending intents did not drain in time")

// maxPending bounds how many pending intents one look reads.
const maxPending = 100_000

// Unapplied returns the intents of a sale that Postgres has not applied
// yet: in the stream, unacknowledged, and not recorded as applied (an entry
// read but not yet acknowledged may already be committed).
func Unapplied(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sale string) ([]intent.Intent, error) {
	entries, err := rs.PendingIntents(ctx, sale, maxPending)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Intent.ID)
	}
	applied, err := ls.AppliedAmong(ctx, sale, ids)
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

// Result is what a rebuild put back from the reserve journal.
type Result struct {
	// Restored are journaled holds the ledger never got (Redis lost them
	// with their intents) and now has.
	Restored []intent.Intent
	// Refused are journaled holds Postgres would not take (no stock, or the
	// account holds another): recorded cancelled, with the reason.
	Refused []intent.Intent
}

// Sale rebuilds one sale: it stops the sale's reserves and sweeps (they
// answer "try again"), waits up to drain for the order writer to apply
// every pending intent, applies the journaled reserves the ledger never
// got, replaces Redis's counters, holds and account keys with Postgres's
// under a new epoch, and lets the sale go on.
func Sale(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sale ledger.Sale, drain time.Duration) (res Result, err error) {
	token, err := rs.BeginRebuild(ctx, sale.ID, drain+time.Minute)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if endErr := rs.EndRebuild(context.WithoutCancel(ctx), sale.ID, token); endErr != nil && err == nil {
			err = endErr
		}
	}()
	deadline := time.Now().Add(drain)
	for {
		pending, err := Unapplied(ctx, rs, ls, sale.ID)
		if err != nil {
			return Result{}, err
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("sale %s: %d intents pending: %w", sale.ID, len(pending), ErrDrainTimeout)
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fromLedger(ctx, rs, ls, sale)
}

// fromLedger writes Postgres's view of a sale into Redis. First it applies
// the journaled reserves the ledger never got (Redis lost them with their
// intents), then counts as sold every unit Postgres knows was paid for (a
// pay that Redis lost with its intents must not come back as a held unit
// that expires).
func fromLedger(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sale ledger.Sale) (Result, error) {
	// Postgres moves to a new epoch first: a journal write still in flight
	// for a grant of the old one waits for this, then finds its epoch gone
	// and is not promised, so every grant ever promised is in the journal
	// the replay below reads. Should the Redis write at the end fail, the
	// next check sees a Redis epoch Postgres did not record and rebuilds
	// again, rather than trusting half a rebuild.
	epoch, err := checkout.NewEpoch()
	if err != nil {
		return Result{}, err
	}
	replid, err := rs.ReplicationID(ctx)
	if err != nil {
		return Result{}, err
	}
	if _, err := ls.SetRedisEpoch(ctx, sale.ID, epoch, replid, false); err != nil {
		return Result{}, err
	}
	var res Result
	if res.Restored, res.Refused, err = ls.Replay(ctx, sale.ID, time.Now()); err != nil {
		return Result{}, err
	}
	if _, err := ls.SettlePaid(ctx, sale.ID); err != nil {
		return res, err
	}
	rows, err := ls.Inventory(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	live, err := ls.LiveReservations(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	isLive := make(map[string]bool, len(live))
	for _, r := range live {
		isLive[r.ID] = true
	}
	// Holds Redis believes in but Postgres does not: they take Postgres's
	// status, or cancelled when Postgres never heard of them.
	held, err := rs.HeldIDs(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	var gone []string
	for _, id := range held {
		if !isLive[id] {
			gone = append(gone, id)
		}
	}
	statuses, err := ls.Statuses(ctx, gone)
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
	grants, err := ls.Grants(ctx, sale.ID)
	if err != nil {
		return res, err
	}
	burned := make([]checkout.Burned, len(grants))
	for i, g := range grants {
		burned[i] = checkout.Burned{Account: g.Account, TokenID: g.TokenID, IdempotencyKey: g.IdempotencyKey, ReservationID: g.ReservationID}
	}
	return res, rs.Rebuild(ctx, sale.ID, epoch, rows, live, settled, burned)
}
