// Package stripepay is the Stripe adapter of payment.Provider, through the
// official library (stripe-go): an intent is a Checkout Session in payment
// mode (the hosted page the shopper pays on), a refund is a Stripe Refund of
// the session's PaymentIntent, the reconciler's listing is the account's
// Checkout Sessions, and webhooks are Stripe's signed events.
//
// Intent.ID is the Checkout Session's id (cs_…): the order records it, and
// every call and event is mapped back to it. Amounts are Stripe's own minor
// units; currencies are sent to Stripe in lower case (as its API writes
// them) and reported in upper case (as the order flow writes them).
package stripepay

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v82"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// APIVersion is the Stripe API version the library pins for every call.
// Register the webhook endpoint with this version: events are then shaped
// like the API's answers (Webhook reads events of other versions too, see
// there).
const APIVersion = stripe.APIVersion

// PassThroughPrefix marks the type of an event the order flow does not act
// on, which Webhook passes on under Stripe's name ("stripe:plan.created").
const PassThroughPrefix = "stripe:"

// SignatureHeader is the header Stripe signs its webhooks in.
const SignatureHeader = "Stripe-Signature"

// ErrSessionComplete: Expire found the Checkout Session already completed
// (the shopper paid, or a delayed payment is under way, before the hold's
// end reached Stripe). Nothing to retry: the payment's own events settle
// the order, as a late payment if the hold is gone.
var ErrSessionComplete = errors.New("stripepay: checkout session is already complete")

// Config is what a Provider needs; zero values take the defaults.
type Config struct {
	// SecretKey is the account's secret API key (sk_live_…, sk_test_…, or
	// a restricted rk_… key allowed Checkout Sessions, PaymentIntents,
	// Charges and Refunds). Required. Never printed: String redacts it.
	SecretKey string
	// WebhookSecrets are the webhook endpoint's signing secrets (whsec_…);
	// a delivery signed under any one of them verifies, so a secret can be
	// rolled (Stripe signs with the old and the new one for a while).
	// Without one every delivery is refused.
	WebhookSecrets []string
	// Tolerance is how far a delivery's signed time may be from now, either
	// way; 0 means payment.DefaultTolerance (5 minutes, Stripe's own).
	Tolerance time.Duration
	// BaseURL is the API's address; "" means Stripe's
	// (https://api.stripe.com). Tests point it at stripe-mock.
	BaseURL string
	// ReturnURL is where the hosted page sends the shopper (success_url,
	// after paying; cancel_url, its back link) when a NewIntent has no
	// ReturnURL of its own. "" sends neither, which Stripe's OpenAPI
	// description allows; set it (or the order flow's return URL) in
	// production, so that the shopper comes back to the shop.
	ReturnURL string
	// Timeout bounds one HTTP attempt; 0 means 15 s (a listing page of 100
	// sessions with their payments expanded is the slowest call). The
	// library's own default, 80 s, is far longer than a hold.
	Timeout time.Duration
	// Attempts is how many times stripe-go tries a call that failed in
	// passing (a network error, a 409 conflict, a 429 lock timeout, or an
	// answer marked Stripe-Should-Retry), pausing 0.5 s and more between;
	// 0 means 3. A call that changes something carries an idempotency
	// key on every attempt (stripe-go makes one when the caller gives
	// none), so a retry never pays or refunds twice.
	Attempts int
	// MaxConns caps the connections to Stripe, all kept open between
	// calls; 0 means 64.
	MaxConns int
	// Clock is the time CreateIntent computes a session's expiry from; nil
	// means clock.Real.
	Clock clock.Clock
	// Registerer, when set, takes flashgate_origin_gateway_seconds{call,
	// outcome} (the metric payment.Client keeps for the sandbox, so one
	// process registers one provider's): each call's time, stripe-go's
	// retries and pauses included. nil: calls are not timed.
	Registerer prometheus.Registerer
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.SecretKey == "":
		return errors.New("stripepay: a secret key is required")
	case c.Tolerance < 0 || c.Timeout < 0 || c.Attempts < 0 || c.MaxConns < 0:
		return errors.New("stripepay: tolerance, timeout, attempts and connections cannot be negative")
	}
	for _, s := range c.WebhookSecrets {
		if s == "" {
			return errors.New("stripepay: an empty webhook secret")
		}
	}
	return nil
}

// String describes c with its secrets redacted, so that %v of a Config
// (or of a struct holding one) never prints them.
func (c Config) String() string {
	key := "unset"
	if c.SecretKey != "" {
		key = "redacted"
	}
	return fmt.Sprintf("stripepay.Config{SecretKey: %s, WebhookSecrets: %d redacted, Tolerance: %s, BaseURL: %q, ReturnURL: %q, Timeout: %s, Attempts: %d, MaxConns: %d}",
		key, len(c.WebhookSecrets), c.Tolerance, c.BaseURL, c.ReturnURL, c.Timeout, c.Attempts, c.MaxConns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Provider is a Stripe account as a payment.Provider. It is safe for
// concurrent use.
type Provider struct {
	sc    *stripe.Client
	cfg   Config
	times *payment.CallTimes
}

var _ payment.Provider = (*Provider)(nil)

// New returns a Provider of cfg's account.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Tolerance = cmp.Or(cfg.Tolerance, payment.DefaultTolerance)
	cfg.Timeout = cmp.Or(cfg.Timeout, 15*time.Second)
	cfg.Attempts = cmp.Or(cfg.Attempts, 3)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, 64)
	cfg.Clock = clock.Or(cfg.Clock)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxConnsPerHost = cfg.MaxConns
	transport.MaxIdleConnsPerHost = cfg.MaxConns
	transport.MaxIdleConns = cfg.MaxConns
	bc := &stripe.BackendConfig{
		HTTPClient:        &http.Client{Timeout: cfg.Timeout, Transport: transport},
		MaxNetworkRetries: stripe.Int64(int64(cfg.Attempts - 1)),
		EnableTelemetry:   stripe.Bool(false),
		// Errors are returned, and logged by the caller once; the
		// library's own logger would print each again on stderr.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.BaseURL != "" {
		bc.URL = stripe.String(cfg.BaseURL)
	}
	return &Provider{
		sc:    stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc))),
		cfg:   cfg,
		times: payment.NewCallTimes(cfg.Registerer, callNames[:]...),
	}, nil
}

// apiError turns Stripe's refusals — a 4xx other than 409 (a request with
// the same idempotency key still running) and 429 (too many requests),
// which pass — into *payment.APIError, so that payment.IsRefusal holds for
// them: a declined card, an invalid request, a refund of more than is
// left, a missing object, a bad key. Other errors (network, 5xx, the
// caller's deadline) are returned as they are.
func apiError(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode < 400 || se.HTTPStatusCode >= 500 ||
		se.HTTPStatusCode == http.StatusConflict || se.HTTPStatusCode == http.StatusTooManyRequests {
		return err
	}
	e := &payment.APIError{Status: se.HTTPStatusCode, Code: string(se.Code), Message: se.Msg}
	if e.Code == "" {
		e.Code = string(se.Type)
	}
	if se.RequestID != "" {
		e.Message += " (request " + se.RequestID + ")"
	}
	return e
}

// call names a Stripe call in flashgate_origin_gateway_seconds.
type call int

const (
	callCreateIntent call = iota
	callRefund
	callListIntents
	callExpire
	callWebhookLookup
	callGetIntent
	callCount
)

var callNames = [callCount]string{"create_intent", "refund", "list_intents", "expire", "webhook_lookup", "get_intent"}

// observe records a call that started at start and ended in err.
func (p *Provider) observe(which call, start time.Time, err error) {
	p.times.Observe(callNames[which], start, err)
}
