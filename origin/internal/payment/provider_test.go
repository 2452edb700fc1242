package payment

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClientWebhook: the sandbox provider reads its signature from the
// Payment-Signature header, refuses a delivery signed with another secret
// or replayed late, refuses everything without a secret, and decodes a
// signed event in the order flow's terms.
func TestClientWebhook(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	secret := []byte("whsec-sandbox")
	body := []byte(`{"id":"evt_9","type":"payment_intent.succeeded","data":{"intent":{"intent_id":"pi_1","status":"succeeded","metadata":{"order_id":"ord_1"},"payer":"upi:a@bank"}}}`)
	headers := func(sig string) func(string) string {
		return func(name string) string {
			if name == SignatureHeader {
				return sig
			}
			return ""
		}
	}
	c := NewClient("http://127.0.0.1:1", "sk", ClientOptions{WebhookSecrets: [][]byte{secret}})
	ev, err := c.Webhook(context.Background(), headers(Sign(body, now, secret)), body, now)
	if err != nil || ev.ID != "evt_9" || ev.Type != EventPaymentSucceeded || ev.Data.Intent.OrderID() != "ord_1" || ev.Data.Intent.Payer != "upi:a@bank" {
		t.Fatalf("Webhook(signed) = %+v, %v", ev, err)
	}
	for name, tc := range map[string]struct {
		c      *Client
		header string
		at     time.Time
		want   error
	}{
		"another secret":          {c, Sign(body, now, []byte("other")), now, ErrBadSignature},
		"no signature":            {c, "", now, ErrBadSignature},
		"replayed 6 minutes late": {c, Sign(body, now, secret), now.Add(6 * time.Minute), ErrStaleSignature},
		"no secret configured":    {NewClient("http://127.0.0.1:1", "sk", ClientOptions{}), Sign(body, now, secret), now, ErrBadSignature},
	} {
		if _, err := tc.c.Webhook(context.Background(), headers(tc.header), body, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: Webhook = %v, want %v", name, err, tc.want)
		}
	}
	signedGarbage := []byte(`{"type":"x"}`)
	if _, err := c.Webhook(context.Background(), headers(Sign(signedGarbage, now, secret)), signedGarbage, now); !errors.Is(err, ErrBadEvent) {
		t.Errorf("Webhook(signed, no id) = %v, want ErrBadEvent", err)
	}
}
