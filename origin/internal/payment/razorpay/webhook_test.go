package razorpay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

var (
	webhookSecret    = []byte("whsec-razorpay-current")
	oldWebhookSecret = []byte("whsec-razorpay-previous")
)

// headers are a delivery's headers: the signature and the event id.
func headers(sig, eventID string) func(string) string {
	h := http.Header{}
	if sig != "" {
		h.Set(SignatureHeader, sig)
	}
	if eventID != "" {
		h.Set(EventIDHeader, eventID)
	}
	return h.Get
}

// deliver signs body with secret and hands it to p's Webhook.
func deliver(p *Provider, body, secret []byte, eventID string) (payment.Event, error) {
	return p.Webhook(context.Background(), headers(Sign(body, secret), eventID), body, fakeEpoch)
}

// Every handled event decodes from its documented payload into the
// order flow's terms.
func TestWebhookDocumentedPayloads(t *testing.T) {
	tests := []struct {
		file      string
		wantType  string
		wantID    string
		status    string
		amount    int64
		payer     string
		metadata  map[string]string
		returnURL string
	}{
		{"webhook_payment_link_paid_standard.json", payment.EventPaymentSucceeded, "plink_QflcnnZqCekuvL", payment.IntentSucceeded,
			1000, "upi:gaurav.kumar@exampleupi", nil, ""},
		{"webhook_payment_link_paid_upi.json", payment.EventPaymentSucceeded, "plink_Qb2gHrKr01Maky", payment.IntentSucceeded,
			100, "upi:gaurav.kumar@okexample", map[string]string{"policy_name": "Jeevan Bima"}, "https://example-callback-url.com/"},
		{"webhook_payment_link_cancelled_standard.json", payment.EventPaymentFailed, "plink_QaIrRSjWiIuxAO", payment.IntentFailed,
			1000, "", nil, "https://example-callback-url.com/"},
		{"webhook_payment_link_cancelled_upi.json", payment.EventPaymentFailed, "plink_Qb2kkyr7V58HsP", payment.IntentFailed,
			100, "", map[string]string{"policy_name": "Jeevan Bima"}, "https://example-callback-url.com/"},
		{"webhook_payment_link_expired_standard.json", payment.EventPaymentFailed, "plink_QaIlOGFf8KZNF8", payment.IntentFailed,
			1000, "", map[string]string{"Test": "True"}, "https://example-callback-url.com/"},
		{"webhook_payment_link_expired_upi.json", payment.EventPaymentFailed, "plink_Qb2ftTb6oRGMmu", payment.IntentFailed,
			100, "", map[string]string{"policy_name": "Jeevan Bima"}, "https://example-callback-url.com/"},
	}
	f := newFake(t)
	p := f.provider(webhookSecret)
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := readFixture(t, tc.file)
			ev, err := deliver(p, body, webhookSecret, "evt_"+tc.wantID)
			if err != nil {
				t.Fatalf("Webhook: %v", err)
			}
			in := ev.Data.Intent
			if ev.ID != "evt_"+tc.wantID || ev.Type != tc.wantType || ev.Data.Refund != nil {
				t.Errorf("event = %q %q (refund %v), want %q %q", ev.ID, ev.Type, ev.Data.Refund, "evt_"+tc.wantID, tc.wantType)
			}
			if in.ID != tc.wantID || in.Status != tc.status || in.AmountMinor != tc.amount || in.Currency != "INR" ||
				in.Payer != tc.payer || mustJSON(in.Metadata) != mustJSON(tc.metadata) || in.ReturnURL != tc.returnURL || in.PayURL == "" {
				t.Errorf("intent = %+v", in)
			}
			var env struct {
				CreatedAt int64 `json:"created_at"`
			}
			_ = json.Unmarshal(body, &env)
			if ev.CreatedAt.Unix() != env.CreatedAt {
				t.Errorf("event time = %v, want %d", ev.CreatedAt, env.CreatedAt)
			}
		})
	}
	f.mu.Lock()
	n := len(f.requests)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("link events made %d API requests, want none", n)
	}
}

// refund.processed names only the refund and its payment: the link is
// looked up by the payment id, and the intent carries all its refunds.
func TestWebhookRefundProcessed(t *testing.T) {
	body := readFixture(t, "webhook_refund_processed.json")
	ev := fixture(t, "webhook_refund_processed.json")["payload"].(map[string]any)
	pay := ev["payment"].(map[string]any)["entity"].(map[string]any)
	thisRefund := ev["refund"].(map[string]any)["entity"].(map[string]any)

	f := newFake(t)
	l := fixture(t, "link_fetch_paid.json")
	l["amount"], l["amount_paid"], l["notes"] = 500000, 500000, map[string]any{"order_id": "o_refunded"}
	l["payments"] = []any{map[string]any{"amount": 500000, "created_at": 1597226379, "method": "netbanking",
		"payment_id": "pay_FPoJKWQQ8lK13n", "status": "captured"}}
	earlier := fixture(t, "refunds_of_payment.json")["items"].([]any)[0].(map[string]any)
	earlier["payment_id"], earlier["amount"] = "pay_FPoJKWQQ8lK13n", 140000
	f.seed(l, pay, earlier, thisRefund)
	p := f.provider(webhookSecret)

	got, err := deliver(p, body, webhookSecret, "evt_refund_1")
	if err != nil {
		t.Fatalf("Webhook: %v", err)
	}
	in := got.Data.Intent
	if got.Type != payment.EventRefundSucceeded || got.ID != "evt_refund_1" {
		t.Errorf("event = %q %q", got.ID, got.Type)
	}
	if r := got.Data.Refund; r == nil || r.ID != "rfnd_FS8TWyPrCsa0OB" || r.IntentID != "plink_KBnb7I424Rc1R9" || r.AmountMinor != 50000 ||
		r.Status != payment.RefundSucceeded || r.CreatedAt.Unix() != 1597734071 {
		t.Errorf("refund = %+v", got.Data.Refund)
	}
	if in.ID != "plink_KBnb7I424Rc1R9" || in.OrderID() != "o_refunded" || in.Status != payment.IntentSucceeded ||
		in.AmountMinor != 500000 || in.Refunded() != 190000 || len(in.Refunds) != 2 || in.Payer != "" {
		t.Errorf("intent = %+v, refunds %+v", in, in.Refunds)
	}
	if q := f.lastRequest("GET", "/v1/payment_links").Query; q.Get("payment_id") != "pay_FPoJKWQQ8lK13n" {
		t.Errorf("link looked up with %v, want payment_id", q)
	}

	// The refund's listing lags the event: the event's refund still counts.
	f2 := newFake(t)
	f2.seed(l, pay)
	got, err = deliver(f2.provider(webhookSecret), body, webhookSecret, "evt_refund_2")
	if err != nil || got.Data.Intent.Refunded() != 50000 {
		t.Errorf("Webhook(refund not listed yet) = %+v, %v", got.Data.Intent, err)
	}

	// A refund of a payment made on no link is not the order flow's.
	f3 := newFake(t)
	f3.seed(nil, pay)
	got, err = deliver(f3.provider(webhookSecret), body, webhookSecret, "evt_refund_3")
	if err != nil || got.Type != PassThroughPrefix+EventRefundProcessed || got.Data.Intent.ID != "" {
		t.Errorf("Webhook(refund on no link) = %q %+v, %v; want its own type", got.Type, got.Data.Intent, err)
	}

	// Razorpay down: an error that is neither a bad signature nor a bad
	// event, so the delivery is answered 5xx and comes again.
	f4 := newFake(t)
	f4.inject(fault{status: 503}, fault{status: 503}, fault{status: 503})
	_, err = deliver(f4.provider(webhookSecret), body, webhookSecret, "evt_refund_4")
	if err == nil || errors.Is(err, payment.ErrBadEvent) || errors.Is(err, payment.ErrBadSignature) {
		t.Errorf("Webhook(Razorpay down) = %v, want a look-up error", err)
	}
}

// refund.failed, Razorpay's documented payload, is EventRefundFailed: its
// refund failed, its link looked up by the payment id as for
// refund.processed, and the intent's refunds all of the payment's, the
// failed one among them at the event's word but not in Refunded.
func TestWebhookRefundFailed(t *testing.T) {
	body := readFixture(t, "webhook_refund_failed.json")
	ev := fixture(t, "webhook_refund_failed.json")["payload"].(map[string]any)
	pay := ev["payment"].(map[string]any)["entity"].(map[string]any)
	thisRefund := ev["refund"].(map[string]any)["entity"].(map[string]any)
	l := fixture(t, "link_fetch_paid.json")
	l["amount"], l["amount_paid"], l["notes"] = 500000, 500000, map[string]any{"order_id": "o_refunded"}
	l["payments"] = []any{map[string]any{"amount": 500000, "created_at": 1597226379, "method": "netbanking",
		"payment_id": "pay_FPoJKWQQ8lK13n", "status": "captured"}}
	earlier := fixture(t, "refunds_of_payment.json")["items"].([]any)[0].(map[string]any)
	earlier["payment_id"], earlier["amount"] = "pay_FPoJKWQQ8lK13n", 140000
	// The listing still says pending: the event is the newer word.
	listedPending := map[string]any{}
	for k, v := range thisRefund {
		listedPending[k] = v
	}
	listedPending["status"] = refundPending

	wantRefund := payment.Refund{ID: "rfnd_FS8TWyPrCsa0OB", IntentID: "plink_KBnb7I424Rc1R9", AmountMinor: 50000,
		Status: payment.RefundFailed, CreatedAt: time.Unix(1597734071, 0).UTC()}
	for _, tc := range []struct {
		name     string
		listed   []map[string]any // the payment's refunds as Razorpay lists them
		refunds  int
		refunded int64
	}{
		{"listed failed", []map[string]any{earlier, thisRefund}, 2, 140000},
		{"listed pending still", []map[string]any{earlier, listedPending}, 2, 140000},
		{"not listed yet", []map[string]any{earlier}, 2, 140000},
		{"the payment's only refund", nil, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.seed(l, pay, tc.listed...)
			got, err := deliver(f.provider(webhookSecret), body, webhookSecret, "evt_refund_failed")
			if err != nil {
				t.Fatalf("Webhook: %v", err)
			}
			if got.Type != payment.EventRefundFailed || got.ID != "evt_refund_failed" {
				t.Errorf("event = %q %q, want %q", got.ID, got.Type, payment.EventRefundFailed)
			}
			if r := got.Data.Refund; r == nil || *r != wantRefund {
				t.Errorf("refund = %+v, want %+v", got.Data.Refund, wantRefund)
			}
			in := got.Data.Intent
			if in.ID != "plink_KBnb7I424Rc1R9" || in.OrderID() != "o_refunded" || in.Status != payment.IntentSucceeded ||
				len(in.Refunds) != tc.refunds || in.Refunded() != tc.refunded {
				t.Errorf("intent = %+v, refunds %+v; want %d refunds, %d refunded", in, in.Refunds, tc.refunds, tc.refunded)
			}
			if r, ok := in.RefundByID(wantRefund.ID); !ok || r != wantRefund {
				t.Errorf("intent's refund %s = %+v, %v; want %+v", wantRefund.ID, r, ok, wantRefund)
			}
			if q := f.lastRequest("GET", "/v1/payment_links").Query; q.Get("payment_id") != "pay_FPoJKWQQ8lK13n" {
				t.Errorf("link looked up with %v, want payment_id", q)
			}
			if n := f.calls("GET", "/v1/payments/pay_FPoJKWQQ8lK13n/refunds"); n != 1 {
				t.Errorf("%d listings of the payment's refunds, want 1", n)
			}
		})
	}

	// A failed refund of a payment made on no link is not the order flow's.
	f := newFake(t)
	f.seed(nil, pay)
	got, err := deliver(f.provider(webhookSecret), body, webhookSecret, "evt_refund_failed_2")
	if err != nil || got.Type != PassThroughPrefix+EventRefundFailed || got.Data.Intent.ID != "" || got.Data.Refund != nil {
		t.Errorf("Webhook(refund on no link) = %q %+v, %v; want its own type", got.Type, got.Data, err)
	}
}

// Events the order flow does not act on pass through under their own
// names: payment.failed among them, since a failed UPI attempt leaves the
// link payable (Razorpay documents payment.failed then payment.captured
// for one retried payment).
// refund.created among them: Refund's answer told the flow of the refund
// already, whatever status the event shows (the documented example's is
// processed).
func TestWebhookOtherEvents(t *testing.T) {
	f := newFake(t)
	p := f.provider(webhookSecret)
	for file, want := range map[string]string{
		"webhook_payment_failed_upi.json":   "payment.failed",
		"webhook_payment_captured_upi.json": "payment.captured",
		"webhook_refund_created.json":       "refund.created",
	} {
		ev, err := deliver(p, readFixture(t, file), webhookSecret, "evt_"+want)
		if err != nil || ev.Type != PassThroughPrefix+want || ev.ID != "evt_"+want || ev.Data.Intent.ID != "" || ev.Data.Refund != nil {
			t.Errorf("%s: Webhook = %+v, %v; want type %q and no intent", file, ev, err, want)
		}
		switch ev.Type {
		case payment.EventPaymentSucceeded, payment.EventPaymentFailed, payment.EventRefundSucceeded, payment.EventRefundFailed:
			t.Errorf("%s: mapped onto %q, an event the order flow acts on", file, ev.Type)
		}
	}
	f.mu.Lock()
	n := len(f.requests)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("events passed through made %d API requests, want none", n)
	}
}

// The signature: HMAC-SHA256 of the raw body, hex, under any configured
// secret; anything else is refused before the body is read.
func TestWebhookSignature(t *testing.T) {
	body := readFixture(t, "webhook_payment_link_paid_upi.json")
	rotating := newFake(t).provider(webhookSecret, oldWebhookSecret)
	tampered := []byte(strings.Replace(string(body), `"amount": 100,`, `"amount": 1,`, 1))
	for _, tc := range []struct {
		name    string
		p       *Provider
		header  string
		body    []byte
		want    error
		eventID string
	}{
		{"current secret", rotating, Sign(body, webhookSecret), body, nil, "evt_1"},
		{"previous secret (rotation)", rotating, Sign(body, oldWebhookSecret), body, nil, "evt_1"},
		{"upper-case hex", rotating, strings.ToUpper(Sign(body, webhookSecret)), body, nil, "evt_1"},
		{"another secret", rotating, Sign(body, []byte("whsec-stranger")), body, payment.ErrBadSignature, "evt_1"},
		{"body changed after signing", rotating, Sign(body, webhookSecret), tampered, payment.ErrBadSignature, "evt_1"},
		{"no signature", rotating, "", body, payment.ErrBadSignature, "evt_1"},
		{"not hex", rotating, "sha256=" + Sign(body, webhookSecret), body, payment.ErrBadSignature, "evt_1"},
		{"a truncated signature", rotating, Sign(body, webhookSecret)[:40], body, payment.ErrBadSignature, "evt_1"},
		{"no secret configured", newFake(t).provider(), Sign(body, webhookSecret), body, payment.ErrBadSignature, "evt_1"},
		{"signed, no event id", rotating, Sign(body, webhookSecret), body, payment.ErrBadEvent, ""},
		{"signed, event id too long", rotating, Sign(body, webhookSecret), body, payment.ErrBadEvent, strings.Repeat("e", 129)},
	} {
		_, err := tc.p.Webhook(context.Background(), headers(tc.header, tc.eventID), tc.body, time.Now())
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: Webhook = %v, want %v", tc.name, err, tc.want)
		}
	}
	// The signature is over the body only: the same delivery verifies at
	// any time (a replay is the order flow's event-id de-duplication's).
	if _, err := rotating.Webhook(context.Background(), headers(Sign(body, webhookSecret), "evt_1"), body, time.Now().Add(72*time.Hour)); err != nil {
		t.Errorf("Webhook 3 days later = %v; Razorpay signs no time", err)
	}
}

// Signed bodies that are not events are ErrBadEvent.
func TestWebhookBadEvents(t *testing.T) {
	p := newFake(t).provider(webhookSecret)
	for name, body := range map[string]string{
		"not JSON":                     `event=payment_link.paid`,
		"no event name":                `{"entity":"event","payload":{}}`,
		"paid without its link":        `{"entity":"event","event":"payment_link.paid","payload":{"payment":{"entity":{"id":"pay_1"}}}}`,
		"expired without its link":     `{"entity":"event","event":"payment_link.expired","payload":{}}`,
		"refund without its payment":   `{"entity":"event","event":"refund.processed","payload":{"refund":{"entity":{"id":"rfnd_1"}}}}`,
		"failed without its payment":   `{"entity":"event","event":"refund.failed","payload":{"refund":{"entity":{"id":"rfnd_1"}}}}`,
		"failed without its refund":    `{"entity":"event","event":"refund.failed","payload":{"payment":{"entity":{"id":"pay_1"}}}}`,
		"notes neither object nor []":  `{"entity":"event","event":"payment_link.paid","payload":{"payment_link":{"entity":{"id":"plink_1","notes":[1]}}}}`,
		"a string where a number goes": `{"entity":"event","event":"payment_link.paid","payload":{"payment_link":{"entity":{"id":"plink_1","amount":"100"}}}}`,
	} {
		if ev, err := deliver(p, []byte(body), webhookSecret, "evt_1"); !errors.Is(err, payment.ErrBadEvent) {
			t.Errorf("%s: Webhook = %+v, %v; want ErrBadEvent", name, ev, err)
		}
	}
}
