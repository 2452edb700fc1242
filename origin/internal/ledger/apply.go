package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// Refusal is a reserve that Postgres would not record.
type Refusal struct {
	Intent intent.Intent
	// NoStock: Postgres had no unit for it (Redis counted one too many).
	// Otherwise the account already has a live reservation in this sale.
	NoStock bool
}

// Applied reports what Apply did with a batch.
type Applied struct {
	New        int // intents applied by this call
	Duplicates int // intents applied before (a redelivery); they change nothing
	// Refused are reserves Postgres refused, by this call or, for a
	// redelivered batch, by an earlier one: their Redis holds must go.
	Refused []Refusal
	// PayRefused are payments for reservations Postgres does not hold
	// (it refused their reserve): their orders now owe a refund.
	PayRefused []intent.Intent
}

// Apply applies a batch of one sale's intents in one transaction. Each
// intent counts once however often it is applied, and a reservation's
// release may come before its reserve: a reserve that finds its reservation
// already expired or cancelled changes nothing, and a release that comes
// first records the reservation without touching stock. A pay always
// follows its reserve (the stream keeps their order).
//
// Stock moves with one conditional UPDATE per SKU per batch, the database's
// own guard against overselling; only when that refuses does the batch fall
// back to taking what is left and refusing the rest, in stream order.
func (s *Store) Apply(ctx context.Context, sale string, batch []intent.Intent) (Applied, error) {
	var out Applied
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = Applied{}
		// One writer transaction per sale at a time: batches of one sale
		// never interleave, whichever origin's writer holds them.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('flashgate/apply/' || $1))`, sale); err != nil {
			return err
		}
		// Orders before anything else: a webhook's transaction locks its
		// order, then the reservation and the inventory row; taking the
		// batch's orders first keeps the same order and so no deadlock.
		if err := lockOrders(ctx, tx, batch); err != nil {
			return err
		}
		fresh, err := markApplied(ctx, tx, sale, batch)
		if err != nil {
			return err
		}
		var reserves, expires, cancels, pays, replayedReserves []intent.Intent
		for _, in := range batch {
			switch {
			case !fresh[in.ID]:
				out.Duplicates++
				if in.Kind == intent.Reserve {
					replayedReserves = append(replayedReserves, in)
				}
			case in.Kind == intent.Reserve:
				reserves = append(reserves, in)
			case in.Kind == intent.Expire:
				expires = append(expires, in)
			case in.Kind == intent.Cancel:
				cancels = append(cancels, in)
			case in.Kind == intent.Pay:
				pays = append(pays, in)
			}
		}
		out.New = len(reserves) + len(expires) + len(cancels) + len(pays)
		// Releases first: a unit or an account's live hold that an expire
		// or a cancel frees may be taken again by a later reserve of the
		// same batch. (A release whose own reserve is in the batch is then
		// applied "before" it, which the ledger already takes in any order.)
		if err := applyReleases(ctx, tx, sale, expires, intent.Expired, nil); err != nil {
			return err
		}
		paymentFailed := "payment_failed"
		if err := applyReleases(ctx, tx, sale, cancels, intent.Cancelled, &paymentFailed); err != nil {
			return err
		}
		refused, err := applyReserves(ctx, tx, sale, reserves)
		if err != nil {
			return err
		}
		out.Refused = refused
		// Pays last: a pay follows its reserve in the stream, and the
		// reserve may be in this very batch.
		if out.PayRefused, err = applyPays(ctx, tx, sale, pays); err != nil {
			return err
		}
		earlier, err := refusedBefore(ctx, tx, replayedReserves)
		if err != nil {
			return err
		}
		out.Refused = append(out.Refused, earlier...)
		return nil
	})
	if err != nil {
		return Applied{}, fmt.Errorf("apply %d intents of sale %s: %w", len(batch), sale, err)
	}
	return out, nil
}

// lockOrders locks the orders of the batch's releases and pays, the only
// intents whose application touches orders.
func lockOrders(ctx context.Context, tx pgx.Tx, batch []intent.Intent) error {
	var ids []string
	for _, in := range batch {
		if in.Kind != intent.Reserve {
			ids = append(ids, in.ReservationID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `SELECT 1 FROM orders WHERE reservation_id = ANY($1) ORDER BY order_id FOR UPDATE`, ids)
	return err
}

// markApplied records the batch's intent ids and returns the ones that were
// not recorded before.
func markApplied(ctx context.Context, tx pgx.Tx, sale string, batch []intent.Intent) (map[string]bool, error) {
	ids := make([]string, len(batch))
	kinds := make([]string, len(batch))
	reservations := make([]string, len(batch))
	for i, in := range batch {
		ids[i], kinds[i], reservations[i] = in.ID, string(in.Kind), in.ReservationID
	}
	// A conflict on either the stream id or (reservation, kind) means the
	// intent was applied before.
	rows, err := tx.Query(ctx, `INSERT INTO applied_intents (sale_id, intent_id, kind, reservation_id)
		SELECT $1, id, kind, r FROM unnest($2::text[], $3::text[], $4::text[]) AS t(id, kind, r)
		ON CONFLICT DO NOTHING RETURNING intent_id`, sale, ids, kinds, reservations)
	if err != nil {
		return nil, err
	}
	fresh := map[string]bool{}
	for _, id := range pgxStrings(rows, &err) {
		fresh[id] = true
	}
	return fresh, err
}

type reservationRows struct {
	ids, skus, accounts, idems []string
	expires, created           []time.Time
}

func rowsOf(ins []intent.Intent) reservationRows {
	var r reservationRows
	for _, in := range ins {
		r.ids = append(r.ids, in.ReservationID)
		r.skus = append(r.skus, in.SKU)
		r.accounts = append(r.accounts, in.Account)
		r.idems = append(r.idems, in.IdempotencyKey)
		r.expires = append(r.expires, in.ExpiresAt)
		r.created = append(r.created, in.At)
	}
	return r
}

// insertReservations inserts rows with the given status, skipping any that
// conflict, and returns the ids inserted.
const insertReservations = `INSERT INTO reservations
	(reservation_id, sale_id, sku, account_id, status, cancel_reason, idempotency_key, expires_at, created_at)
	SELECT r, $1, sku, acct, $2, $9, idem, exp, at
	FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[])
		AS t(r, sku, acct, idem, exp, at)
	ON CONFLICT DO NOTHING RETURNING reservation_id`

func applyReserves(ctx context.Context, tx pgx.Tx, sale string, reserves []intent.Intent) ([]Refusal, error) {
	if len(reserves) == 0 {
		return nil, nil
	}
	r := rowsOf(reserves)
	rows, err := tx.Query(ctx, insertReservations, sale, intent.Held, r.ids, r.skus, r.accounts, r.idems, r.expires, r.created, nil)
	if err != nil {
		return nil, err
	}
	inserted := map[string]bool{}
	for _, id := range pgxStrings(rows, &err) {
		inserted[id] = true
	}
	if err != nil {
		return nil, err
	}

	// Not inserted: either the reservation is already there (its expire
	// came first), or the account has another live reservation.
	var missing []string
	for _, in := range reserves {
		if !inserted[in.ReservationID] {
			missing = append(missing, in.ReservationID)
		}
	}
	present := map[string]bool{}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, `SELECT reservation_id FROM reservations WHERE reservation_id = ANY($1)`, missing)
		if err != nil {
			return nil, err
		}
		for _, id := range pgxStrings(rows, &err) {
			present[id] = true
		}
		if err != nil {
			return nil, err
		}
	}

	var refused []Refusal
	var accountRefused []intent.Intent
	bySKU := map[string][]intent.Intent{}
	var skuOrder []string
	for _, in := range reserves {
		switch {
		case inserted[in.ReservationID]:
			if _, seen := bySKU[in.SKU]; !seen {
				skuOrder = append(skuOrder, in.SKU)
			}
			bySKU[in.SKU] = append(bySKU[in.SKU], in)
		case !present[in.ReservationID]:
			accountRefused = append(accountRefused, in)
			refused = append(refused, Refusal{Intent: in})
		}
	}
	if len(accountRefused) > 0 {
		a := rowsOf(accountRefused)
		if _, err := tx.Exec(ctx, insertReservations, sale, intent.Cancelled, a.ids, a.skus, a.accounts, a.idems, a.expires, a.created, "account_has_live"); err != nil {
			return nil, err
		}
	}

	for _, sku := range skuOrder {
		held := bySKU[sku]
		taken, err := takeStock(ctx, tx, sale, sku, len(held))
		if err != nil {
			return nil, err
		}
		if taken == len(held) {
			continue
		}
		over := held[taken:]
		ids := make([]string, len(over))
		for i, in := range over {
			ids[i] = in.ReservationID
			refused = append(refused, Refusal{Intent: in, NoStock: true})
		}
		if _, err := tx.Exec(ctx, `UPDATE reservations SET status = 'cancelled', cancel_reason = 'no_stock', updated_at = now()
			WHERE reservation_id = ANY($1)`, ids); err != nil {
			return nil, err
		}
	}
	return refused, nil
}

// takeStock moves n units of a SKU from available to held, or as many as
// there are, and returns how many it moved.
func takeStock(ctx context.Context, tx pgx.Tx, sale, sku string, n int) (int, error) {
	tag, err := tx.Exec(ctx, `UPDATE inventory SET available = available - $3, held = held + $3
		WHERE sale_id = $1 AND sku = $2 AND available >= $3`, sale, sku, n)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 1 {
		return n, nil
	}
	var available int
	if err := tx.QueryRow(ctx, `SELECT available FROM inventory WHERE sale_id = $1 AND sku = $2 FOR UPDATE`,
		sale, sku).Scan(&available); err != nil {
		return 0, fmt.Errorf("sku %s: %w", sku, err)
	}
	take := min(available, n)
	if take == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE inventory SET available = available - $3, held = held + $3
		WHERE sale_id = $1 AND sku = $2 AND available >= $3`, sale, sku, take); err != nil {
		return 0, err
	}
	return take, nil
}

// applyReleases gives the units of released holds back: held rows become
// status (expired, or cancelled with reason), and their unpaid orders are
// cancelled. A missing row (the reserve has not been applied yet) is
// recorded released, so its reserve will change nothing.
func applyReleases(ctx context.Context, tx pgx.Tx, sale string, releases []intent.Intent, status intent.Status, reason *string) error {
	if len(releases) == 0 {
		return nil
	}
	r := rowsOf(releases)
	rows, err := tx.Query(ctx, `INSERT INTO reservations
		(reservation_id, sale_id, sku, account_id, status, cancel_reason, idempotency_key, expires_at, created_at)
		SELECT r, $1, sku, acct, $8, $9, idem, exp, at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])
			AS t(r, sku, acct, idem, exp, at)
		ON CONFLICT (reservation_id) DO UPDATE SET status = $8, cancel_reason = $9, updated_at = now()
			WHERE reservations.status = 'held'
		RETURNING sku, (xmax = 0) AS inserted`, sale, r.ids, r.skus, r.accounts, r.idems, r.expires, r.created, status, reason)
	if err != nil {
		return err
	}
	released := map[string]int{}
	var sku string
	var inserted bool
	_, err = pgx.ForEachRow(rows, []any{&sku, &inserted}, func() error {
		if !inserted {
			released[sku]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for sku, n := range released {
		if _, err := tx.Exec(ctx, `UPDATE inventory SET available = available + $3, held = held - $3
			WHERE sale_id = $1 AND sku = $2`, sale, sku, n); err != nil {
			return fmt.Errorf("sku %s: %w", sku, err)
		}
	}
	_, err = tx.Exec(ctx, `UPDATE orders SET status = 'cancelled', updated_at = now()
		WHERE reservation_id = ANY($1) AND status = 'pending_payment'`, r.ids)
	return err
}

// markPays marks the pays' reservations paid where Postgres holds them (held,
// or paid by the webhook). It avoids the equivalent "held or paid": a generic
// plan would match that to reservations_one_live_per_account and scan it whole.
const markPays = `UPDATE reservations SET status = 'paid', updated_at = now()
	WHERE reservation_id = ANY($1) AND status NOT IN ('expired', 'cancelled') RETURNING reservation_id, sku`

// applyPays moves paid holds' units from held to sold: reservations held
// here, or marked paid already by the webhook (which leaves the counters to
// this batch). A pay whose reservation Postgres does not hold (it refused
// the reserve, or the reservation expired here) sells nothing: its order
// owes the shopper a refund, which the reconciler issues.
func applyPays(ctx context.Context, tx pgx.Tx, sale string, pays []intent.Intent) ([]intent.Intent, error) {
	if len(pays) == 0 {
		return nil, nil
	}
	ids := rowsOf(pays).ids
	rows, err := tx.Query(ctx, markPays, ids)
	if err != nil {
		return nil, err
	}
	paid := map[string]bool{}
	sold := map[string]int{}
	var id, sku string
	if _, err := pgx.ForEachRow(rows, []any{&id, &sku}, func() error {
		paid[id] = true
		sold[sku]++
		return nil
	}); err != nil {
		return nil, err
	}
	for sku, n := range sold {
		if _, err := tx.Exec(ctx, `UPDATE inventory SET held = held - $3, sold = sold + $3
			WHERE sale_id = $1 AND sku = $2`, sale, sku, n); err != nil {
			return nil, fmt.Errorf("sku %s: %w", sku, err)
		}
	}
	var refused []intent.Intent
	var refusedIDs []string
	for _, in := range pays {
		if !paid[in.ReservationID] {
			refused = append(refused, in)
			refusedIDs = append(refusedIDs, in.ReservationID)
		}
	}
	if len(refused) > 0 {
		// Their payers' claims go with the sale (one statement: this is
		// the writer's batch).
		if _, err := tx.Exec(ctx, `WITH refunded AS (UPDATE orders SET status = 'refunded', refund_status = 'owed', updated_at = now()
			WHERE reservation_id = ANY($1) AND status <> 'refunded' RETURNING order_id)
			DELETE FROM sale_payers WHERE order_id IN (SELECT order_id FROM refunded)`, refusedIDs); err != nil {
			return nil, err
		}
	}
	return refused, nil
}

// refusedBefore finds, among reserves applied by an earlier delivery, those
// Postgres refused: the earlier writer may have died before cancelling their
// Redis holds.
func refusedBefore(ctx context.Context, tx pgx.Tx, reserves []intent.Intent) ([]Refusal, error) {
	if len(reserves) == 0 {
		return nil, nil
	}
	ids := make([]string, len(reserves))
	for i, in := range reserves {
		ids[i] = in.ReservationID
	}
	rows, err := tx.Query(ctx, `SELECT reservation_id, cancel_reason = 'no_stock' FROM reservations
		WHERE reservation_id = ANY($1) AND status = 'cancelled'`, ids)
	if err != nil {
		return nil, err
	}
	noStock := map[string]bool{}
	var id string
	var stock bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &stock}, func() error {
		noStock[id] = stock
		return nil
	}); err != nil {
		return nil, err
	}
	var out []Refusal
	for _, in := range reserves {
		if stock, ok := noStock[in.ReservationID]; ok {
			out = append(out, Refusal{Intent: in, NoStock: stock})
		}
	}
	return out, nil
}

// pgxStrings collects a single text column, setting *errp on failure.
func pgxStrings(rows pgx.Rows, errp *error) []string {
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		*errp = err
	}
	return out
}
