package stripepay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Webhook verifies one delivery of a Stripe event and maps it for the
// order flow. Subscribe the endpoint to:
//
//   - checkout.session.completed: payment.EventPaymentSucceeded when the
//     session is paid; with a delayed payment method still under way
//     (payment_status unpaid) it keeps its own type, and one of the next
//     two follows.
//   - checkout.session.async_payment_succeeded: payment.EventPaymentSucceeded.
//   - checkout.session.async_payment_failed, checkout.session.expired:
//     payment.EventPaymentFailed.
//   - refund.created, refund.updated, refund.failed:
//     payment.EventRefundSucceeded when the refund's status is succeeded (a
//     card refund at creation; a pending one on the update that ends it),
//     payment.EventRefundFailed when it failed or was canceled, with
//     Data.Refund set; a pending refund's keep their own type. Not
//     charge.refunded: it carries the charge, not the refund, and comes
//     whether the refund is pending or not. Stripe sends refund.* for
//     every refund since API version 2024-10-28.acacia; an endpoint of an
//     older version gets them only for refunds without a charge, and
//     refunds are then confirmed by Refund's answer and the reconciler.
//
// Any other type, and the above for a session not in payment mode or a
// refund of a payment not made through a Checkout Session, keeps its own
// type (the flow ignores it). Event.ID is Stripe's evt_ id.
//
// Data.Intent is the session (ID the cs_ id, Metadata, AmountMinor,
// Currency), with Payer and Refunds for the succeeded and refunded events,
// fetched from the API under ctx: a session event lacks the charge (its
// PaymentIntent is read with the latest charge), a refund event lacks the
// session (listed by the refund's PaymentIntent). A failed lookup is a
// plain error: the flow answers 5xx and Stripe delivers again.
//
// Verification: the Stripe-Signature header must carry a v1 signature of
// the body under one of Config.WebhookSecrets (checked by stripe-go's
// webhook package), and its timestamp must be within Config.Tolerance of
// now, either way (checked here, against the caller's now: stripe-go would
// read the wall clock, and only for age). Errors wrap
// payment.ErrBadSignature (no header, no valid signature, unknown secret)
// or payment.ErrStaleSignature (a valid signature of another time: a
// replay); a signed body that is not an event wraps payment.ErrBadEvent.
//
// API versions: an event is shaped by the API version of the endpoint that
// sends it, and stripe-go refuses events of another release train than
// APIVersion. Webhook accepts any: it reads from an event only fields
// every version has kept (the event's id, type and time; a session's id,
// mode, status, payment_status, metadata, amount_total, currency and
// payment_intent; a refund's id, amount, status, created and
// payment_intent) and takes the rest from the API, which answers in
// APIVersion. Refusing would have Stripe retry a good event for days, and
// the order go unsettled until the reconciler ran.
func (p *Provider) Webhook(ctx context.Context, header func(name string) string, body []byte, now time.Time) (payment.Event, error) {
	if err := p.verify(header(SignatureHeader), body, now); err != nil {
		return payment.Event{}, err
	}
	var ev stripe.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return payment.Event{}, fmt.Errorf("%w: %v", payment.ErrBadEvent, err)
	}
	switch {
	case ev.ID == "" || ev.Type == "":
		return payment.Event{}, fmt.Errorf("%w: id and type are required", payment.ErrBadEvent)
	case len(ev.ID) > 128:
		return payment.Event{}, fmt.Errorf("%w: id longer than 128 bytes", payment.ErrBadEvent)
	}
	// An event the flow does not act on keeps Stripe's name, marked as
	// Stripe's: payment_intent.succeeded is also a name of the flow's own.
	out := payment.Event{ID: ev.ID, Type: PassThroughPrefix + string(ev.Type), CreatedAt: unix(ev.Created)}
	var err error
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded,
		stripe.EventTypeCheckoutSessionAsyncPaymentFailed, stripe.EventTypeCheckoutSessionExpired:
		err = p.sessionEvent(ctx, &ev, &out)
	case stripe.EventTypeRefundCreated, stripe.EventTypeRefundUpdated, stripe.EventTypeRefundFailed:
		err = p.refundEvent(ctx, &ev, &out)
	}
	if err != nil {
		return payment.Event{}, err
	}
	return out, nil
}

// sessionEvent maps a checkout.session.* event.
func (p *Provider) sessionEvent(ctx context.Context, ev *stripe.Event, out *payment.Event) error {
	var s stripe.CheckoutSession
	if err := decodeObject(ev, &s); err != nil {
		return err
	}
	if s.Mode != stripe.CheckoutSessionModePayment {
		return nil
	}
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionAsyncPaymentFailed, stripe.EventTypeCheckoutSessionExpired:
		out.Type = payment.EventPaymentFailed
		in, err := p.intentOf(ctx, &s)
		in.Status = payment.IntentFailed // the event's word, newer than the session it carries
		out.Data.Intent = in
		return err
	case stripe.EventTypeCheckoutSessionCompleted:
		if s.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
			return nil // a delayed payment under way: async_payment_* follows
		}
	}
	out.Type = payment.EventPaymentSucceeded
	if s.PaymentIntent != nil && s.PaymentIntent.ID != "" {
		params := &stripe.PaymentIntentRetrieveParams{}
		params.AddExpand("latest_charge.refunds")
		start := time.Now()
		pi, err := p.sc.V1PaymentIntents.Retrieve(ctx, s.PaymentIntent.ID, params)
		err = apiError(err)
		p.observe(callWebhookLookup, start, err)
		if err != nil {
			return fmt.Errorf("stripe: event %s: read payment intent %s: %w", ev.ID, s.PaymentIntent.ID, err)
		}
		s.PaymentIntent = pi
	}
	in, err := p.intentOf(ctx, &s)
	if err != nil {
		return fmt.Errorf("stripe: event %s: %w", ev.ID, err)
	}
	out.Data.Intent = in
	return nil
}

// refundEvent maps a refund.created, refund.updated or refund.failed
// event by its refund's status.
func (p *Provider) refundEvent(ctx context.Context, ev *stripe.Event, out *payment.Event) error {
	var r stripe.Refund
	if err := decodeObject(ev, &r); err != nil {
		return err
	}
	var typ string
	switch refundOf(&r, "").Status {
	case payment.RefundSucceeded:
		typ = payment.EventRefundSucceeded
	case payment.RefundFailed:
		typ = payment.EventRefundFailed
	default:
		return nil // on its way: the refund's answer said so already
	}
	if r.PaymentIntent == nil || r.PaymentIntent.ID == "" {
		return nil
	}
	params := &stripe.CheckoutSessionListParams{PaymentIntent: stripe.String(r.PaymentIntent.ID)}
	params.Limit = stripe.Int64(1)
	params.Single = true
	params.AddExpand("data." + expandPayment)
	start := time.Now()
	var s *stripe.CheckoutSession
	var err error
	for got, lerr := range p.sc.V1CheckoutSessions.List(ctx, params) {
		if lerr != nil {
			err = apiError(lerr)
			break
		}
		s = got
		break
	}
	p.observe(callWebhookLookup, start, err)
	if err != nil {
		return fmt.Errorf("stripe: event %s: find the checkout session of payment intent %s: %w", ev.ID, r.PaymentIntent.ID, err)
	}
	if s == nil || s.Mode != stripe.CheckoutSessionModePayment {
		return nil // not a payment of ours
	}
	in, err := p.intentOf(ctx, s)
	if err != nil {
		return fmt.Errorf("stripe: event %s: %w", ev.ID, err)
	}
	refund := refundOf(&r, s.ID)
	// The listing may not show the refund yet: the event is the newer word.
	listed := false
	for i := range in.Refunds {
		if in.Refunds[i].ID == refund.ID {
			in.Refunds[i], listed = refund, true
		}
	}
	if !listed {
		in.Refunds = append(in.Refunds, refund)
	}
	out.Type = typ
	out.Data.Intent = in
	out.Data.Refund = &refund
	return nil
}

// decodeObject reads an event's data.object into v.
func decodeObject(ev *stripe.Event, v any) error {
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return fmt.Errorf("%w: %s without data.object", payment.ErrBadEvent, ev.Type)
	}
	if err := json.Unmarshal(ev.Data.Raw, v); err != nil {
		return fmt.Errorf("%w: %s data.object: %v", payment.ErrBadEvent, ev.Type, err)
	}
	return nil
}

// verify checks a Stripe-Signature header over body at now; see Webhook.
func (p *Provider) verify(sig string, body []byte, now time.Time) error {
	err := errors.New("no webhook secret is configured")
	for _, secret := range p.cfg.WebhookSecrets {
		if err = webhook.ValidatePayloadIgnoringTolerance(body, sig, secret); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", payment.ErrBadSignature, err)
	}
	// Checked after the signature, so the time cannot be forged to pass.
	at, ok := signedAt(sig)
	if !ok {
		return fmt.Errorf("%w: no timestamp", payment.ErrBadSignature)
	}
	if d := now.Sub(at); d > p.cfg.Tolerance || d < -p.cfg.Tolerance {
		return fmt.Errorf("%w: signed at %s", payment.ErrStaleSignature, at.UTC().Format(time.RFC3339))
	}
	return nil
}

// signedAt is the t= of a Stripe-Signature header (the last one, as
// stripe-go reads it).
func signedAt(sig string) (time.Time, bool) {
	var at time.Time
	ok := false
	for part := range strings.SplitSeq(sig, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		at, ok = time.Unix(sec, 0), true
	}
	return at, ok
}
