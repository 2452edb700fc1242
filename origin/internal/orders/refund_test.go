package orders

import (
	"testing"
	"time"

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
