package orders

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Webhook results, as counted in metrics and answered to the gateway.
const (
	WebhookApplied   = "applied"   // the event changed an order (or found it already changed)
	WebhookDuplicate = "duplicate" // the event was handled before
	WebhookIgnored   = "ignored"   // a type we do not act on, or an order we do not know
)

// HandleWebhook verifies and settles one gateway event. Errors wrapping
// payment.ErrBadSignature or payment.ErrStaleSignature mean the sender is
// not the gateway (401), payment.ErrBadEvent a body that is not an event
// (400); any other error is ours or a dependency's, and the gateway will
// deliver the event again.
func (s *Service) HandleWebhook(ctx context.Context, signature string, body []byte) (string, error) {
	if err := payment.VerifySignature(signature, body, s.opts.WebhookSecrets, s.opts.Clock(), s.opts.Tolerance); err != nil {
		s.m.webhooks.WithLabelValues("bad_signature").Inc()
		return "", err
	}
	ev, err := payment.ParseEvent(body)
	if err != nil {
		s.m.webhooks.WithLabelValues("bad_event").Inc()
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
	var change func(ledger.Order) (ledger.Order, error)
	switch ev.Type {
	case payment.EventPaymentSucceeded:
		change = func(o ledger.Order) (ledger.Order, error) { return s.paid(ctx, o, in) }
	case payment.EventPaymentFailed:
		change = func(o ledger.Order) (ledger.Order, error) { return s.failed(ctx, o) }
	case payment.EventRefundSucceeded:
		change = func(o ledger.Order) (ledger.Order, error) { return refunded(o, ev.Data.Refund), nil }
	default:
		return s.ignore(ctx, ev, "unhandled event type")
	}
	orderID := in.OrderID()
	if orderID == "" {
		return s.ignore(ctx, ev, "intent names no order")
	}
	// The intent may not have been recorded if the origin stopped right
	// after creating it; the event names it.
	if err := s.ledger.SetOrderIntent(ctx, orderID, in.ID, in.PayURL); err != nil {
		return "", err
	}
	o, err := s.ledger.ChangeOrder(ctx, orderID, ev.ID, ev.Type, change)
	switch {
	case errors.Is(err, ledger.ErrDuplicateEvent):
		return WebhookDuplicate, nil
	case errors.Is(err, ledger.ErrNotFound):
		s.m.alerts.WithLabelValues("unknown_order").Inc()
		return s.ignore(ctx, ev, "unknown order")
	case err != nil:
		return "", err
	}
	s.refundIfOwed(ctx, o)
	return WebhookApplied, nil
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
// paid; a hold that is gone (expired, cancelled) sells nothing and the
// money is owed back. Safe to repeat: the pay script sells once.
func (s *Service) paid(ctx context.Context, o ledger.Order, in payment.Intent) (ledger.Order, error) {
	if o.Status == ledger.OrderPaid || o.Status == ledger.OrderRefunded {
		return o, nil
	}
	if in.AmountMinor != o.AmountMinor || in.Currency != o.Currency {
		// Not the price of the unit: do not sell it for that.
		s.m.alerts.WithLabelValues("amount_mismatch").Inc()
		s.log.Error("payment amount differs from the order; refunding", "order", o.ID, "intent", in.ID,
			"paid", in.AmountMinor, "currency", in.Currency, "price", o.AmountMinor)
		return owe(o), nil
	}
	outcome, err := s.redis.Pay(ctx, o.Sale, hold(o), o.ID)
	if err != nil {
		return ledger.Order{}, err
	}
	if outcome == checkout.HoldGone {
		s.log.Warn("payment came after the hold was gone; refunding", "order", o.ID, "reservation", o.ReservationID)
		return owe(o), nil
	}
	o.Status = ledger.OrderPaid
	o.PaidAt = s.opts.Clock().UTC()
	s.m.paid.Inc()
	return o, nil
}

// failed settles a failed payment: the hold goes at once and its unit goes
// back to those still in line.
func (s *Service) failed(ctx context.Context, o ledger.Order) (ledger.Order, error) {
	if o.Status != ledger.OrderPendingPayment {
		return o, nil
	}
	if _, err := s.redis.DropUnpaid(ctx, o.Sale, hold(o)); err != nil {
		return ledger.Order{}, err
	}
	o.Status = ledger.OrderCancelled
	return o, nil
}

// refunded records a refund the gateway has made.
func refunded(o ledger.Order, r *payment.Refund) ledger.Order {
	if o.Status != ledger.OrderRefunded || r == nil {
		return o
	}
	o.RefundStatus, o.RefundID = ledger.RefundIssued, r.ID
	return o
}

func owe(o ledger.Order) ledger.Order {
	o.Status, o.RefundStatus = ledger.OrderRefunded, ledger.RefundOwed
	return o
}

// refundIfOwed issues an owed refund now; if the gateway cannot take it,
// the reconciler tries again.
func (s *Service) refundIfOwed(ctx context.Context, o ledger.Order) {
	if o.RefundStatus != ledger.RefundOwed {
		return
	}
	if err := s.issueRefund(ctx, o); err != nil {
		s.log.Warn("refund not issued yet; the reconciler will retry", "order", o.ID, "err", err)
	}
}

// issueRefund asks the gateway to give back everything paid on the order's
// intent, under a key derived from the order (so never twice), and records
// it.
func (s *Service) issueRefund(ctx context.Context, o ledger.Order) error {
	if o.IntentID == "" {
		return fmt.Errorf("order %s owes a refund but has no payment intent", o.ID)
	}
	r, err := s.gateway.Refund(ctx, o.IntentID, 0, "order-"+o.ID+"-refund")
	if err != nil {
		return err
	}
	_, err = s.ledger.ChangeOrder(ctx, o.ID, "", "", func(o ledger.Order) (ledger.Order, error) {
		return refunded(o, &r), nil
	})
	if err != nil {
		return err
	}
	s.m.refunds.Inc()
	return nil
}
