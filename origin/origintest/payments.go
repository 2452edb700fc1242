package origintest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// Payments is a sandbox payment gateway for origins under test: its API on
// a loopback httptest server, its webhooks delivered to whichever origin
// DeliverTo names, over that origin's in-memory listener. It plays the
// provider its Personality names (see Personality), and Configure sets the
// origin up for that provider.
type Payments struct {
	Gateway *sandboxgateway.Gateway
	URL     string // the gateway's base URL
	// Personality is the provider the gateway plays
	// (sandboxgateway.PersonalityFlashgate unless an override chose another).
	Personality string
	APIKey      string
	Secret      string // the webhook signing secret
	// ControlToken is the bearer the gateway's /sandbox/* routes take;
	// the origin never holds it.
	ControlToken string
	// ReturnURL, when set before Configure, is where the pay page sends
	// shoppers back (the origin's PaymentReturnURL).
	ReturnURL string
	// IntentWait, when set before Configure, is the origin's
	// OrderIntentWait; 0 means 10 s (see Configure).
	IntentWait time.Duration

	// FailRefunds, while true, answers every call that makes a refund
	// 503 (the sandbox's POST /v1/intents/{id}/refunds, Stripe's POST
	// /v1/refunds, Razorpay's POST /v1/payments/{id}/refund), as a
	// gateway that is down would.
	FailRefunds atomic.Bool
	// FailPageCloses, while true, answers every call that closes a
	// payment page (Stripe's POST /v1/checkout/sessions/{id}/expire,
	// Razorpay's POST /v1/payment_links/{id}/cancel) 503, so that a
	// payment can come after the hold's end, before its page is closed,
	// as when the close is slow to reach the provider.
	FailPageCloses atomic.Bool
	// FailListings, while true, answers every listing call (the
	// reconciler's; see Listings) 503, as a gateway whose listing API is
	// down: with its webhooks off too, the origin cannot learn of a payment.
	FailListings atomic.Bool
	// SlowIntents, while positive, delays every intent creation (the
	// sandbox's POST /v1/intents, Stripe's POST /v1/checkout/sessions,
	// Razorpay's POST /v1/payment_links) by that many nanoseconds, as a
	// gateway under load would.
	SlowIntents atomic.Int64

	listings atomic.Int64 // see Listings

	mu     sync.Mutex // guards target
	target *fasthttputil.InmemoryListener
}

// Personality is an override of StartPayments that has the gateway play
// provider name (sandboxgateway.PersonalityStripe, say).
func Personality(name string) func(*sandboxgateway.Config) {
	return func(c *sandboxgateway.Config) { c.Personality = name }
}

// StartPayments starts a sandbox gateway (no injected failures, quick
// retries), adjusted by each override, and closes it in t.Cleanup.
func StartPayments(t testing.TB, overrides ...func(*sandboxgateway.Config)) *Payments {
	t.Helper()
	p := &Payments{APIKey: "test-gateway-key", Secret: "whsec-test-secret", ControlToken: "test-gateway-control-token"}
	cfg := sandboxgateway.Config{
		APIKey:         p.APIKey,
		ControlToken:   p.ControlToken,
		WebhookSecrets: []string{p.Secret},
		WebhookURL:     "http://origin/v1/payments/webhook",
		MaxAttempts:    20,
		RetryBase:      50 * time.Millisecond,
		RetryMax:       500 * time.Millisecond,
		Seed:           1,
		WebhookDial: func(context.Context, string, string) (net.Conn, error) {
			p.mu.Lock()
			ln := p.target
			p.mu.Unlock()
			if ln == nil {
				return nil, errors.New("no origin to deliver to")
			}
			return ln.Dial()
		},
	}
	for _, o := range overrides {
		o(&cfg)
	}
	g, err := sandboxgateway.New(cfg)
	if err != nil {
		t.Fatalf("sandboxgateway.New = %v", err)
	}
	p.Gateway = g
	p.Personality = cmp.Or(cfg.Personality, sandboxgateway.PersonalityFlashgate)
	down := `{"error":"unavailable","message":"down for the test"}`
	switch p.Personality {
	case sandboxgateway.PersonalityStripe:
		down = `{"error":{"type":"api_error","message":"down for the test"}}`
	case sandboxgateway.PersonalityRazorpay:
		down = `{"error":{"code":"SERVER_ERROR","description":"down for the test","source":"NA","step":"NA","reason":"NA","metadata":{}}}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		post := r.Method == http.MethodPost
		if p.FailRefunds.Load() && post && isRefund(r.URL.Path) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(down))
			return
		}
		if p.FailPageCloses.Load() && post && isPageClose(r.URL.Path) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(down))
			return
		}
		if r.Method == http.MethodGet && isListing(r.URL.Path) {
			p.listings.Add(1)
			if p.FailListings.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(down))
				return
			}
		}
		if d := time.Duration(p.SlowIntents.Load()); d > 0 && post && isIntentCreation(r.URL.Path) {
			time.Sleep(d)
		}
		g.ServeHTTP(w, r)
	}))
	p.URL = srv.URL
	if err := g.SetPublicURL(srv.URL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Close(ctx)
		srv.Close()
	})
	return p
}

// isRefund reports whether a POST to path makes a refund, in any
// personality's API.
func isRefund(path string) bool {
	return strings.HasSuffix(path, "/refunds") || // the sandbox's /v1/intents/{id}/refunds, Stripe's /v1/refunds
		(strings.HasPrefix(path, "/v1/payments/") && strings.HasSuffix(path, "/refund")) // Razorpay's
}

// isPageClose reports whether a POST to path closes a payment page:
// Stripe's expire, Razorpay's cancel.
func isPageClose(path string) bool {
	return (strings.HasPrefix(path, "/v1/checkout/sessions/") && strings.HasSuffix(path, "/expire")) ||
		(strings.HasPrefix(path, "/v1/payment_links/") && strings.HasSuffix(path, "/cancel"))
}

// isIntentCreation reports whether a POST to path creates an intent.
func isIntentCreation(path string) bool {
	return path == "/v1/intents" || path == "/v1/checkout/sessions" || path == "/v1/payment_links"
}

// isListing reports whether a GET of path is the reconciler's listing.
func isListing(path string) bool {
	return path == "/v1/intents" || path == "/v1/checkout/sessions" || path == "/v1/payments"
}

// Listings is how many listing calls (the reconciler's GET /v1/intents,
// /v1/checkout/sessions or /v1/payments) the gateway has answered or
// refused: a test that must see reconciler rounds pass waits for it to
// grow rather than sleeping.
func (p *Payments) Listings() int64 { return p.listings.Load() }

// HoldRefunds switches the gateway's refund holding on or off: while on,
// every new refund is pending, as a provider's refund is for days, until
// ProcessRefund or FailRefund settles it; off (the default), refunds
// succeed at once.
func (p *Payments) HoldRefunds(on bool) { p.Gateway.HoldRefunds(on) }

// ProcessRefund makes pending refund refundID succeed, sending its
// provider's webhooks (Stripe's refund.updated, Razorpay's
// refund.processed); refundID is the refund's id as the provider shows it
// (Razorpay's rfnd_…) or the sandbox's re_…. It fails t when the refund is
// unknown or not pending.
func (p *Payments) ProcessRefund(t testing.TB, refundID string) {
	t.Helper()
	if err := p.Gateway.ProcessRefund(refundID); err != nil {
		t.Fatalf("process refund %s: %v", refundID, err)
	}
}

// FailRefund makes pending refund refundID fail, sending its provider's
// webhooks (Stripe's refund.updated and refund.failed, Razorpay's
// refund.failed): its amount is unrefunded again. refundID and the
// failures are as for ProcessRefund.
func (p *Payments) FailRefund(t testing.TB, refundID string) {
	t.Helper()
	if err := p.Gateway.FailRefund(refundID); err != nil {
		t.Fatalf("fail refund %s: %v", refundID, err)
	}
}

// Configure points an origin's Config at the gateway, as the provider it
// plays (the sandbox's own protocol; Stripe's with the gateway's API key
// as the secret key; Razorpay's with sandboxgateway.RazorpayKeyID and the API key
// as its secret); pass it to StartOrigin.
// The reconciler runs every 300 ms and a hold's payment grace is 2 s; an
// order request waits up to 10 s for its intent, so that a test's orders
// come with their payment however busy the machine is (a test of slow
// gateways sets OrderIntentWait after).
func (p *Payments) Configure(cfg *app.Config) {
	switch p.Personality {
	case sandboxgateway.PersonalityStripe:
		cfg.PaymentProvider = app.ProviderStripe
		cfg.StripeAPIURL = p.URL
		cfg.StripeSecretKey = p.APIKey
		cfg.StripeWebhookSecrets = p.Secret
	case sandboxgateway.PersonalityRazorpay:
		cfg.PaymentProvider = app.ProviderRazorpay
		cfg.RazorpayAPIURL = p.URL
		cfg.RazorpayKeyID = sandboxgateway.RazorpayKeyID
		cfg.RazorpayKeySecret = p.APIKey
		cfg.RazorpayWebhookSecrets = p.Secret
	default:
		cfg.PaymentProvider = app.ProviderSandbox
		cfg.GatewayURL = p.URL
		cfg.GatewayAPIKey = p.APIKey
		cfg.WebhookSecrets = p.Secret
	}
	cfg.PaymentGrace = 2 * time.Second
	cfg.ReconcileInterval = 300 * time.Millisecond
	cfg.PaymentReturnURL = p.ReturnURL
	cfg.OrderIntentWait = 10 * time.Second
	if p.IntentWait > 0 {
		cfg.OrderIntentWait = p.IntentWait
	}
}

// DeliverTo sends the gateway's webhooks to o from now on (nil: nowhere,
// so deliveries fail and are retried).
func (p *Payments) DeliverTo(o *Origin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = nil
	if o != nil {
		p.target = o.PublicLn
	}
}

// Order is the origin's answer for an order.
type Order struct {
	OrderID       string `json:"order_id"`
	ReservationID string `json:"reservation_id"`
	Status        string `json:"status"`
	AmountMinor   int64  `json:"amount_minor"`
	Currency      string `json:"currency"`
	Payment       *struct {
		IntentID string `json:"intent_id"`
		PayURL   string `json:"pay_url"`
	} `json:"payment"`
	Refund *struct {
		Status     string     `json:"status"`
		RefundID   string     `json:"refund_id"`
		RefundedAt *time.Time `json:"refunded_at"`
	} `json:"refund"`
	PollAfterMS int64  `json:"poll_after_ms"`
	Error       string `json:"error"`
}

// CreateOrder posts POST /v1/orders for the reservation with a user token.
func (o *Origin) CreateOrder(t testing.TB, userToken, reservationID, idemKey string) (int, Order) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"reservation_id": reservationID, "idempotency_key": idemKey})
	status, raw := o.Do(t, Request{Method: "POST", Path: "/v1/orders", Token: userToken, Body: body})
	return status, parseOrder(t, raw)
}

// Order reads GET /v1/orders/{id} with a user token.
func (o *Origin) Order(t testing.TB, userToken, id string) (int, Order) {
	t.Helper()
	status, raw := o.Do(t, Request{Method: "GET", Path: "/v1/orders/" + id, Token: userToken})
	return status, parseOrder(t, raw)
}

// WaitOrder polls an order until its status is want, failing t after within.
func (o *Origin) WaitOrder(t testing.TB, userToken, id, want string, within time.Duration) Order {
	t.Helper()
	var got Order
	testenv.Eventually(t, within, "order "+id+" status "+want, func() bool {
		_, got = o.Order(t, userToken, id)
		return got.Status == want
	})
	return got
}

func parseOrder(t testing.TB, raw []byte) Order {
	t.Helper()
	var out Order
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Errorf("order answer is not JSON: %v: %s", err, raw)
	}
	return out
}
