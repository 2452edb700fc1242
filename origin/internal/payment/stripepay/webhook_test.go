package stripepay

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

const (
	secretOld = "whsec_old_flashgate_test"
	secretNew = "whsec_new_flashgate_test"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signed is the Stripe-Signature header Stripe sends for body at at under
// secret.
func signed(body []byte, at time.Time, secret string) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

// headers reads name from a request carrying a Stripe-Signature.
func headers(sig string) func(string) string {
	h := http.Header{}
	if sig != "" {
		h.Set(SignatureHeader, sig)
	}
	return h.Get
}

// The session of order o-1, as the fixtures' events carry it.
var fixtureIntent = payment.Intent{
	ID:          "cs_test_a1order1",
	AmountMinor: 4999900,
	Currency:    "INR",
	Metadata:    map[string]string{"order_id": "o-1", "reservation_id": "r-1", "sale_id": "s-1"},
	ReturnURL:   "https://shop.example/return?sale=s-1&order=o-1",
	CreatedAt:   unix(1764999000),
	UpdatedAt:   unix(1764999000),
}

func TestWebhookEvents(t *testing.T) {
	p, rec := newMocked(t, Config{WebhookSecrets: []string{secretNew}})
	// A paid session's payer and refunds: stripe-mock's payment intent
	// fixture, whose latest charge is a card's with one refund of 100.
	mockRefund := payment.Refund{ID: mockRefundID, IntentID: "cs_test_a1order1", AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1234567890)}
	paid := fixtureIntent
	paid.Status, paid.Payer, paid.Refunds = payment.IntentSucceeded, mockPayer, []payment.Refund{mockRefund}
	expired := fixtureIntent
	expired.Status = payment.IntentFailed
	asyncFailed := fixtureIntent
	asyncFailed.Status = payment.IntentFailed
	// A refund's event names the payment intent; its session is listed
	// (stripe-mock's fixture session, whose charge has a refund of 100),
	// and the event's refund is added to those listed.
	eventRefund := payment.Refund{ID: "re_3order1", IntentID: mockSessionID, AmountMinor: 4999900, Status: payment.RefundSucceeded, CreatedAt: unix(1765000100)}
	refunded := payment.Intent{
		ID: mockSessionID, Status: payment.IntentRequiresPayment, Metadata: map[string]string{},
		PayURL: "https://checkout.stripe.com/pay/c/" + mockSessionID, ReturnURL: "https://example.com/success",
		CreatedAt: unix(1234567890), UpdatedAt: unix(1234567890), Payer: mockPayer,
		Refunds: []payment.Refund{{ID: mockRefundID, IntentID: mockSessionID, AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1234567890)}, eventRefund},
	}
	// A refund that failed, or was canceled, is EventRefundFailed: the
	// event's refund, failed, among the intent's refunds (and not in
	// Refunded).
	failedRefund := eventRefund
	failedRefund.Status = payment.RefundFailed
	refundFailed := refunded
	refundFailed.Refunds = []payment.Refund{refunded.Refunds[0], failedRefund}
	lookupPI := "GET /v1/payment_intents/pi_3order1"
	lookupSession := "GET /v1/checkout/sessions"

	for _, c := range []struct {
		file       string
		wantID     string
		wantType   string
		wantIntent payment.Intent
		wantRefund *payment.Refund
		lookups    []string
	}{
		{"checkout.session.completed.json", "evt_1completed", payment.EventPaymentSucceeded, paid, nil, []string{lookupPI}},
		{"checkout.session.async_payment_succeeded.json", "evt_1asyncok", payment.EventPaymentSucceeded, paid, nil, []string{lookupPI}},
		{"checkout.session.completed_old_api_version.json", "evt_1completedold", payment.EventPaymentSucceeded, paid, nil, []string{lookupPI}},
		{"checkout.session.completed_unpaid.json", "evt_1completedunpaid", "stripe:checkout.session.completed", payment.Intent{}, nil, nil},
		{"checkout.session.async_payment_failed.json", "evt_1asyncfailed", payment.EventPaymentFailed, asyncFailed, nil, nil},
		{"checkout.session.expired.json", "evt_1expired", payment.EventPaymentFailed, expired, nil, nil},
		{"refund.created.json", "evt_1refundcreated", payment.EventRefundSucceeded, refunded, &eventRefund, []string{lookupSession}},
		{"refund.updated.json", "evt_1refundupdated", payment.EventRefundSucceeded, refunded, &eventRefund, []string{lookupSession}},
		{"refund.failed.json", "evt_1refundfailed", payment.EventRefundFailed, refundFailed, &failedRefund, []string{lookupSession}},
		{"refund.updated_canceled.json", "evt_1refundcanceled", payment.EventRefundFailed, refundFailed, &failedRefund, []string{lookupSession}},
		{"refund.created_pending.json", "evt_1refundpending", "stripe:refund.created", payment.Intent{}, nil, nil},
		{"charge.refunded.json", "evt_1chargerefunded", "stripe:charge.refunded", payment.Intent{}, nil, nil},
		{"plan.created.json", "evt_1Pgc76B7WZ01zgkWwyRHS12y", "stripe:plan.created", payment.Intent{}, nil, nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			body := fixture(t, c.file)
			ev, err := p.Webhook(context.Background(), headers(signed(body, testNow, secretNew)), body, testNow)
			if err != nil {
				t.Fatalf("Webhook: %v", err)
			}
			if ev.ID != c.wantID || ev.Type != c.wantType || ev.CreatedAt.IsZero() {
				t.Errorf("event = %s %s at %s, want %s %s at a time", ev.ID, ev.Type, ev.CreatedAt, c.wantID, c.wantType)
			}
			if !reflect.DeepEqual(ev.Data.Intent, c.wantIntent) {
				t.Errorf("data.intent =\n%+v\nwant\n%+v", ev.Data.Intent, c.wantIntent)
			}
			if !reflect.DeepEqual(ev.Data.Refund, c.wantRefund) {
				t.Errorf("data.refund = %+v, want %+v", ev.Data.Refund, c.wantRefund)
			}
			got := only(t, rec, c.lookups...)
			switch {
			case len(c.lookups) == 0:
			case c.lookups[0] == lookupPI:
				checkForm(t, got[0], map[string]string{"expand[0]": "latest_charge.refunds"})
			case c.lookups[0] == lookupSession:
				checkForm(t, got[0], map[string]string{"payment_intent": "pi_3order1", "limit": "1", "expand[0]": "data.payment_intent.latest_charge.refunds"})
			}
		})
	}
}

// stripe-go's ConstructEvent refuses an event of an older API version; the
// adapter reads it (see Webhook).
func TestWebhookOldAPIVersionRefusedByStripeGo(t *testing.T) {
	body := fixture(t, "checkout.session.completed_old_api_version.json")
	if _, err := webhook.ConstructEventWithOptions(body, signed(body, time.Now(), secretNew), secretNew, webhook.ConstructEventOptions{}); err == nil {
		t.Error("stripe-go took an event of API version 2020-08-27: the fixture no longer shows a mismatch")
	}
}

func TestWebhookSignature(t *testing.T) {
	// An event type needing no lookup: no API is called.
	body := fixture(t, "plan.created.json")
	p, err := New(Config{SecretKey: testKey, BaseURL: "http://127.0.0.1:1", WebhookSecrets: []string{secretOld, secretNew}})
	if err != nil {
		t.Fatal(err)
	}
	both := signed(body, testNow, secretOld) + ",v1=" + hex.EncodeToString(webhook.ComputeSignature(testNow, body, secretNew))
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] ^= 1
	for _, c := range []struct {
		name    string
		sig     string
		body    []byte
		secrets []string
		want    error
	}{
		{"the current secret", signed(body, testNow, secretNew), body, nil, nil},
		{"the previous secret, while it rolls", signed(body, testNow, secretOld), body, nil, nil},
		{"both secrets' signatures", both, body, nil, nil},
		{"only the new secret configured, both signatures", both, body, []string{secretNew}, nil},
		{"within the tolerance, late", signed(body, testNow.Add(-4*time.Minute), secretNew), body, nil, nil},
		{"within the tolerance, early", signed(body, testNow.Add(4*time.Minute), secretNew), body, nil, nil},
		{"a wrong secret", signed(body, testNow, "whsec_someone_else"), body, nil, payment.ErrBadSignature},
		{"a secret rolled away", signed(body, testNow, secretOld), body, []string{secretNew}, payment.ErrBadSignature},
		{"no secret configured", signed(body, testNow, secretNew), body, []string{}, payment.ErrBadSignature},
		{"a tampered body", signed(body, testNow, secretNew), tampered, nil, payment.ErrBadSignature},
		{"no header", "", body, nil, payment.ErrBadSignature},
		{"a malformed header", "t=1,v1", body, nil, payment.ErrBadSignature},
		{"no v1 signature", "t=" + strconv.FormatInt(testNow.Unix(), 10) + ",v0=abcd", body, nil, payment.ErrBadSignature},
		{"a forged time on a real signature", "t=" + strconv.FormatInt(testNow.Unix(), 10) + ",v1=" + hex.EncodeToString(webhook.ComputeSignature(testNow.Add(-time.Hour), body, secretNew)), body, nil, payment.ErrBadSignature},
		{"a replay an hour late", signed(body, testNow.Add(-time.Hour), secretNew), body, nil, payment.ErrStaleSignature},
		{"just past the tolerance", signed(body, testNow.Add(-5*time.Minute-time.Second), secretNew), body, nil, payment.ErrStaleSignature},
		{"from the future", signed(body, testNow.Add(10*time.Minute), secretNew), body, nil, payment.ErrStaleSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			pp := p
			if c.secrets != nil {
				if pp, err = New(Config{SecretKey: testKey, BaseURL: "http://127.0.0.1:1", WebhookSecrets: c.secrets}); err != nil {
					t.Fatal(err)
				}
			}
			ev, err := pp.Webhook(context.Background(), headers(c.sig), c.body, testNow)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Webhook = %v, want an event", err)
			case c.want == nil && (ev.ID != "evt_1Pgc76B7WZ01zgkWwyRHS12y" || ev.Type != "stripe:plan.created"):
				t.Errorf("Webhook = %+v, want evt_1Pgc76B7WZ01zgkWwyRHS12y plan.created", ev)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("Webhook = %v, want %v", err, c.want)
			}
		})
	}
}

func TestWebhookBadEvent(t *testing.T) {
	p, err := New(Config{SecretKey: testKey, BaseURL: "http://127.0.0.1:1", WebhookSecrets: []string{secretNew}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, body string }{
		{"not JSON", "not json"},
		{"no id", `{"object":"event","type":"plan.created","data":{"object":{}}}`},
		{"no type", `{"id":"evt_1","object":"event","data":{"object":{}}}`},
		{"an id too long", `{"id":"evt_` + longID + `","object":"event","type":"plan.created"}`},
		{"a session event without its object", `{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{}}`},
		{"a session event whose object is not a session", `{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"amount_total":"lots"}}}`},
		{"a refund event whose object is not a refund", `{"id":"evt_1","object":"event","type":"refund.updated","data":{"object":{"amount":[]}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			_, err := p.Webhook(context.Background(), headers(signed(body, testNow, secretNew)), body, testNow)
			if !errors.Is(err, payment.ErrBadEvent) {
				t.Errorf("Webhook = %v, want ErrBadEvent", err)
			}
		})
	}
}

// A lookup that fails is a plain error (the flow answers 5xx and Stripe
// delivers again), not a bad event or signature.
func TestWebhookLookupFails(t *testing.T) {
	p, err := New(Config{SecretKey: testKey, BaseURL: "http://127.0.0.1:1", Attempts: 1, WebhookSecrets: []string{secretNew}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkout.session.completed.json", "refund.created.json", "refund.failed.json"} {
		body := fixture(t, name)
		_, err := p.Webhook(context.Background(), headers(signed(body, testNow, secretNew)), body, testNow)
		if err == nil || errors.Is(err, payment.ErrBadEvent) || errors.Is(err, payment.ErrBadSignature) || payment.IsRefusal(err) {
			t.Errorf("%s with Stripe unreachable: %v, want a plain error", name, err)
		}
	}
}

const longID = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
