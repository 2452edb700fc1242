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

// Sale rebuilds one sale: it stops the sale's reserves and sweeps (they
// answer "try again"), waits up to drain for the order writer to apply
// every pending intent, replaces Redis's counters, holds and account keys
// with Postgres's, and lets the sale go on.
func Sale(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sale ledger.Sale, drain time.Duration) (err error) {
	token, err := rs.BeginRebuild(ctx, sale.ID, drain+time.Minute)
	if err != nil {
		return err
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
			return err
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sale %s: %d intents pending: %w", sale.ID, len(pending), ErrDrainTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fromLedger(ctx, rs, ls, sale)
}

// fromLedger writes Postgres's view of a sale into Redis, first counting as
// sold every unit Postgres knows was paid for (a pay that Redis lost with
// its intents must not come back as a held unit that expires).
func fromLedger(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sale ledger.Sale) error {
	if _, err := ls.SettlePaid(ctx, sale.ID); err != nil {
		return err
	}
	rows, err := ls.Inventory(ctx, sale.ID)
	if err != nil {
		return err
	}
	stock := make(map[string]checkout.Counts, len(rows))
	for sku, st := range rows {
		stock[sku] = checkout.Counts{Total: st.Total, Available: st.Available, Held: st.Held, Sold: st.Sold}
	}
	liveRows, err := ls.LiveReservations(ctx, sale.ID)
	if err != nil {
		return err
	}
	live := make([]checkout.Reservation, len(liveRows))
	isLive := make(map[string]bool, len(liveRows))
	for i, r := range liveRows {
		live[i] = checkout.Reservation{ID: r.ID, Sale: r.Sale, SKU: r.SKU, Account: r.Account, Status: r.Status,
			IdempotencyKey: r.IdempotencyKey, ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, OrderID: r.OrderID}
		isLive[r.ID] = true
	}
	// Holds Redis believes in but Postgres does not: they take Postgres's
	// status, or cancelled when Postgres never heard of them.
	held, err := rs.HeldIDs(ctx, sale.ID)
	if err != nil {
		return err
	}
	var gone []string
	for _, id := range held {
		if !isLive[id] {
			gone = append(gone, id)
		}
	}
	statuses, err := ls.Statuses(ctx, gone)
	if err != nil {
		return err
	}
	settled := make(map[string]string, len(gone))
	for _, id := range gone {
		settled[id] = "cancelled"
		if st, ok := statuses[id]; ok {
			settled[id] = st
		}
	}
	return rs.Rebuild(ctx, sale.ID, stock, live, settled)
}

// Missing loads into Redis every sale of sales that Redis has lost
// entirely (no stock counters at all, as after a restart without
// persistence, or a failover to an empty replica), from Postgres, waiting
// up to drain for intents still in the stream. A sale another origin is
// rebuilding is left to it; a sale whose intents do not drain in time is
// left for the next call (its sale answers please_wait meanwhile).
func Missing(ctx context.Context, rs *checkout.Store, ls *ledger.Store, sales []ledger.Sale, drain time.Duration) (rebuilt []string, err error) {
	for _, sale := range sales {
		skus := make([]string, len(sale.SKUs))
		for i, k := range sale.SKUs {
			skus[i] = k.SKU
		}
		loaded, err := rs.Loaded(ctx, sale.ID, skus)
		if err != nil {
			return rebuilt, err
		}
		if loaded {
			continue
		}
		err = Sale(ctx, rs, ls, sale, drain)
		if errors.Is(err, checkout.ErrRebuildInProgress) || errors.Is(err, ErrDrainTimeout) {
			continue
		}
		if err != nil {
			return rebuilt, err
		}
		rebuilt = append(rebuilt, sale.ID)
	}
	return rebuilt, nil
}
