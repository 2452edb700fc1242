package payment

import (
	"context"
	"errors"
	"time"
)

// Provider is a payment gateway as the checkout uses it: the sandbox
// gateway's own API (Client), or an adapter of a real one. Each maps its
// gateway's objects onto Intent, Refund and Event, so the order flow —
// exactly-once settlement, late payments refunded, reconciliation — is the
// same whoever takes the money.
type Provider interface {
	// CreateIntent asks for a payment of req for one order: a hosted
	// page (Intent.PayURL) the shopper is sent to. The same
	// idempotencyKey always gets the same intent back.
	CreateIntent(ctx context.Context, req NewIntent, idempotencyKey string) (Intent, error)
	// Refund gives amountMinor of a succeeded intent back (0 means all
	// that is left). The same idempotencyKey always gets the same refund
	// back, so a refund is never made twice.
	Refund(ctx context.Context, intentID string, amountMinor int64, idempotencyKey string) (Refund, error)
	// Intents lists the intents created since the given time (zero: as
	// far back as the gateway lists), each with its status, payer and
	// refunds (a provider may leave out refunds that gave nothing back:
	// Intent has them all), for the reconciler: it repairs what lost
	// webhooks left undone from them.
	Intents(ctx context.Context, since time.Time) ([]Intent, error)
	// Intent reads one intent, with all its refunds, whenever it was
	// made: the reconciler follows a refund on its way with it, past the
	// listing's window.
	Intent(ctx context.Context, id string) (Intent, error)
	// Webhook verifies one webhook delivery — header reads the request's
	// headers, body is the raw body as it arrived — at now, and decodes
	// it into an Event (a provider whose events lack what the flow needs,
	// such as the payer, may ask its API under ctx) of the types the order flow acts on (a type it does
	// not act on keeps a name of its own, which the flow ignores). Errors
	// wrap ErrBadSignature or ErrStaleSignature (the sender is not the
	// gateway, or a delivery is replayed late) or ErrBadEvent (signed, but
	// not an event).
	Webhook(ctx context.Context, header func(name string) string, body []byte, now time.Time) (Event, error)
}

var _ Provider = (*Client)(nil)

// PageCloser is a Provider whose hosted payment page can be closed before
// it expires by itself: Stripe's Checkout Sessions live 30 minutes at
// least and Razorpay's links 15, longer than a hold. The reconciler closes
// the page of an order whose hold has ended, so that a shopper is not
// taken money that would only be refunded.
type PageCloser interface {
	// ClosePage closes the intent's page. nil means it is closed and
	// nothing was paid on it: the intent has failed. An error wrapping
	// ErrPaymentStarted means the shopper paid, or began a payment that may
	// still succeed, first: its own events settle it. Any other error is
	// worth another try.
	ClosePage(ctx context.Context, intentID string) error
}

// ErrPaymentStarted: a page could not be closed, because a payment on it
// came first.
var ErrPaymentStarted = errors.New("payment: a payment on the page came first")

// SignatureHeader is the header the sandbox gateway signs its webhooks in.
const SignatureHeader = "Payment-Signature"

// Webhook verifies a delivery of the sandbox gateway (its Payment-Signature
// header, under one of ClientOptions.WebhookSecrets, within its Tolerance)
// and reads the event, which is already in the order flow's terms.
func (c *Client) Webhook(_ context.Context, header func(name string) string, body []byte, now time.Time) (Event, error) {
	if err := VerifySignature(header(SignatureHeader), body, c.opts.WebhookSecrets, now, c.opts.Tolerance); err != nil {
		return Event{}, err
	}
	return ParseEvent(body)
}
