package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

var now = time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)

func refundedOrder(status, refundID string) ledger.Order {
	return ledger.Order{ID: "o1", Status: ledger.OrderRefunded, AmountMinor: 500, RefundStatus: status, RefundID: refundID}
}

func refund(id, status string) payment.Refund {
	return payment.Refund{ID: id, AmountMinor: 500, Status: status}
}

// What the gateway says of a refund becomes the order's record of it.
func TestRecordRefund(t *testing.T) {
	earlier := now.Add(-time.Hour)
	tests := []struct {
		name       string
		order      ledger.Order
		refund     payment.Refund
		status, id string
		refundedAt time.Time
	}{
		{name: "owed, taken pending", order: refundedOrder(ledger.RefundOwed, ""), refund: refund("re_1", payment.RefundPending),
			status: ledger.RefundIssued, id: "re_1"},
		{name: "owed, done at once", order: refundedOrder(ledger.RefundOwed, ""), refund: refund("re_1", payment.RefundSucceeded),
			status: ledger.RefundIssued, id: "re_1", refundedAt: now},
		{name: "owed, failed at once", order: refundedOrder(ledger.RefundOwed, ""), refund: refund("re_1", payment.RefundFailed),
			status: ledger.RefundOwed, id: "re_1"},
		{name: "on its way, done", order: refundedOrder(ledger.RefundIssued, "re_1"), refund: refund("re_1", payment.RefundSucceeded),
			status: ledger.RefundIssued, id: "re_1", refundedAt: now},
		{name: "on its way, failed", order: refundedOrder(ledger.RefundIssued, "re_1"), refund: refund("re_1", payment.RefundFailed),
			status: ledger.RefundOwed, id: "re_1"},
		{name: "owed after a failure, the next taken", order: refundedOrder(ledger.RefundOwed, "re_1"), refund: refund("re_2", payment.RefundPending),
			status: ledger.RefundIssued, id: "re_2"},
		{name: "done stays dated when told again", order: func() ledger.Order {
			o := refundedOrder(ledger.RefundIssued, "re_1")
			o.RefundedAt = earlier
			return o
		}(), refund: refund("re_1", payment.RefundSucceeded), status: ledger.RefundIssued, id: "re_1", refundedAt: earlier},
		{name: "another refund while one is on its way", order: refundedOrder(ledger.RefundIssued, "re_2"), refund: refund("re_1", payment.RefundFailed),
			status: ledger.RefundIssued, id: "re_2"},
		{name: "not a refunded order", order: ledger.Order{ID: "o1", Status: ledger.OrderPaid}, refund: refund("re_1", payment.RefundSucceeded)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := recordRefund(tc.order, tc.refund, now)
			if got.RefundStatus != tc.status || got.RefundID != tc.id || !got.RefundedAt.Equal(tc.refundedAt) || got.Status != tc.order.Status {
				t.Errorf("recordRefund = %s %s/%q at %v, want %s/%q at %v", got.Status, got.RefundStatus, got.RefundID, got.RefundedAt,
					tc.status, tc.id, tc.refundedAt)
			}
		})
	}
}

// A refund event changes the order only when it is news of the order's
// own refund, or of one giving all back while the order still owes it.
func TestRefundEvent(t *testing.T) {
	paid := payment.Intent{ID: "pi_1", Status: payment.IntentSucceeded, AmountMinor: 500}
	with := func(rs ...payment.Refund) payment.Intent {
		in := paid
		in.Refunds = rs
		return in
	}
	full, half := refund("re_9", payment.RefundPending), payment.Refund{ID: "re_9", AmountMinor: 250, Status: payment.RefundPending}
	failed := refund("re_1", payment.RefundFailed)
	tests := []struct {
		name       string
		order      ledger.Order
		in         payment.Intent
		refund     *payment.Refund
		status, id string
	}{
		{"no refund in the event", refundedOrder(ledger.RefundOwed, ""), with(), nil, ledger.RefundOwed, ""},
		{"owed: a full refund found", refundedOrder(ledger.RefundOwed, ""), with(full), &full, ledger.RefundIssued, "re_9"},
		{"owed: a partial one is not the order's", refundedOrder(ledger.RefundOwed, ""), with(half), &half, ledger.RefundOwed, ""},
		{"owed: an old failure is not news", refundedOrder(ledger.RefundOwed, "re_2"), with(failed), &failed, ledger.RefundOwed, "re_2"},
		{"issued: its own failure", refundedOrder(ledger.RefundIssued, "re_1"), with(failed), &failed, ledger.RefundOwed, "re_1"},
		{"issued: another's news", refundedOrder(ledger.RefundIssued, "re_2"), with(full), &full, ledger.RefundIssued, "re_2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := refundEvent(tc.order, tc.in, tc.refund, now)
			if got.RefundStatus != tc.status || got.RefundID != tc.id {
				t.Errorf("refundEvent = %s/%q, want %s/%q", got.RefundStatus, got.RefundID, tc.status, tc.id)
			}
		})
	}
}

// One key per order, and a new one after each refund that failed.
func TestRefundKey(t *testing.T) {
	first := refundKey(refundedOrder(ledger.RefundOwed, ""))
	after1 := refundKey(refundedOrder(ledger.RefundOwed, "re_1"))
	after2 := refundKey(refundedOrder(ledger.RefundOwed, "re_2"))
	if first != "order-o1-refund" || after1 == first || after2 == after1 || after1 != refundKey(refundedOrder(ledger.RefundOwed, "re_1")) {
		t.Errorf("refund keys = %q, %q, %q; want one per order, a new one after each failure, each stable", first, after1, after2)
	}
}

// refundGateway plays a gateway's refunds for TestStaleRefundAnswers: the
// same key gets the same refund back, as it stands now (a replay of a
// refund that has since failed reads failed).
type refundGateway struct {
	payment.Provider // the rest is not called
	byKey            map[string]*payment.Refund
}

func (g *refundGateway) Refund(_ context.Context, intentID string, _ int64, key string) (payment.Refund, error) {
	r, ok := g.byKey[key]
	if !ok {
		r = &payment.Refund{ID: fmt.Sprintf("re_%d", len(g.byKey)+1), IntentID: intentID, AmountMinor: 500, Status: payment.RefundPending}
		g.byKey[key] = r
	}
	return *r, nil
}

func (g *refundGateway) fail(id string) payment.Refund {
	for _, r := range g.byKey {
		if r.ID == id {
			r.Status = payment.RefundFailed
			return *r
		}
	}
	panic("no refund " + id)
}

// An order read before its refund moved on (the reconciler's list, read
// before a webhook recorded the refund's failure and the next refund was
// issued) gets the old refund back under the old key, now failed: that is
// old news, not a second failure to alert on, and the order keeps the
// refund under way. Likewise a refund listed as on its way whose failure a
// webhook recorded meanwhile is not alerted on twice.
func TestStaleRefundAnswers(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t)
	if err := ledger.Migrate(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	ls := ledger.New(env.DB)
	start := time.Now().UTC().Truncate(time.Second)
	if _, err := ls.CreateSale(ctx, ledger.Sale{ID: "s1", Name: "Sale", StartsAt: start.Add(-time.Minute), EndsAt: start.Add(time.Hour),
		HoldTTL: time.Minute, PerAccountLimit: 1, SKUs: []ledger.SKU{{SKU: "a", Name: "A", PriceMinor: 500, Currency: "INR", Stock: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ls.CreateOrder(ctx, ledger.Order{ID: "o1", ReservationID: "r1", Sale: "s1", SKU: "a", Account: "u1",
		AmountMinor: 500, Currency: "INR", IdempotencyKey: "k1", IntentID: "in_1"}); err != nil {
		t.Fatal(err)
	}
	change := func(f func(ledger.Order) ledger.Order) ledger.Order {
		t.Helper()
		o, err := ls.ChangeOrder(ctx, "o1", "", "", func(o ledger.Order) (ledger.Order, error) { return f(o), nil })
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	gw := &refundGateway{byKey: map[string]*payment.Refund{}}
	reg := prometheus.NewRegistry()
	s := New(nil, ls, nil, nil, gw, Options{}, slog.New(slog.DiscardHandler), reg)
	alerts := func() float64 { return testutil.ToFloat64(s.m.alerts.WithLabelValues("refund_failed")) }

	listed := change(func(o ledger.Order) ledger.Order { o.IntentID = "in_1"; return owe(o) })
	if err := s.issueRefund(ctx, listed); err != nil {
		t.Fatalf("issueRefund = %v, want the first refund taken", err)
	}
	// The webhook: the first refund failed; the next is issued at once.
	owed := change(func(o ledger.Order) ledger.Order { return recordRefund(o, gw.fail("re_1"), now) })
	if err := s.issueRefund(ctx, owed); err != nil {
		t.Fatalf("issueRefund after the failure = %v, want the next refund taken", err)
	}

	// The reconciler, with the order as it listed it: the first key again.
	if err := s.issueRefund(ctx, listed); !errors.Is(err, errRefundMovedOn) {
		t.Errorf("issueRefund(as listed) = %v, want errRefundMovedOn", err)
	}
	o, err := ls.Order(ctx, "o1")
	if err != nil || o.RefundStatus != ledger.RefundIssued || o.RefundID != "re_2" {
		t.Errorf("order = %s %q (%v), want the second refund under way (issued, re_2)", o.RefundStatus, o.RefundID, err)
	}

	// The second fails too; the reconciler listed the order with it on its
	// way, the webhook records the failure (and alerts), then the
	// reconciler reads the gateway.
	onItsWay := o
	change(func(o ledger.Order) ledger.Order { return recordRefund(o, gw.fail("re_2"), now) })
	rep := Report{Repaired: map[string]int{}, Alerts: map[string]int{}}
	in := payment.Intent{ID: "in_1", AmountMinor: 500, Refunds: []payment.Refund{*gw.byKey["order-o1-refund"], *gw.byKey["order-o1-refund-after-re_1"]}}
	if err := s.reconcileRefund(ctx, &rep, onItsWay, in, func(kind, msg string) { t.Errorf("alert %s: %s", kind, msg) }); err != nil {
		t.Fatal(err)
	}
	if rep.Alerts["refund_failed"] != 0 || rep.Repaired["refund_failed"] != 0 || alerts() != 0 {
		t.Errorf("reconciling old news: repaired %v, alerted %v (%v in all), want nothing", rep.Repaired, rep.Alerts, alerts())
	}
}
