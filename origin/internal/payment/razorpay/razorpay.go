// Package razorpay is the Razorpay adapter of payment.Provider: Razorpay's
// REST API (https://api.razorpay.com, basic auth with the key id and key
// secret) over plain net/http, and its signed webhooks. The testdata
// README names the documentation page behind every request field and
// payload field used here.
//
// # Hosted page: Payment Links, not Orders with Checkout
//
// The order flow sends the shopper to a URL (Intent.PayURL) and learns the
// outcome by webhook. A Payment Link is exactly that: POST
// /v1/payment_links answers a short_url on a Razorpay-hosted page that
// takes UPI (and the other methods of a Standard link; Config.UPILink asks
// for a UPI-only link), sends the shopper back to callback_url, expires at
// expire_by, and reports through payment_link.* webhooks that carry its
// notes. Orders with Standard Checkout would instead put Razorpay's
// checkout.js and our key id on our own page and need a second, signed
// browser callback; the page flow would change for no gain.
//
// # The hold's timing and expire_by's floor
//
// A link is made to expire when the order's hold ends (NewIntent.ExpiresAt,
// its grace included). Razorpay refuses an expire_by less than 15 minutes
// ahead ("timestamp must be atleast 15 minutes in future",
// https://razorpay.com/docs/api/payments/payment-links/create-standard), so
// a link expires at ExpiresAt or MinExpiry+ExpirySlack from now, whichever
// is later. A hold shorter than that leaves the page payable after the
// hold is gone: such a payment is a late payment, which the order flow
// refunds. Provider.Cancel ends a link early (POST
// /v1/payment_links/{id}/cancel) for a caller that wants the page closed
// with the hold.
//
// # Idempotency
//
// Links: reference_id is the order id (NewIntent.Metadata["order_id"], the
// idempotency key when there is none), and Razorpay refuses a second link
// with a reference_id already used ("payment link creation with reference
// ID already attempted"). CreateIntent therefore posts first and, on a
// refusal, fetches the link by reference_id (GET
// /v1/payment_links?reference_id=): a retry, a repeat or a concurrent
// create with the same key gets the one link back. Razorpay enforces the
// uniqueness, so no race makes two links. One link per order means one
// idempotency key per order, which is how the order flow calls it.
//
// Refunds: the key goes both in the documented X-Refund-Idempotency header
// (https://razorpay.com/docs/api/refunds/normal-refunds-idempotent: the
// same key and body give the same refund; 409 while the first is in
// progress) and in the refund's receipt. Refund looks the receipt up among
// the payment's refunds before posting, so a repeat after the header's
// memory (for which no lifetime is documented) still finds the first
// refund, and "0 = all that is left" is computed only once. A normal
// refund is pending for days before it is processed or fails; a failed one
// stays failed under its key, and the order flow makes the next refund
// under a key of its own.
//
// # Listing for the reconciler
//
// Fetch All Payment Links documents no time filter and no pagination, only
// reference_id and payment_id look-ups. Intents therefore pages through
// GET /v1/payments (from, to, count ≤ 100, skip) and maps each captured or
// refunded payment to its link (GET /v1/payment_links?payment_id=), with
// the payment's refunds (GET /v1/payments/{id}/refunds) when it has any.
// A paid link is final, so its look-up is remembered. Links nobody paid
// are not listed: a lost payment_link.expired is not repaired by the
// reconciler (harmless: a link never expires before its hold ends).
// Intent reads one link, its payment and all that payment's refunds,
// however old: the reconciler follows a refund on its way with it.
//
// # Webhooks
//
// X-Razorpay-Signature is the hex HMAC-SHA256 of the raw body under the
// webhook secret; any of Config.WebhookSecrets may match (rotation; Razorpay
// signs retries of events from before a rotation with the old secret).
// Event.ID is the X-Razorpay-Event-Id header, which Razorpay documents as
// unique per event for de-duplication. Razorpay signs no timestamp, and the
// event id header is not covered by the signature: a captured delivery can
// be replayed at any time, and it is the order flow's event-id
// de-duplication that refuses Razorpay's own redeliveries, not the
// signature. A deliberate replay under a fresh event id can only repeat a
// true past event of the same link, which the flow settles idempotently.
//
// payment_link.paid is EventPaymentSucceeded; payment_link.expired and
// payment_link.cancelled are EventPaymentFailed; refund.processed is
// EventRefundSucceeded and refund.failed EventRefundFailed (their link
// found by the payment id, under ctx); refund.created keeps its own type
// (Refund's answer told the flow of the refund already).
// payment.failed is not a failure of the link: Razorpay documents
// payment.failed followed by payment.captured for one UPI payment the
// shopper retried (https://razorpay.com/docs/webhooks/payments), and the
// link stays payable, so it keeps its own type, as every other event does.
package razorpay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBaseURL is Razorpay's API.
const DefaultBaseURL = "https://api.razorpay.com"

// MinExpiry is the shortest lead Razorpay accepts for a link's expire_by;
// ExpirySlack is added to it against clock skew and the request's transit.
const (
	MinExpiry   = 15 * time.Minute
	ExpirySlack = time.Minute
)

// Config configures a Provider; zero values take the defaults.
type Config struct {
	// KeyID and KeySecret are the API key (rzp_test_… or rzp_live_…) and
	// its secret, sent as basic auth. Both are required.
	KeyID     string
	KeySecret string
	// WebhookSecrets verify X-Razorpay-Signature; any one may match
	// (rotation). Without one every delivery is refused.
	WebhookSecrets [][]byte
	// BaseURL is the API's root; "" means DefaultBaseURL.
	BaseURL string
	// UPILink makes UPI Payment Links (upi_link: true) instead of Standard
	// ones, which take UPI among other methods. Razorpay makes UPI links
	// in live mode only and in INR only.
	UPILink bool
	// Timeout bounds one HTTP attempt; 0 means 10 s.
	Timeout time.Duration
	// Attempts is how many times a call is tried when Razorpay is
	// unreachable or answers 5xx or 429; 0 means 3. Retries are safe: a
	// link's reference_id and a refund's idempotency key make a repeat
	// the same link or refund.
	Attempts int
	// Backoff is the pause before the second attempt, doubling after; 0
	// means 200 ms.
	Backoff time.Duration
	// MaxConns caps the connections to Razorpay, all kept open between
	// calls; 0 means 64.
	MaxConns int
	// Registerer, when set, takes flashgate_origin_gateway_seconds{call,
	// outcome}, as the sandbox client does. nil: calls are not timed.
	Registerer prometheus.Registerer
	// Clock is the clock for expire_by, the listing's window and the pauses
	// between attempts; nil means clock.Real.
	Clock clock.Clock
}

// Validate reports a Config that cannot talk to Razorpay.
func (c Config) Validate() error {
	if c.KeyID == "" || c.KeySecret == "" {
		return errors.New("razorpay: a key id and a key secret are required")
	}
	if c.Timeout < 0 || c.Attempts < 0 || c.Backoff < 0 || c.MaxConns < 0 {
		return errors.New("razorpay: timeout, attempts, backoff and connections cannot be negative")
	}
	for _, s := range c.WebhookSecrets {
		if len(s) == 0 {
			return errors.New("razorpay: an empty webhook secret")
		}
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("razorpay: base URL %q is not an http(s) URL", c.BaseURL)
		}
	}
	return nil
}

// String describes c with its key secret and webhook secrets redacted, so
// that %v of a Config (or of a struct holding one) never prints them. The
// key id is not a secret: Razorpay's Checkout puts it in shops' pages.
func (c Config) String() string {
	secret := "unset"
	if c.KeySecret != "" {
		secret = "redacted"
	}
	return fmt.Sprintf("razorpay.Config{KeyID: %q, KeySecret: %s, WebhookSecrets: %d redacted, BaseURL: %q, UPILink: %t, Timeout: %s, Attempts: %d, Backoff: %s, MaxConns: %d}",
		c.KeyID, secret, len(c.WebhookSecrets), c.BaseURL, c.UPILink, c.Timeout, c.Attempts, c.Backoff, c.MaxConns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Provider is Razorpay as the order flow's payment.Provider. It is safe
// for concurrent use.
type Provider struct {
	cfg   Config
	base  string
	http  *http.Client
	times *payment.CallTimes

	mu sync.Mutex
	// paidLinks (guarded by mu) holds, by payment id, the paid link a
	// captured payment belongs to: a paid link is final, so the listing
	// looks it up once. Cleared when it reaches maxPaidLinks.
	paidLinks map[string]link
}

var _ payment.Provider = (*Provider)(nil)

// maxPaidLinks bounds Provider.paidLinks.
const maxPaidLinks = 1 << 16

// New returns a Provider for cfg (see Config.Validate).
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 64
	}
	cfg.Clock = clock.Or(cfg.Clock)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxConnsPerHost = cfg.MaxConns
	transport.MaxIdleConnsPerHost = cfg.MaxConns
	transport.MaxIdleConns = cfg.MaxConns
	return &Provider{
		cfg:       cfg,
		base:      strings.TrimRight(cfg.BaseURL, "/"),
		http:      &http.Client{Timeout: cfg.Timeout, Transport: transport},
		times:     payment.NewCallTimes(cfg.Registerer, callNames[:]...),
		paidLinks: map[string]link{},
	}
}

// call names a Razorpay operation in flashgate_origin_gateway_seconds.
type call int

const (
	callCreateIntent call = iota
	callRefund
	callListIntents
	callWebhookLookup
	callCancel
	callGetIntent
	callCount
)

var callNames = [callCount]string{"create_intent", "refund", "list_intents", "webhook_lookup", "cancel_intent", "get_intent"}

// observe records a call that started at start and ended in err.
func (p *Provider) observe(which call, start time.Time, err error) {
	p.times.Observe(callNames[which], start, err)
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	// idempotencyKey, when set, goes in X-Refund-Idempotency.
	idempotencyKey string
	// retryConflict retries a 409: the refund with the same idempotency
	// key is still in progress.
	retryConflict bool
}

// errorBody is Razorpay's error answer.
type errorBody struct {
	Error struct {
		Code        string `json:"code"`
		Description string `json:"description"`
		Reason      string `json:"reason"`
	} `json:"error"`
}

// do makes one API call, retrying passing failures with backoff, and
// decodes the answer into out.
func (p *Provider) do(ctx context.Context, r request, out any) error {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("razorpay %s %s: %w", r.method, r.path, err)
		}
	}
	err := payment.Retry(ctx, p.cfg.Clock, p.cfg.Attempts, p.cfg.Backoff, func() (bool, error) {
		return p.try(ctx, r, body, out)
	})
	var refusal *payment.APIError
	if r.retryConflict && errors.As(err, &refusal) && refusal.Status == http.StatusConflict {
		// Still in progress after every attempt: not a refusal, but
		// worth asking again later.
		return fmt.Errorf("razorpay %s %s: still in progress: %v", r.method, r.path, err)
	}
	if err != nil {
		return fmt.Errorf("razorpay %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// try makes one attempt and says whether a failure is worth another.
func (p *Provider) try(ctx context.Context, r request, body []byte, out any) (retry bool, err error) {
	u := p.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return false, err
	}
	req.SetBasicAuth(p.cfg.KeyID, p.cfg.KeySecret)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.idempotencyKey != "" {
		req.Header.Set("X-Refund-Idempotency", r.idempotencyKey)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	// A page of a listing is at most 100 entities; past this the call
	// fails loudly rather than reading without end.
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return true, err
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return true, fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.StatusCode >= 300 {
		e := &payment.APIError{Status: resp.StatusCode}
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message = eb.Error.Code, eb.Error.Description
		}
		return resp.StatusCode == http.StatusConflict && r.retryConflict, e
	}
	if out == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("decode answer: %w", err)
	}
	return false, nil
}
