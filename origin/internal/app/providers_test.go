package app_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/payment/razorpay"
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
