package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

func pay(seq int, res, account, sku string) intent.Intent {
	return in(seq, intent.Pay, res, account, sku)
}

func cancel(seq int, res, account, sku string) intent.Intent {
	return in(seq, intent.Cancel, res, account, sku)
}

// order writes a pending order for a reservation.
func order(t *testing.T, s *Store, id, res, account, sku string) Order {
	t.Helper()
	o, created, err := s.CreateOrder(context.Background(), Order{
		ID: id, ReservationID: res, Sale: "s1", SKU: sku, Account: account, AmountMinor: 100, Currency: "INR", IdempotencyKey: "k-" + id,
	})
	if err != nil || !created {
		t.Fatalf("CreateOrder(%s) = %v, created %v", id, err, created)
	}
	return o
}

func wantOrder(t *testing.T, s *Store, id, status, refund string) {
	t.Helper()
	o, err := s.Order(context.Background(), id)
	if err != nil {
		t.Fatalf("Order(%s) = %v", id, err)
	}
	if o.Status != status || o.RefundStatus != refund {
		t.Errorf("Order(%s) = %s/%q, want %s/%q", id, o.Status, o.RefundStatus, status, refund)
	}
}

func TestApplyPayMovesHeldToSold(t *testing.T) {
	s := newStore(t, 3, 0)
	apply(t, s, reserve(1, "r1", "u1", "a"), reserve(2, "r2", "u2", "a"))
	got := apply(t, s, pay(3, "r1", "u1", "a"))
	if got.New != 1 || len(got.PayRefused) != 0 {
		t.Errorf("Apply(pay) = %+v, want 1 new, none refused", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Available: 1, Held: 1, Sold: 1})
	wantStatus(t, s, "r1", intent.Paid)
	// A redelivered pay changes nothing.
	if got := apply(t, s, pay(3, "r1", "u1", "a")); got.Duplicates != 1 {
		t.Errorf("Apply(pay again) = %+v, want a duplicate", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Available: 1, Held: 1, Sold: 1})
}

func TestApplyReserveAndPayInOneBatch(t *testing.T) {
	s := newStore(t, 2, 0)
	apply(t, s, reserve(1, "r1", "u1", "a"), pay(2, "r1", "u1", "a"))
	wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Held: 0, Sold: 1})
	wantStatus(t, s, "r1", intent.Paid)
}

func TestApplyCancelReturnsTheUnitAndCancelsTheOrder(t *testing.T) {
	s := newStore(t, 2, 0)
	apply(t, s, reserve(1, "r1", "u1", "a"))
	order(t, s, "o1", "r1", "u1", "a")
	apply(t, s, cancel(2, "r1", "u1", "a"))
	wantStock(t, s, "a", intent.Stock{Total: 2, Available: 2})
	wantStatus(t, s, "r1", intent.Cancelled)
	wantOrder(t, s, "o1", OrderCancelled, "")
	// The account may hold again.
	if got := apply(t, s, reserve(3, "r2", "u1", "a")); len(got.Refused) != 0 {
		t.Errorf("reserve after cancel refused: %+v", got.Refused)
	}
	wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Held: 1})
}

func TestApplyExpireCancelsAPendingOrder(t *testing.T) {
	s := newStore(t, 1, 0)
	apply(t, s, reserve(1, "r1", "u1", "a"))
	order(t, s, "o1", "r1", "u1", "a")
	apply(t, s, expire(2, "r1", "u1", "a"))
	wantOrder(t, s, "o1", OrderCancelled, "")
	wantStock(t, s, "a", intent.Stock{Total: 1, Available: 1})
}

func TestApplyPayOfARefusedReserveOwesARefund(t *testing.T) {
	s := newStore(t, 1, 0)
	// Redis counted a unit Postgres does not have: r2's reserve is refused.
	apply(t, s, reserve(1, "r1", "u1", "a"))
	if got := apply(t, s, reserve(2, "r2", "u2", "a")); len(got.Refused) != 1 {
		t.Fatalf("reserve beyond stock: refused %+v, want 1", got.Refused)
	}
	order(t, s, "o2", "r2", "u2", "a")
	got := apply(t, s, pay(3, "r2", "u2", "a"))
	if len(got.PayRefused) != 1 || got.PayRefused[0].ReservationID != "r2" {
		t.Errorf("Apply(pay of refused) = %+v, want r2 refused", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 1, Held: 1})
	wantOrder(t, s, "o2", OrderRefunded, RefundOwed)
	owed, err := s.OrdersOwingRefunds(context.Background(), 10)
	if err != nil || len(owed) != 1 || owed[0].ID != "o2" {
		t.Errorf("OrdersOwingRefunds = %v, %v; want o2", owed, err)
	}
}

func TestCreateOrderOncePerReservation(t *testing.T) {
	s := newStore(t, 1, 0)
	ctx := context.Background()
	first := order(t, s, "o1", "r1", "u1", "a")
	again, created, err := s.CreateOrder(ctx, Order{ID: "o2", ReservationID: "r1", Sale: "s1", SKU: "a", Account: "u1", AmountMinor: 100, Currency: "INR", IdempotencyKey: "k2"})
	if err != nil || created || again.ID != first.ID {
		t.Errorf("CreateOrder(second for r1) = %s, created %v, %v; want %s, false", again.ID, created, err, first.ID)
	}
}

func TestChangeOrderOncePerEvent(t *testing.T) {
	s := newStore(t, 1, 0)
	ctx := context.Background()
	order(t, s, "o1", "r1", "u1", "a")
	calls := 0
	change := func(o Order) (Order, error) {
		calls++
		o.Status = OrderPaid
		return o, nil
	}
	if _, err := s.ChangeOrder(ctx, "o1", "evt_1", "payment_intent.succeeded", change); err != nil {
		t.Fatalf("ChangeOrder(evt_1) = %v", err)
	}
	for range 4 {
		if _, err := s.ChangeOrder(ctx, "o1", "evt_1", "payment_intent.succeeded", change); !errors.Is(err, ErrDuplicateEvent) {
			t.Errorf("ChangeOrder(evt_1 again) = %v, want ErrDuplicateEvent", err)
		}
	}
	if calls != 1 {
		t.Errorf("change ran %d times, want 1", calls)
	}
	// A failed change records nothing: the event is handled when retried.
	boom := errors.New("redis down")
	if _, err := s.ChangeOrder(ctx, "o1", "evt_2", "x", func(Order) (Order, error) { return Order{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("ChangeOrder(failing) = %v, want boom", err)
	}
	if fresh, err := s.RecordEvent(ctx, "evt_2", "x"); err != nil || !fresh {
		t.Errorf("RecordEvent(evt_2) after a failed change = %v, %v; want fresh", fresh, err)
	}
	if _, err := s.ChangeOrder(ctx, "nope", "evt_3", "x", change); !errors.Is(err, ErrNotFound) {
		t.Errorf("ChangeOrder(unknown order) = %v, want ErrNotFound", err)
	}
	// A refunded order must say where its money is (the schema insists).
	if _, err := s.ChangeOrder(ctx, "o1", "", "", func(o Order) (Order, error) {
		o.Status = OrderRefunded
		return o, nil
	}); err == nil {
		t.Error("ChangeOrder(refunded without refund status) = nil, want a check violation")
	}
}

func payOrder(t *testing.T, s *Store, id string) Order {
	t.Helper()
	o, err := s.ChangeOrder(context.Background(), id, "", "", func(o Order) (Order, error) {
		o.Status, o.PaidAt = OrderPaid, base
		return o, nil
	})
	if err != nil {
		t.Fatalf("ChangeOrder(%s → paid) = %v", id, err)
	}
	return o
}

func settlePaid(t *testing.T, s *Store, want int) {
	t.Helper()
	n, err := s.SettlePaid(context.Background(), "s1")
	if err != nil || n != want {
		t.Fatalf("SettlePaid = %d, %v; want %d", n, err, want)
	}
}

// An order that becomes paid marks its reservation paid in Postgres at
// once (so no expiry can give the unit back); the counters move when the
// pay intent is applied, in whichever order the writer's intents come; and
// SettlePaid counts the unit when Redis lost the intents.
func TestPaidOrderMarksItsReservationAtOnce(t *testing.T) {
	t.Run("reservation held, then the pay intent", func(t *testing.T) {
		s := newStore(t, 2, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"))
		order(t, s, "o1", "r1", "u1", "a")
		if got := payOrder(t, s, "o1"); got.Status != OrderPaid {
			t.Fatalf("order = %s, want paid", got.Status)
		}
		wantStatus(t, s, "r1", intent.Paid)
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Held: 1}) // the hot row waits for the writer
		// An expire that Redis wrongly wrote (it lost the pay) changes nothing.
		apply(t, s, expire(2, "r1", "u1", "a"))
		wantStatus(t, s, "r1", intent.Paid)
		if got := apply(t, s, pay(3, "r1", "u1", "a")); len(got.PayRefused) != 0 {
			t.Errorf("pay after the webhook refused: %+v", got.PayRefused)
		}
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
		settlePaid(t, s, 0) // nothing left to settle
		wantOrder(t, s, "o1", OrderPaid, "")
	})
	t.Run("reservation not recorded yet", func(t *testing.T) {
		s := newStore(t, 2, 0)
		order(t, s, "o1", "r1", "u1", "a")
		payOrder(t, s, "o1")
		got := apply(t, s, reserve(1, "r1", "u1", "a"), pay(2, "r1", "u1", "a"))
		if len(got.Refused) != 0 || len(got.PayRefused) != 0 {
			t.Errorf("writer after the webhook: %+v", got)
		}
		wantStatus(t, s, "r1", intent.Paid)
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
	})
	t.Run("Redis lost the pay intent", func(t *testing.T) {
		s := newStore(t, 2, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"))
		order(t, s, "o1", "r1", "u1", "a")
		payOrder(t, s, "o1")
		settlePaid(t, s, 1)
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
		// Should the intent come after all, it changes nothing.
		if got := apply(t, s, pay(2, "r1", "u1", "a")); got.New != 0 || got.Duplicates != 1 {
			t.Errorf("late pay intent = %+v, want a duplicate", got)
		}
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
	})
	t.Run("Redis lost the reserve and the pay", func(t *testing.T) {
		s := newStore(t, 2, 0)
		order(t, s, "o1", "r1", "u1", "a")
		payOrder(t, s, "o1")
		settlePaid(t, s, 1)
		wantStatus(t, s, "r1", intent.Paid)
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
		if got := apply(t, s, reserve(1, "r1", "u1", "a"), pay(2, "r1", "u1", "a")); got.New != 0 {
			t.Errorf("late intents = %+v, want duplicates", got)
		}
		wantStock(t, s, "a", intent.Stock{Total: 2, Available: 1, Sold: 1})
	})
	t.Run("lost, and no stock left here", func(t *testing.T) {
		s := newStore(t, 1, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"))
		order(t, s, "o2", "r2", "u2", "a") // r2 never reached Postgres, and r1 holds the only unit
		payOrder(t, s, "o2")
		settlePaid(t, s, 0)
		wantOrder(t, s, "o2", OrderRefunded, RefundOwed)
		wantStock(t, s, "a", intent.Stock{Total: 1, Held: 1})
	})
	t.Run("reservation expired here", func(t *testing.T) {
		s := newStore(t, 1, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"), expire(2, "r1", "u1", "a"))
		order(t, s, "o1", "r1", "u1", "a")
		if got := payOrder(t, s, "o1"); got.Status != OrderRefunded || got.RefundStatus != RefundOwed {
			t.Errorf("order = %s/%s, want refunded/owed", got.Status, got.RefundStatus)
		}
		wantStock(t, s, "a", intent.Stock{Total: 1, Available: 1})
	})
}

// A pay batch finds its reservations by key, however many paid ones past
// sales left behind. The order writer's statements are prepared, and
// after five runs Postgres may keep a generic plan; with "status IN
// ('held', 'paid')" that plan ANDed the key lookup with a scan of the whole
// one-live-per-account index (its predicate), which grows with every sale.
func TestApplyPaysFindsReservationsByKeyOnly(t *testing.T) {
	s := newStore(t, 1, 0)
	ctx := context.Background()
	// Past sales: most holds expired, one in a hundred paid, as the
	// statistics last saw them; then a sale's worth more paid since.
	past := func(from, to int, status string) string {
		return fmt.Sprintf(`INSERT INTO reservations
			(reservation_id, sale_id, sku, account_id, status, idempotency_key, expires_at, created_at)
			SELECT 'past-' || i, 's1', 'a', 'past-' || i, '%s', 'idem-past-' || i, now(), now()
			FROM generate_series(%d, %d) AS i`, status, from, to)
	}
	for _, sql := range []string{past(1, 19800, "expired"), past(19801, 20000, "paid"), `ANALYZE reservations`, past(20001, 25000, "paid")} {
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = conn.Exec(context.Background(), `DISCARD ALL`)
		conn.Release()
	}()
	for _, sql := range []string{`SET plan_cache_mode = force_generic_plan`, `PREPARE pays(text[]) AS ` + markPays} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE pays('{r1,r2}')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "reservations_one_live_per_account") || !strings.Contains(plan, "reservations_pkey") {
		t.Errorf("the pays' generic plan reads more than the key:\n%s", plan)
	}

	// And the statement still does its job.
	apply(t, s, reserve(1, "r1", "u1", "a"))
	if got := apply(t, s, pay(2, "r1", "u1", "a")); len(got.PayRefused) != 0 {
		t.Errorf("Apply(pay) refused %v", got.PayRefused)
	}
	wantStatus(t, s, "r1", intent.Paid)
	wantStock(t, s, "a", intent.Stock{Total: 1, Sold: 1})
}

// A refund on its way is listed by RefundsInFlight until the gateway
// reports the money back (RefundedAt), and only once it was last changed
// or touched before the given time; a failed one, owed again, keeps the
// failed refund's id.
func TestRefundsInFlight(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 3, 0)
	refunded := func(id, res string, change func(Order) Order) Order {
		t.Helper()
		order(t, s, id, res, "u-"+id, "a")
		o, err := s.ChangeOrder(ctx, id, "", "", func(o Order) (Order, error) {
			o.Status = OrderRefunded
			return change(o), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	back := time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
	onItsWay := refunded("o1", "r1", func(o Order) Order { o.RefundStatus, o.RefundID = RefundIssued, "re_1"; return o })
	done := refunded("o2", "r2", func(o Order) Order {
		o.RefundStatus, o.RefundID, o.RefundedAt = RefundIssued, "re_2", back
		return o
	})
	failed := refunded("o3", "r3", func(o Order) Order { o.RefundStatus, o.RefundID = RefundOwed, "re_3"; return o })
	if !done.RefundedAt.Equal(back) || !onItsWay.RefundedAt.IsZero() || failed.RefundID != "re_3" {
		t.Errorf("stored refunds = %+v / %+v / %+v", onItsWay, done, failed)
	}
	ids := func(before time.Time) []string {
		t.Helper()
		got, err := s.RefundsInFlight(ctx, before, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range got {
			out = append(out, o.ID)
		}
		return out
	}
	if got := ids(time.Now().Add(time.Minute)); len(got) != 1 || got[0] != "o1" {
		t.Errorf("RefundsInFlight = %v, want [o1]", got)
	}
	if got := ids(onItsWay.UpdatedAt); len(got) != 0 {
		t.Errorf("RefundsInFlight(before its last change) = %v, want none", got)
	}
	if o, err := s.Order(ctx, "o3"); err != nil || o.RefundID != "re_3" || o.RefundStatus != RefundOwed {
		t.Errorf("Order(o3) = %+v, %v; want owed, naming re_3", o, err)
	}
}

// A lock has one holder at a time, in its own schema only, and is free
// again once unlocked.
func TestTryLock(t *testing.T) {
	ctx := context.Background()
	s, other := newStore(t, 1, 0), newStore(t, 1, 0) // two schemas of one database
	unlock, ok, err := s.TryLock(ctx, "reconcile")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v; want the lock", ok, err)
	}
	if _, ok, err := s.TryLock(ctx, "reconcile"); err != nil || ok {
		t.Errorf("TryLock while held = %v, %v; want refused", ok, err)
	}
	otherUnlock, ok, err := other.TryLock(ctx, "reconcile")
	if err != nil || !ok {
		t.Errorf("TryLock in another schema = %v, %v; want the lock", ok, err)
	} else {
		otherUnlock()
	}
	if u, ok, err := s.TryLock(ctx, "another"); err != nil || !ok {
		t.Errorf("TryLock(another name) = %v, %v; want it", ok, err)
	} else {
		u()
	}
	unlock()
	again, ok, err := s.TryLock(ctx, "reconcile")
	if err != nil || !ok {
		t.Fatalf("TryLock after unlock = %v, %v; want the lock", ok, err)
	}
	again()
}
