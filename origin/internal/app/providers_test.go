package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/payment/razorpay"
	"github.com/flashgate/flashgate/origin/internal/payment/stripepay/stripemock"
	"github.com/flashgate/flashgate/origin/origintest"
)

// webhookAnswer posts body to the origin's webhook route with header and
// returns the status and the result it answered.
func webhookAnswer(t *testing.T, o *origintest.Origin, header map[string]string, body []byte) (int, string) {
	t.Helper()
	status, reply := o.Do(t, origintest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body, Header: header})
	var r struct {
		Result string `json:"result"`
	}
	_ = json.Unmarshal(reply, &r)
	return status, r.Result
}

// TestWebhooksOfEachProvider: FLASHGATE_PAYMENT_PROVIDER picks whose
// webhooks the origin takes, in that provider's own signature scheme: a
// documented event of an order the origin does not know, signed right, is
// taken (and ignored: no order); the same event signed with another secret
// is refused 401, and so is the sandbox's scheme.
func TestWebhooksOfEachProvider(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("stripe", func(t *testing.T) {
		const secret = "whsec_test_0123456789abcdefghij"
		o := origintest.StartOrigin(t, env, func(c *app.Config) {
			c.PaymentProvider, c.StripeSecretKey, c.StripeWebhookSecrets = app.ProviderStripe, "sk_test_unused", "whsec_old_0123456789abcdef, "+secret
			c.StripeAPIURL = "http://127.0.0.1:1" // an expired session needs no lookup
		})
		body := read("../payment/stripepay/testdata/checkout.session.expired.json")
		sign := func(secret string) map[string]string {
			p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
			return map[string]string{"Stripe-Signature": p.Header}
		}
		if status, result := webhookAnswer(t, o, sign(secret), body); status != 200 || result != "ignored" {
			t.Errorf("checkout.session.expired signed with the endpoint's secret = %d %q, want 200 ignored (no such order)", status, result)
		}
		if status, _ := webhookAnswer(t, o, sign("whsec_someone_else_0123456789"), body); status != 401 {
			t.Errorf("signed with another secret = %d, want 401", status)
		}
		// An event the flow does not act on, though its name is also one
		// of the flow's own, is taken and ignored: never a 400 that Stripe
		// would retry for days.
		body = []byte(`{"id":"evt_pi_1","object":"event","api_version":"2025-08-27.basil","created":1764900000,` +
			`"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","object":"payment_intent"}}}`)
		if status, result := webhookAnswer(t, o, sign(secret), body); status != 200 || result != "ignored" {
			t.Errorf("payment_intent.succeeded = %d %q, want 200 ignored", status, result)
		}
	})

	t.Run("razorpay", func(t *testing.T) {
		const secret = "razorpay-webhook-secret-0123456789"
		o := origintest.StartOrigin(t, env, func(c *app.Config) {
			c.PaymentProvider, c.RazorpayKeyID, c.RazorpayKeySecret = app.ProviderRazorpay, "rzp_test_unused", "unused-secret"
			c.RazorpayWebhookSecrets, c.RazorpayAPIURL = secret, "http://127.0.0.1:1"
		})
		body := read("../payment/razorpay/testdata/webhook_payment_link_expired_standard.json")
		header := func(secret string) map[string]string {
			return map[string]string{razorpay.SignatureHeader: razorpay.Sign(body, []byte(secret)), razorpay.EventIDHeader: "evt_test_" + t.Name()}
		}
		if status, result := webhookAnswer(t, o, header(secret), body); status != 200 || result != "ignored" {
			t.Errorf("payment_link.expired signed with the webhook secret = %d %q, want 200 ignored (no such order)", status, result)
		}
		if status, _ := webhookAnswer(t, o, header("another-secret-0123456789abcdef"), body); status != 401 {
			t.Errorf("signed with another secret = %d, want 401", status)
		}
	})
}

// callCounter is a reverse proxy in front of a provider's API that counts
// the calls by method and path.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func countCalls(t *testing.T, target string) (*callCounter, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &callCounter{calls: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.calls[r.Method+" "+r.URL.Path]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *callCounter) count(call string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[call]
}

// TestReconcilerClosesAPageOutlivingItsHold: a Stripe Checkout Session
// lives 30 minutes at least, longer than a hold. Once the hold (and its
// grace) has ended with nothing paid, the reconciler expires the session —
// at stripe-mock, which checks the call against Stripe's API description —
// once, however many runs follow, and the order is cancelled with its unit
// back in line.
func TestReconcilerClosesAPageOutlivingItsHold(t *testing.T) {
	t.Parallel()
	const key = "sk_test_flashgate"
	env := origintest.NewEnv(t)
	calls, api := countCalls(t, stripemock.Start(t, key))
	o := origintest.StartOrigin(t, env, func(c *app.Config) {
		c.PaymentProvider, c.StripeSecretKey, c.StripeAPIURL = app.ProviderStripe, key, api
		c.StripeWebhookSecrets = "whsec_test_0123456789abcdefghij"
		c.PaymentGrace, c.ReconcileInterval, c.OrderIntentWait = time.Second, 300*time.Millisecond, 10*time.Second
	})
	sale := "close-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 2))
	s := hold(t, o, sale, "ivy")
	ord := mustOrder(t, o, s)
	expire := "POST /v1/checkout/sessions/" + ord.Payment.IntentID + "/expire"
	if n := calls.count(expire); n != 0 {
		t.Fatalf("the session was expired %d times while its hold lived", n)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 20*time.Second)
	settled(t, o, sale, origintest.Counts{Available: 1})
	closed := func() bool {
		var at *time.Time
		if err := env.DB.QueryRow(context.Background(), `SELECT page_closed_at FROM orders WHERE order_id = $1`, ord.OrderID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at != nil
	}
	within := 20 * time.Second // for both waits below together
	start := time.Now()
	testenv.Eventually(t, within, "the order's page recorded closed", closed)
	// Three more reconciler runs (each lists the sessions) close nothing more.
	listings := calls.count("GET /v1/checkout/sessions")
	testenv.Eventually(t, within-time.Since(start), "three more reconciler runs", func() bool {
		return calls.count("GET /v1/checkout/sessions") >= listings+3
	})
	if n := calls.count(expire); n != 1 {
		t.Errorf("%s called %d times, want once", expire, n)
	}
}
