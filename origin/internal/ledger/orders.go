package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// Order statuses, as the contract shows them.
const (
	OrderPendingPayment = "pending_payment"
	OrderPaid           = "paid"
	OrderRefunded       = "refunded"
	OrderCancelled      = "cancelled"
)

// Refund statuses of a refunded order.
const (
	// RefundOwed: decided, not (or no longer) at the gateway: not issued
	// yet, or the refund issued failed (RefundID names it then).
	RefundOwed = "owed"
	// RefundIssued: the gateway has it (RefundID); RefundedAt says when it
	// gave the money back, zero while the refund is on its way.
	RefundIssued = "issued"
)

// Order is an order row: one per reservation, made when its shopper starts
// to pay.
type Order struct {
	ID             string
	ReservationID  string
	Sale           string
	SKU            string
	Account        string
	Status         string // OrderPendingPayment, OrderPaid, OrderRefunded or OrderCancelled
	AmountMinor    int64
	Currency       string
	IdempotencyKey string
	IntentID       string // the gateway's payment intent; "" until created
	PayURL         string
	RefundStatus   string    // RefundOwed or RefundIssued when refunded, else ""
	RefundID       string    // the refund issued, or the last one that failed
	RefundedAt     time.Time // when the gateway reported the money back; zero until then
	Payer          string    // the instrument that paid, as the gateway reported it; "" if none (yet); never changes once set
	CreatedAt      time.Time
	UpdatedAt      time.Time
	PaidAt         time.Time // zero unless paid
	// HoldUntil is when the order's hold ends, its payment grace included,
	// as recorded with its intent (SetOrderIntent); zero until then.
	HoldUntil time.Time
}

const orderColumns = `order_id, reservation_id, sale_id, sku, account_id, status, amount_minor, currency,
	idempotency_key, coalesce(intent_id, ''), coalesce(pay_url, ''), coalesce(refund_status, ''),
	coalesce(refund_id, ''), coalesce(payer, ''), created_at, updated_at, paid_at, refunded_at, hold_until`

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	var paid, refunded, holdUntil *time.Time
	err := row.Scan(&o.ID, &o.ReservationID, &o.Sale, &o.SKU, &o.Account, &o.Status, &o.AmountMinor, &o.Currency,
		&o.IdempotencyKey, &o.IntentID, &o.PayURL, &o.RefundStatus, &o.RefundID, &o.Payer, &o.CreatedAt, &o.UpdatedAt,
		&paid, &refunded, &holdUntil)
	if err != nil {
		return Order{}, err
	}
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	if paid != nil {
		o.PaidAt = paid.UTC()
	}
	if refunded != nil {
		o.RefundedAt = refunded.UTC()
	}
	if holdUntil != nil {
		o.HoldUntil = holdUntil.UTC()
	}
	return o, nil
}

// CreateOrder writes o (its ID, reservation, sale, SKU, account, amount,
// currency and idempotency key) as pending payment, unless its reservation
// already has an order: then it returns that one with created = false.
func (s *Store) CreateOrder(ctx context.Context, o Order) (_ Order, created bool, err error) {
	defer s.observe(opCreateOrder, time.Now())
	row := s.pool.QueryRow(ctx, `INSERT INTO orders
		(order_id, reservation_id, sale_id, sku, account_id, status, amount_minor, currency, idempotency_key)
		VALUES ($1, $2, $3, $4, $5, 'pending_payment', $6, $7, $8)
		ON CONFLICT (reservation_id) DO NOTHING RETURNING `+orderColumns,
		o.ID, o.ReservationID, o.Sale, o.SKU, o.Account, o.AmountMinor, o.Currency, o.IdempotencyKey)
	got, err := scanOrder(row)
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Order{}, false, fmt.Errorf("create order for reservation %s: %w", o.ReservationID, err)
	}
	got, err = s.OrderOfReservation(ctx, o.ReservationID)
	return got, false, err
}

// Order reads one order, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (Order, error) {
	defer s.observe(opOrder, time.Now())
	return s.oneOrder(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = $1`, id)
}

// OrderOfReservation reads a reservation's order, or ErrNotFound.
func (s *Store) OrderOfReservation(ctx context.Context, reservationID string) (Order, error) {
	defer s.observe(opOrderOfReservation, time.Now())
	return s.oneOrder(ctx, `SELECT `+orderColumns+` FROM orders WHERE reservation_id = $1`, reservationID)
}

func (s *Store) oneOrder(ctx context.Context, query, arg string) (Order, error) {
	o, err := scanOrder(s.pool.QueryRow(ctx, query, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("order %s: %w", arg, ErrNotFound)
	}
	if err != nil {
		return Order{}, fmt.Errorf("read order %s: %w", arg, err)
	}
	return o, nil
}

// SetOrderIntent records the gateway's payment intent of an order and,
// when holdUntil is set, how long its hold lives once its payment started
// (so a rebuild of Redis from Postgres keeps the grace). The intent is
// created under an idempotency key derived from the order, so a retry
// records the same intent again, harmlessly.
func (s *Store) SetOrderIntent(ctx context.Context, orderID, intentID, payURL string, holdUntil time.Time) error {
	defer s.observe(opSetOrderIntent, time.Now())
	var until *time.Time
	if !holdUntil.IsZero() {
		until = &holdUntil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE orders SET intent_id = $2, pay_url = $3,
		hold_until = greatest(hold_until, $4), updated_at = now()
		WHERE order_id = $1 AND (intent_id IS NULL OR intent_id = $2)`, orderID, intentID, payURL, until); err != nil {
		return fmt.Errorf("record intent of order %s: %w", orderID, err)
	}
	return nil
}

// markPaid records in Postgres, at once, that a paid order's reservation is
// paid — a row lock on the reservation only; the hot inventory row moves
// held → sold when the order writer applies the pay intent, in its batch.
// A reservation the writer has not recorded yet is left to it (and, should
// Redis lose its intents, to SettlePaid). It reports false when Postgres
// has no unit for the order: the reservation expired or was cancelled here.
func markPaid(ctx context.Context, tx pgx.Tx, o Order) (bool, error) {
	// Nearly always the writer has recorded the reservation, held: one
	// statement marks it, a round trip fewer in every paid webhook.
	tag, err := tx.Exec(ctx, `UPDATE reservations SET status = 'paid', updated_at = now()
		WHERE reservation_id = $1 AND status = 'held'`, o.ReservationID)
	if err != nil || tag.RowsAffected() == 1 {
		return err == nil, err
	}
	// Otherwise find out why, under the row's lock.
	var status intent.Status
	err = tx.QueryRow(ctx, `SELECT status FROM reservations WHERE reservation_id = $1 FOR UPDATE`, o.ReservationID).Scan(&status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return true, nil
	case err != nil:
		return false, err
	case status == intent.Paid:
		return true, nil
	case status != intent.Held:
		return false, nil
	}
	// The writer recorded it between the two statements.
	_, err = tx.Exec(ctx, `UPDATE reservations SET status = 'paid', updated_at = now() WHERE reservation_id = $1`, o.ReservationID)
	return err == nil, err
}

// SettlePaid makes the ledger count every paid unit of a sale as sold, for
// a rebuild after Redis lost intents (run it once the stream has drained):
// a paid order whose reservation never reached Postgres gets its
// reservation, its unit taken from available (or, with none left, the
// order owes a refund); a reservation marked paid whose pay intent never
// came moves its unit from held to sold. Both are recorded as applied, so
// a late intent changes nothing. It reports how many units it settled.
func (s *Store) SettlePaid(ctx context.Context, sale string) (int, error) {
	settled := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		settled = 0
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('flashgate/apply/' || $1))`, sale); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders o WHERE o.sale_id = $1 AND o.status = 'paid'
			AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.reservation_id = o.reservation_id)`, sale)
		if err != nil {
			return err
		}
		orphans, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Order, error) { return scanOrder(row) })
		if err != nil {
			return err
		}
		for _, o := range orphans {
			tag, err := tx.Exec(ctx, `UPDATE inventory SET available = available - 1, sold = sold + 1
				WHERE sale_id = $1 AND sku = $2 AND available >= 1`, sale, o.SKU)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'refunded', refund_status = 'owed', paid_at = NULL,
					updated_at = now() WHERE order_id = $1`, o.ID); err != nil {
					return err
				}
				if err := dropPayerClaims(ctx, tx, o.ID); err != nil {
					return err
				}
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO reservations
				(reservation_id, sale_id, sku, account_id, status, idempotency_key, expires_at, created_at)
				VALUES ($1, $2, $3, $4, 'paid', $5, now(), $6)`, o.ReservationID, sale, o.SKU, o.Account, "order:"+o.ID, o.CreatedAt); err != nil {
				return err
			}
			if err := markSettled(ctx, tx, sale, o.ReservationID, intent.Reserve, intent.Pay); err != nil {
				return err
			}
			settled++
		}
		rows, err = tx.Query(ctx, `SELECT r.reservation_id, r.sku FROM reservations r
			WHERE r.sale_id = $1 AND r.status = 'paid' AND NOT EXISTS (SELECT 1 FROM applied_intents a
				WHERE a.sale_id = r.sale_id AND a.reservation_id = r.reservation_id AND a.kind = 'pay')`, sale)
		if err != nil {
			return err
		}
		unsold, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, SKU string }])
		if err != nil {
			return err
		}
		for _, r := range unsold {
			if _, err := tx.Exec(ctx, `UPDATE inventory SET held = held - 1, sold = sold + 1 WHERE sale_id = $1 AND sku = $2`,
				sale, r.SKU); err != nil {
				return err
			}
			if err := markSettled(ctx, tx, sale, r.ID, intent.Pay); err != nil {
				return err
			}
			settled++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("settle paid units of sale %s: %w", sale, err)
	}
	return settled, nil
}

// markSettled records intents of a reservation as applied without a
// stream entry, so the real ones, should they still come, change nothing.
func markSettled(ctx context.Context, tx pgx.Tx, sale, reservation string, kinds ...intent.Kind) error {
	for _, k := range kinds {
		if _, err := tx.Exec(ctx, `INSERT INTO applied_intents (sale_id, intent_id, kind, reservation_id)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, sale, "settled:"+string(k)+":"+reservation, string(k), reservation); err != nil {
			return err
		}
	}
	return nil
}

// TouchOrder moves an order to the back of the owed-refunds line (a refund
// the gateway refused must not starve the others), or of the refunds in
// flight (one asked about waits its turn again).
func (s *Store) TouchOrder(ctx context.Context, orderID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE orders SET updated_at = now() WHERE order_id = $1`, orderID); err != nil {
		return fmt.Errorf("touch order %s: %w", orderID, err)
	}
	return nil
}

// ErrDuplicateEvent: the gateway event was handled before.
var ErrDuplicateEvent = errors.New("ledger: payment event already handled")

// ChangeOrder runs change on an order locked against every other change,
// and stores what it returns, in one transaction. An order that becomes
// paid marks its reservation paid in the same transaction; when Postgres
// has no unit for it (Redis had drifted), the order is stored refunded
// with the refund owed instead. With an eventID, the
// event is recorded as handled in the same transaction, and an event seen
// before is ErrDuplicateEvent without calling change: a webhook delivered
// twice changes the order once. change may call out (Redis, the gateway)
// but must be safe to repeat, since a failed commit runs it again later.
// A payer, once recorded, never changes.
func (s *Store) ChangeOrder(ctx context.Context, orderID, eventID, eventType string, change func(Order) (Order, error)) (Order, error) {
	return s.ChangeOrderTx(ctx, orderID, eventID, eventType, func(_ *OrderTx, o Order) (Order, error) { return change(o) })
}

// OrderTx is the transaction of one ChangeOrderTx, for what its change
// must decide inside it: claiming the order's payer (ClaimPayer).
type OrderTx struct {
	tx    pgx.Tx
	order Order // as locked, before the change
	// claimed is the payers this transaction claimed for the order.
	claimed []string
}

// ClaimPayer claims payer for the order in its sale and reports whether
// the order holds it; false means another order of the sale is paid by
// it. A concurrent claim of the same payer waits for the other
// transaction to end, so of two orders claiming one payer at once exactly
// one holds it. The claim commits with the order if the order ends paid
// and is dropped in the same transaction otherwise.
func (c *OrderTx) ClaimPayer(ctx context.Context, payer string) (bool, error) {
	o := c.order
	tag, err := c.tx.Exec(ctx, `INSERT INTO sale_payers (sale_id, payer, order_id) VALUES ($1, $2, $3)
		ON CONFLICT (sale_id, payer) DO NOTHING`, o.Sale, payer, o.ID)
	if err != nil {
		return false, fmt.Errorf("claim the payer of order %s: %w", o.ID, err)
	}
	if tag.RowsAffected() == 1 {
		c.claimed = append(c.claimed, payer)
		return true, nil
	}
	// Taken by a committed transaction, which this statement sees (read
	// committed: each statement reads what has committed before it).
	var holder string
	if err := c.tx.QueryRow(ctx, `SELECT order_id FROM sale_payers WHERE sale_id = $1 AND payer = $2`,
		o.Sale, payer).Scan(&holder); err != nil {
		return false, fmt.Errorf("read the claim on the payer of order %s: %w", o.ID, err)
	}
	return holder == o.ID, nil
}

// ChangeOrderTx is ChangeOrder whose change also gets the transaction,
// to claim the order's payer before it calls out.
func (s *Store) ChangeOrderTx(ctx context.Context, orderID, eventID, eventType string, change func(*OrderTx, Order) (Order, error)) (Order, error) {
	var out Order
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = $1 FOR UPDATE`, orderID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("order %s: %w", orderID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if eventID != "" {
			fresh, err := recordEvent(ctx, tx, eventID, orderID, eventType)
			if err != nil {
				return err
			}
			if !fresh {
				out = o
				return ErrDuplicateEvent
			}
		}
		otx := &OrderTx{tx: tx, order: o}
		next, err := change(otx, o)
		if err != nil {
			return err
		}
		if next.Status == OrderPaid && o.Status != OrderPaid {
			// Postgres records the payment now, not when the pay intent
			// comes through the stream: a paid unit must survive Redis
			// losing the pay (a failover) and a rebuild from Postgres.
			ok, err := markPaid(ctx, tx, next)
			if err != nil {
				return err
			}
			if !ok {
				next.Status, next.RefundStatus, next.PaidAt = OrderRefunded, RefundOwed, time.Time{}
			}
		}
		if len(otx.claimed) > 0 && next.Status != OrderPaid {
			// Not sold after all: the payer may still buy in the sale.
			if _, err := tx.Exec(ctx, `DELETE FROM sale_payers WHERE sale_id = $1 AND payer = ANY($2) AND order_id = $3`,
				o.Sale, otx.claimed, orderID); err != nil {
				return err
			}
		}
		var paid, refunded *time.Time
		if !next.PaidAt.IsZero() {
			paid = &next.PaidAt
		}
		if !next.RefundedAt.IsZero() {
			refunded = &next.RefundedAt
		}
		// An intent the order did not have yet (change may record the one
		// an event names) is kept; a recorded one never changes, nor does
		// a recorded payer.
		row := tx.QueryRow(ctx, `UPDATE orders SET status = $2, refund_status = nullif($3, ''),
			refund_id = nullif($4, ''), paid_at = $5, updated_at = now(),
			intent_id = coalesce(intent_id, nullif($6, '')), pay_url = coalesce(pay_url, nullif($7, '')),
			payer = coalesce(payer, nullif($8, '')), refunded_at = $9
			WHERE order_id = $1 RETURNING `+orderColumns,
			orderID, next.Status, next.RefundStatus, next.RefundID, paid, next.IntentID, next.PayURL, next.Payer, refunded)
		out, err = scanOrder(row)
		return err
	})
	if errors.Is(err, ErrDuplicateEvent) {
		return out, err
	}
	if err != nil {
		return Order{}, fmt.Errorf("change order %s: %w", orderID, err)
	}
	return out, nil
}

// dropPayerClaims drops the payer claims of an order that is no longer
// paid (Postgres had no unit for it), so its payer may still buy.
func dropPayerClaims(ctx context.Context, tx pgx.Tx, orderIDs ...string) error {
	_, err := tx.Exec(ctx, `DELETE FROM sale_payers WHERE order_id = ANY($1)`, orderIDs)
	return err
}

// RecordEvent records a gateway event that changes no order (one about an
// order we do not know, or of a type we do not act on) and reports whether
// it was new.
func (s *Store) RecordEvent(ctx context.Context, eventID, eventType string) (fresh bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fresh, err = recordEvent(ctx, tx, eventID, "", eventType)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record payment event %s: %w", eventID, err)
	}
	return fresh, nil
}

func recordEvent(ctx context.Context, tx pgx.Tx, eventID, orderID, eventType string) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO payment_events (event_id, order_id, type) VALUES ($1, nullif($2, ''), $3)
		ON CONFLICT DO NOTHING`, eventID, orderID, eventType)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// OrdersOwingRefunds reads up to limit refunded orders whose refund has not
// been issued yet, oldest first.
func (s *Store) OrdersOwingRefunds(ctx context.Context, limit int) ([]Order, error) {
	return s.orders(ctx, `SELECT `+orderColumns+` FROM orders WHERE refund_status = 'owed'
		ORDER BY updated_at LIMIT $1`, limit)
}

// RefundsInFlight reads up to limit orders whose refund the gateway has
// but has not reported done, not changed (or touched, TouchOrder) since
// before, oldest first: the reconciler asks the gateway about each.
func (s *Store) RefundsInFlight(ctx context.Context, before time.Time, limit int) ([]Order, error) {
	return s.orders(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE refund_status = 'issued' AND refunded_at IS NULL AND updated_at < $1
		ORDER BY updated_at LIMIT $2`, before, limit)
}

// OrdersPastHold reads up to limit orders whose hold ended between since
// and before while a provider's payment page of theirs may still be open —
// waiting for their payment, or cancelled by the hold's end — and not yet
// closed (MarkPageClosed), the latest ended first.
func (s *Store) OrdersPastHold(ctx context.Context, since, before time.Time, limit int) ([]Order, error) {
	return s.orders(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE intent_id IS NOT NULL AND page_closed_at IS NULL AND status IN ('pending_payment', 'cancelled')
			AND hold_until < $1 AND hold_until >= $2
		ORDER BY hold_until DESC LIMIT $3`, before, since, limit)
}

// MarkPageClosed records that the order's payment page is closed: nobody
// can pay on it any more (or a payment on it came first).
func (s *Store) MarkPageClosed(ctx context.Context, orderID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE orders SET page_closed_at = now() WHERE order_id = $1 AND page_closed_at IS NULL`, orderID); err != nil {
		return fmt.Errorf("mark the payment page of order %s closed: %w", orderID, err)
	}
	return nil
}

// OrdersByID reads the orders with the given ids that exist, by id.
func (s *Store) OrdersByID(ctx context.Context, ids []string) (map[string]Order, error) {
	list, err := s.orders(ctx, `SELECT `+orderColumns+` FROM orders WHERE order_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Order, len(list))
	for _, o := range list {
		out[o.ID] = o
	}
	return out, nil
}

func (s *Store) orders(ctx context.Context, query string, args ...any) ([]Order, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Order, error) { return scanOrder(row) })
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	return out, nil
}
