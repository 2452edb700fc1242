package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Webhook results, as counted in metrics and answered to the gateway.
const (
	WebhookApplied   = "applied"   // the event changed an order (or found it already changed)
	WebhookDuplicate = "duplicate" // the event was handled before
	WebhookIgnored   = "ignored"   // a type we do not act on, or an order we do not know
)

// HandleWebhook verifies and settles one gateway event, as the provider
// reads it from the request's headers (header) and raw body. Errors
// wrapping payment.ErrBadSignature or payment.ErrStaleSignature mean the
// sender is not the gateway (401), payment.ErrBadEvent a body that is not
// an event (400); any other error is ours or a dependency's, and the
// gateway will deliver the event again.
func (s *Service) HandleWebhook(ctx context.Context, header func(name string) string, body []byte) (string, error) {
	ev, err := s.gateway.Webhook(ctx, header, body, s.opts.Clock.Now())
	switch {
	case errors.Is(err, payment.ErrBadSignature) || errors.Is(err, payment.ErrStaleSignature):
		s.m.webhooks.WithLabelValues("bad_signature").Inc()
		return "", err
	case errors.Is(err, payment.ErrBadEvent):
		s.m.webhooks.WithLabelValues("bad_event").Inc()
		return "", err
	case err != nil: // the provider's API, asked for what the event lacks, did not answer: it delivers again
		s.m.webhooks.WithLabelValues("failed").Inc()
		return "", err
	}
	result, err := s.handleEvent(ctx, ev)
	if err != nil {
		s.m.webhooks.WithLabelValues("failed").Inc()
		return "", err
	}
	s.m.webhooks.WithLabelValues(result).Inc()
	return result, nil
}

func (s *Service) handleEvent(ctx context.Context, ev payment.Event) (string, error) {
	in := ev.Data.Intent
	switch ev.Type {
	case payment.EventPaymentSucceeded, payment.EventPaymentFailed, payment.EventRefundSucceeded, payment.EventRefundFailed:
	default:
		return s.ignore(ctx, ev, "unhandled event type")
	}
	if in.ID == "" {
		return "", fmt.Errorf("%w: %s without data.intent.intent_id", payment.ErrBadEvent, ev.Type)
	}
	orderID := in.OrderID()
	if orderID == "" {
		s.m.alerts.WithLabelValues("unknown_order").Inc()
		return s.ignore(ctx, ev, "intent names no order")
	}
	var foreign, refundFailed bool
	o, err := s.settle(ctx, orderID, ev.ID, ev.Type, func(st *settling, o ledger.Order) (ledger.Order, error) {
		if o.IntentID == "" {
			// Not recorded yet (the intent call is still being answered,
			// or the origin stopped right after it): the event names it,
			// and ChangeOrder records it with the change.
			o.IntentID, o.PayURL = in.ID, in.PayURL
		}
		if o.IntentID != in.ID {
			foreign = true // not the order's intent: settled apart, below
			return o, nil
		}
		switch ev.Type {
		case payment.EventPaymentSucceeded:
			return s.paid(ctx, st, o, in)
		case payment.EventPaymentFailed:
			return s.failed(ctx, o)
		}
		next := refundEvent(o, in, ev.Data.Refund, s.opts.Clock.Now())
		refundFailed = o.RefundStatus == ledger.RefundIssued && next.RefundStatus == ledger.RefundOwed
		return next, nil
	})
	switch {
	case errors.Is(err, ledger.ErrDuplicateEvent):
		return WebhookDuplicate, nil
	case errors.Is(err, ledger.ErrNotFound):
		s.m.alerts.WithLabelValues("unknown_order").Inc()
		return s.ignore(ctx, ev, "unknown order")
	case err != nil:
		return "", err
	}
	if foreign {
		s.foreignIntent(ctx, o, ev)
		return WebhookIgnored, nil
	}
	if refundFailed {
		s.refundFailed(nil, o, fmt.Errorf("%w (refund %s)", errRefundFailed, o.RefundID))
	}
	s.refundIfOwed(ctx, o)
	return WebhookApplied, nil
}

// settling is one settle's change in progress: its transaction, and what
// it decided that is counted once the change is committed.
type settling struct {
	tx *ledger.OrderTx
	// payerRefused: the one-unit-per-payer rule refused the payment.
	payerRefused bool
}

// settle changes an order (recording eventID, if any, as handled) and
// counts what changed once it is committed.
func (s *Service) settle(ctx context.Context, orderID, eventID, eventType string, change func(*settling, ledger.Order) (ledger.Order, error)) (ledger.Order, error) {
	var before, wanted string
	var st settling
	after, err := s.ledger.ChangeOrderTx(ctx, orderID, eventID, eventType, func(tx *ledger.OrderTx, o ledger.Order) (ledger.Order, error) {
		before = o.Status
		st = settling{tx: tx}
		next, err := change(&st, o)
		wanted = next.Status
		return next, err
	})
	if err == nil && wanted == ledger.OrderPaid && after.Status == ledger.OrderRefunded {
		// Redis sold a unit Postgres does not have: Redis had drifted.
		s.m.alerts.WithLabelValues("paid_without_unit").Inc()
		s.log.Error("payment alert: Redis sold a unit Postgres does not have; refunding (rebuild the sale)",
			"order", after.ID, "reservation", after.ReservationID)
	}
	if err == nil && after.Status != before {
		switch after.Status {
		case ledger.OrderPaid:
			s.m.paid.Inc()
		case ledger.OrderRefunded:
			if st.payerRefused {
				// The payer is not logged: it is the shopper's bank account.
				s.m.payerRefusals.Inc()
				s.log.Warn("payment refused: its payer has paid for another order of the sale; refunding",
					"order", after.ID, "sale", after.Sale, "reservation", after.ReservationID)
				break
			}
			s.log.Warn("payment came when the hold was gone; refunding", "order", after.ID, "reservation", after.ReservationID)
		}
	}
	return after, err
}

// foreignIntent: money on an intent that is not the order's own (a second
// intent, a gateway bug) never buys the unit; a payment on it goes back.
func (s *Service) foreignIntent(ctx context.Context, o ledger.Order, ev payment.Event) {
	in := ev.Data.Intent
	s.m.alerts.WithLabelValues("second_intent").Inc()
	s.log.Error("payment alert: an event for an intent that is not the order's", "order", o.ID,
		"order_intent", o.IntentID, "intent", in.ID, "type", ev.Type)
	if ev.Type != payment.EventPaymentSucceeded || in.Refunded() >= in.AmountMinor {
		return
	}
	if _, err := s.gateway.Refund(ctx, in.ID, 0, "intent-"+in.ID+"-refund"); err != nil {
		s.log.Warn("refund of a second intent not issued; the reconciler will retry", "intent", in.ID, "err", err)
	}
}

func (s *Service) ignore(ctx context.Context, ev payment.Event, why string) (string, error) {
	fresh, err := s.ledger.RecordEvent(ctx, ev.ID, ev.Type)
	if err != nil {
		return "", err
	}
	if !fresh {
		return WebhookDuplicate, nil
	}
	s.log.Warn("payment event ignored", "event", ev.ID, "type", ev.Type, "intent", ev.Data.Intent.ID, "why", why)
	return WebhookIgnored, nil
}

// paid settles a succeeded payment: a held unit becomes sold and the order
// paid (the ledger records the sale in the same transaction); a hold that
// is gone (expired, cancelled) sells nothing and the money is owed back,
// and so is a payment the one-unit-per-payer rule refuses (refusePayer).
// Safe to repeat: the pay script sells once.
func (s *Service) paid(ctx context.Context, st *settling, o ledger.Order, in payment.Intent) (ledger.Order, error) {
	if o.Status == ledger.OrderPaid || o.Status == ledger.OrderRefunded {
		return o, nil
	}
	o.Payer = in.Payer
	if in.AmountMinor != o.AmountMinor || in.Currency != o.Currency {
		// Not the price of the unit: do not sell it for that.
		s.m.alerts.WithLabelValues("amount_mismatch").Inc()
		s.log.Error("payment alert: the amount paid differs from the order; refunding", "order", o.ID, "intent", in.ID,
			"paid", in.AmountMinor, "currency", in.Currency, "price", o.AmountMinor)
		return owe(o), nil
	}
	// The rule is decided before Redis sells anything, so a refused
	// payment never puts Redis's sold count ahead of Postgres's.
	refused, err := s.refusePayer(ctx, st, o)
	if err != nil {
		return ledger.Order{}, err
	}
	if refused {
		st.payerRefused = true
		return owe(o), nil
	}
	outcome, err := s.checkout.Pay(ctx, o.Sale, hold(o), o.ID)
	if err != nil {
		return ledger.Order{}, err
	}
	if outcome == checkout.HoldUnknown {
		// Redis does not know the hold: Postgres says whether it lives.
		if err := s.holdGone(ctx, o.ReservationID, ""); err != nil {
			return ledger.Order{}, err
		}
		if r, err := s.ledger.Reservation(ctx, o.ReservationID); err == nil && r.Status == intent.Paid {
			outcome = checkout.PaidBefore
		} else {
			outcome = checkout.HoldGone
		}
	}
	if outcome == checkout.HoldGone {
		return owe(o), nil
	}
	o.Status = ledger.OrderPaid
	o.PaidAt = s.opts.Clock.Now().UTC()
	return o, nil
}

// refusePayer applies the one-unit-per-payer rule to a payment for o: in
// a sale with the rule on, it claims o's payer in the settling
// transaction, and when another order of the sale holds it, it releases
// o's hold at once (its unit goes back to the line, as a failed
// payment's does) and reports true: o is not sold. A payment without a
// payer is never refused.
//
// One case keeps the sale: an earlier try at this same payment had Redis
// sell the unit, and its write was lost (the origin stopped) before the
// other order claimed the payer. Redis cannot unsell; the payer has two
// units, and an alert says so.
func (s *Service) refusePayer(ctx context.Context, st *settling, o ledger.Order) (bool, error) {
	if o.Payer == "" {
		return false, nil
	}
	sale, err := s.catalog.Get(ctx, o.Sale)
	if err != nil {
		return false, err
	}
	if !sale.OneUnitPerPayer {
		return false, nil
	}
	held, err := st.tx.ClaimPayer(ctx, o.Payer)
	if err != nil || held {
		return false, err
	}
	released, err := s.checkout.PaymentFailed(ctx, o.Sale, hold(o))
	if err != nil {
		return false, err
	}
	if released {
		return true, nil
	}
	// Not held any more: find out whether it was sold.
	sold := false
	r, err := s.checkout.Reservation(ctx, o.Sale, o.ReservationID)
	switch {
	case err == nil:
		sold = r.Status == intent.Paid
	case errors.Is(err, checkout.ErrNotFound):
		// Redis does not know the hold: Postgres says whether it lives
		// (Redis is being restored: try again) or was sold.
		if err := s.holdGone(ctx, o.ReservationID, ""); err != nil {
			return false, err
		}
		pr, err := s.ledger.Reservation(ctx, o.ReservationID)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return false, err
		}
		sold = err == nil && pr.Status == intent.Paid
	default:
		return false, err
	}
	if sold {
		s.m.alerts.WithLabelValues("payer_paid_twice").Inc()
		s.log.Error("payment alert: a payer has two paid orders in a one-unit-per-payer sale (a lost write sold the second first)",
			"order", o.ID, "sale", o.Sale)
	}
	return !sold, nil
}

// failed settles a failed payment: the hold goes at once and its unit goes
// back to those still in line. A hold Redis shows as paid stays so (a
// failure reported after a success is the gateway's muddle, and the
// reconciler raises it).
func (s *Service) failed(ctx context.Context, o ledger.Order) (ledger.Order, error) {
	if o.Status != ledger.OrderPendingPayment {
		return o, nil
	}
	released, err := s.checkout.PaymentFailed(ctx, o.Sale, hold(o))
	if err != nil {
		return ledger.Order{}, err
	}
	if !released {
		r, err := s.checkout.Reservation(ctx, o.Sale, o.ReservationID)
		switch {
		case err == nil && r.Status == intent.Paid:
			return o, nil
		case errors.Is(err, checkout.ErrNotFound):
			if err := s.holdGone(ctx, o.ReservationID, ""); err != nil {
				return ledger.Order{}, err
			}
		case err != nil:
			return ledger.Order{}, err
		}
	}
	o.Status = ledger.OrderCancelled
	return o, nil
}

// refundEvent records what a refund event says of the order's refund: news
// of the order's own refund (recordRefund), or of one the order has not
// recorded that gives back all that was paid (its answer lost, or made by
// hand in the provider's dashboard: the money goes back once). Any other
// refund — an earlier one that failed, a partial one — changes nothing.
func refundEvent(o ledger.Order, in payment.Intent, r *payment.Refund, now time.Time) ledger.Order {
	switch {
	case r == nil:
		return o
	case r.ID == o.RefundID,
		o.RefundStatus == ledger.RefundOwed && r.Status != payment.RefundFailed && in.Refunded() >= in.AmountMinor:
		return recordRefund(o, *r, now)
	}
	return o
}

// recordRefund records r, a refund of the order's payment, as the order's
// refund: taken (issued), and dated once the money is back; or failed, which
// makes the refund owed again, the failed one named so that the next gets
// a key of its own (refundKey).
func recordRefund(o ledger.Order, r payment.Refund, now time.Time) ledger.Order {
	if o.Status != ledger.OrderRefunded {
		return o
	}
	if o.RefundStatus == ledger.RefundIssued && o.RefundID != r.ID {
		return o // the order has another refund under way
	}
	o.RefundID = r.ID
	switch r.Status {
	case payment.RefundFailed:
		o.RefundStatus, o.RefundedAt = ledger.RefundOwed, time.Time{}
	case payment.RefundSucceeded:
		o.RefundStatus = ledger.RefundIssued
		if o.RefundedAt.IsZero() {
			o.RefundedAt = now
		}
	default:
		o.RefundStatus = ledger.RefundIssued
	}
	return o
}

// refundFailed alerts on an order whose refund failed at the gateway: it
// is issued again at once, and a person may need to reach the shopper (a
// closed bank account fails every refund to it).
// A reconciliation counts it in rep (nil otherwise).
func (s *Service) refundFailed(rep *Report, o ledger.Order, err error) {
	if rep == nil {
		rep = &Report{Alerts: map[string]int{}}
	}
	s.alert(rep, "refund_failed", "a refund failed at the gateway; issuing another", "order", o.ID, "intent", o.IntentID, "err", err)
}

// refundKey is the idempotency key of the order's next refund: one per
// order, so never two at once; after one that failed (the provider answers
// it again under its key), one derived from the failed refund's id.
func refundKey(o ledger.Order) string {
	if o.RefundID == "" {
		return "order-" + o.ID + "-refund"
	}
	return "order-" + o.ID + "-refund-after-" + o.RefundID
}

// refundMovedOn reports whether cur, the order as it stands, no longer owes
// the refund asked for when it read as asked: it owes none, or owes one
// after a later failure (another key).
func refundMovedOn(cur, asked ledger.Order) bool {
	return cur.RefundStatus != ledger.RefundOwed || cur.RefundID != asked.RefundID
}

func owe(o ledger.Order) ledger.Order {
	o.Status, o.RefundStatus, o.PaidAt = ledger.OrderRefunded, ledger.RefundOwed, time.Time{}
	return o
}

// refundIfOwed issues an owed refund now; if the gateway cannot take it,
// the reconciler tries again.
func (s *Service) refundIfOwed(ctx context.Context, o ledger.Order) {
	if o.RefundStatus != ledger.RefundOwed {
		return
	}
	err := s.issueRefund(ctx, o)
	switch {
	case errors.Is(err, errRefundFailed):
		s.refundFailed(nil, o, err)
	case errors.Is(err, errRefundMovedOn):
		// The reconciler or another origin recorded it first.
	case err != nil:
		s.log.Warn("refund not issued yet; the reconciler will retry", "order", o.ID, "err", err)
	}
}

var (
	// errRefundFailed: the refund the gateway was asked for failed (the
	// shopper's account refuses it, say); the order owes it again.
	errRefundFailed = errors.New("the refund failed at the gateway")
	// errRefundMovedOn: while the gateway answered, a webhook or another
	// origin recorded this refund or a later one; the answer changes nothing.
	errRefundMovedOn = errors.New("the order's refund moved on while the gateway answered")
)

// issueRefund asks the gateway to give back everything paid on the order's
// intent, under refundKey (so never twice), and records the refund the
// gateway took: issued, or owed again if it failed (errRefundFailed). o may
// be stale (the reconciler's list): the answer is recorded only if the
// order still owes the refund o's key asked for (else errRefundMovedOn), so
// an old failure replayed under an old key is not a new one.
func (s *Service) issueRefund(ctx context.Context, o ledger.Order) error {
	if o.IntentID == "" {
		return fmt.Errorf("order %s owes a refund but has no payment intent", o.ID)
	}
	r, err := s.gateway.Refund(ctx, o.IntentID, 0, refundKey(o))
	if err != nil {
		return fmt.Errorf("refund order %s: %w", o.ID, err)
	}
	var before string
	movedOn := false
	after, err := s.ledger.ChangeOrder(ctx, o.ID, "", "", func(cur ledger.Order) (ledger.Order, error) {
		before = cur.RefundStatus
		if movedOn = refundMovedOn(cur, o); movedOn {
			return cur, nil
		}
		return recordRefund(cur, r, s.opts.Clock.Now()), nil
	})
	if err != nil {
		return err
	}
	if movedOn {
		return fmt.Errorf("refund order %s: %w (asked under %s, got %s)", o.ID, errRefundMovedOn, refundKey(o), r.ID)
	}
	if r.Status == payment.RefundFailed {
		return fmt.Errorf("refund order %s: %w (refund %s)", o.ID, errRefundFailed, r.ID)
	}
	if before != after.RefundStatus {
		s.m.refunds.Inc()
	}
	return nil
}
