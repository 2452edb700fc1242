package razorpay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Webhook headers: the body's signature, and the event's id, unique per
// event (https://razorpay.com/docs/webhooks/validate-test).
// PassThroughPrefix marks the type of an event the order flow does not act
// on, which Webhook passes on under Razorpay's name ("razorpay:payment.failed").
const PassThroughPrefix = "razorpay:"

const (
	SignatureHeader = "X-Razorpay-Signature"
	EventIDHeader   = "X-Razorpay-Event-Id"
)

// Razorpay events this adapter maps; every other event keeps its own name
// as the Event's type, which the order flow ignores.
const (
	EventLinkPaid        = "payment_link.paid"
	EventLinkExpired     = "payment_link.expired"
	EventLinkCancelled   = "payment_link.cancelled"
	EventRefundProcessed = "refund.processed"
	EventRefundFailed    = "refund.failed"
)

// maxEventID matches payment.ParseEvent's bound on an event id.
const maxEventID = 128

// Sign returns the X-Razorpay-Signature of body under secret: the hex
// HMAC-SHA256 of the raw body. It is what Razorpay sends, and what tests
// and the sandbox playing Razorpay use to sign deliveries.
func Sign(body, secret []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// VerifySignature checks an X-Razorpay-Signature header over body: it
// must be the hex HMAC-SHA256 of body under one of secrets (several let a
// secret rotate). Comparisons take constant time. Razorpay signs no time,
// so nothing here stops a replay (see the package doc).
func VerifySignature(header string, body []byte, secrets [][]byte) error {
	sig, err := hex.DecodeString(strings.TrimSpace(header))
	if err != nil || len(sig) != sha256.Size {
		return payment.ErrBadSignature
	}
	valid := false
	mac := make([]byte, 0, sha256.Size)
	for _, secret := range secrets {
		h := hmac.New(sha256.New, secret)
		h.Write(body)
		mac = h.Sum(mac[:0])
		if hmac.Equal(mac, sig) {
			valid = true
		}
	}
	if !valid {
		return payment.ErrBadSignature
	}
	return nil
}

// envelope is a webhook body.
type envelope struct {
	Entity    string `json:"entity"`
	Event     string `json:"event"`
	CreatedAt int64  `json:"created_at"`
	Payload   struct {
		PaymentLink *struct {
			Entity link `json:"entity"`
		} `json:"payment_link"`
		Payment *struct {
			Entity paymentEntity `json:"entity"`
		} `json:"payment"`
		Refund *struct {
			Entity refundEntity `json:"entity"`
		} `json:"refund"`
	} `json:"payload"`
}

// Webhook verifies one delivery — X-Razorpay-Signature over the raw body,
// under any of Config.WebhookSecrets — and decodes it: payment_link.paid
// into payment.EventPaymentSucceeded, payment_link.expired and
// payment_link.cancelled into payment.EventPaymentFailed, refund.processed
// into payment.EventRefundSucceeded and refund.failed into
// payment.EventRefundFailed (its link and the payment's refunds fetched
// under ctx, as the payload names only the payment), and any other
// event into an Event of its own Razorpay name. Event.ID is the
// X-Razorpay-Event-Id header. now is unused: Razorpay signs no time.
// Errors wrap payment.ErrBadSignature or payment.ErrBadEvent; any other
// error is a failed look-up, and Razorpay delivers the event again.
func (p *Provider) Webhook(ctx context.Context, header func(name string) string, body []byte, _ time.Time) (payment.Event, error) {
	if err := VerifySignature(header(SignatureHeader), body, p.cfg.WebhookSecrets); err != nil {
		return payment.Event{}, err
	}
	id := strings.TrimSpace(header(EventIDHeader))
	switch {
	case id == "":
		return payment.Event{}, fmt.Errorf("%w: no %s header", payment.ErrBadEvent, EventIDHeader)
	case len(id) > maxEventID:
		return payment.Event{}, fmt.Errorf("%w: %s longer than %d bytes", payment.ErrBadEvent, EventIDHeader, maxEventID)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return payment.Event{}, fmt.Errorf("%w: %v", payment.ErrBadEvent, err)
	}
	if env.Event == "" {
		return payment.Event{}, fmt.Errorf("%w: no event name", payment.ErrBadEvent)
	}
	// An event the flow does not act on keeps Razorpay's name, marked as
	// Razorpay's so that it never reads as one of the flow's own.
	ev := payment.Event{ID: id, Type: PassThroughPrefix + env.Event, CreatedAt: unix(env.CreatedAt)}
	pl := env.Payload
	switch env.Event {
	case EventLinkPaid:
		if pl.PaymentLink == nil || pl.PaymentLink.Entity.ID == "" {
			return payment.Event{}, fmt.Errorf("%w: %s without a payment_link", payment.ErrBadEvent, env.Event)
		}
		in := pl.PaymentLink.Entity.intent()
		in.Status = payment.IntentSucceeded
		if pl.Payment != nil {
			pe := pl.Payment.Entity
			in.AmountMinor, in.Payer = pe.Amount, pe.payer()
			if pe.Currency != "" {
				in.Currency = pe.Currency
			}
		}
		ev.Type, ev.Data.Intent = payment.EventPaymentSucceeded, in
	case EventLinkExpired, EventLinkCancelled:
		if pl.PaymentLink == nil || pl.PaymentLink.Entity.ID == "" {
			return payment.Event{}, fmt.Errorf("%w: %s without a payment_link", payment.ErrBadEvent, env.Event)
		}
		in := pl.PaymentLink.Entity.intent()
		in.Status = payment.IntentFailed
		ev.Type, ev.Data.Intent = payment.EventPaymentFailed, in
	case EventRefundProcessed, EventRefundFailed:
		if pl.Refund == nil || pl.Refund.Entity.ID == "" || pl.Refund.Entity.PaymentID == "" {
			return payment.Event{}, fmt.Errorf("%w: %s without a refund of a payment", payment.ErrBadEvent, env.Event)
		}
		start := time.Now()
		in, ok, err := p.refundedIntent(ctx, pl.Refund.Entity)
		p.observe(callWebhookLookup, start, err)
		if err != nil {
			return payment.Event{}, fmt.Errorf("razorpay %s %s: %w", env.Event, pl.Refund.Entity.ID, err)
		}
		if !ok {
			return ev, nil // a refund of a payment on no link: not ours
		}
		if pl.Payment != nil {
			in.Payer = pl.Payment.Entity.payer()
		}
		r := pl.Refund.Entity.refund(in.ID)
		ev.Type = payment.EventRefundSucceeded
		if env.Event == EventRefundFailed {
			ev.Type = payment.EventRefundFailed
		}
		ev.Data.Intent, ev.Data.Refund = in, &r
	}
	return ev, nil
}

// refundedIntent is the link a refund's payment was made on, with the
// payment's refunds (the event's own among them, even if the listing
// lags); false when the payment is on no link.
func (p *Provider) refundedIntent(ctx context.Context, r refundEntity) (payment.Intent, bool, error) {
	l, ok, err := p.linkOfPayment(ctx, r.PaymentID)
	if err != nil || !ok {
		return payment.Intent{}, ok, err
	}
	made, err := p.paymentRefunds(ctx, r.PaymentID)
	if err != nil {
		return payment.Intent{}, false, err
	}
	listed := false
	for i := range made {
		if made[i].ID == r.ID {
			made[i], listed = r, true // the event is news to the listing
		}
	}
	if !listed {
		made = append(made, r)
	}
	in := l.intent()
	// A refund is of money taken, whatever the link says since (a late
	// payment on a link cancelled at its hold's end).
	in.Status = payment.IntentSucceeded
	in.Refunds = refunds(l.ID, made)
	return in, true, nil
}
