package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// The payment journeys of payments_test.go with the origin on Stripe
// (FLASHGATE_PAYMENT_PROVIDER=stripe, through stripepay and stripe-go)
// and the sandbox gateway playing Stripe: Checkout Sessions (expired by
// the reconciler when a hold ends), Stripe's events signed in
// Stripe-Signature, Refunds, and the session listing the reconciler reads.

// stripeOrigin is payingOrigin with the gateway playing Stripe and the
// origin configured for it, the gateway adjusted by overrides.
func stripeOrigin(t *testing.T, overrides ...func(*sandboxgateway.Config)) (*origintest.Origin, *origintest.Payments, string) {
	t.Helper()
	o, p, sale := payingOrigin(t, append([]func(*sandboxgateway.Config){origintest.Personality(sandboxgateway.PersonalityStripe)}, overrides...)...)
	if !o.Config.PaymentsOn() || o.Config.PaymentProvider != "stripe" || o.Config.StripeAPIURL != p.URL {
		t.Fatalf("origin payments: provider %q, Stripe API %q; want stripe at %s", o.Config.PaymentProvider, o.Config.StripeAPIURL, p.URL)
	}
	return o, p, sale
}

// onPage acts on a payment as the hosted page does: POST
// /sandbox/intents/{id}/<action> with the pay key from the page's address,
// paying as payer ("" for none).
func onPage(t *testing.T, p *origintest.Payments, payURL, action, payer string) {
	t.Helper()
	u, err := url.Parse(payURL)
	if err != nil || !strings.HasPrefix(payURL, p.URL+"/pay/cs_test_") {
		t.Fatalf("pay url %q, want the sandbox's page of a Checkout Session (%v)", payURL, err)
	}
	frag, _ := url.ParseQuery(u.Fragment)
	var body *strings.Reader
	if payer != "" {
		body = strings.NewReader(`{"payer":"` + payer + `"}`)
	} else {
		body = strings.NewReader("")
	}
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/sandbox/intents/"+path.Base(u.Path)+"/"+action, body)
	req.Header.Set("Authorization", "Bearer "+frag.Get("key"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s on the page: %v", action, err)
	}
	defer resp.Body.Close()
	var in sandboxgateway.Intent
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s on the page = %d %+v, %v; want 200", action, resp.StatusCode, in, err)
	}
}

// delivered waits until the gateway has delivered an event of Stripe type
// typ about intent id, and returns how many such events it recorded.
func delivered(t *testing.T, p *origintest.Payments, id, typ string) int {
	t.Helper()
	var n int
	testenv.Eventually(t, 5*time.Second, "a "+typ+" event about "+id+" delivered", func() bool {
		n = 0
		ok := false
		for _, e := range p.Gateway.Events() {
			if e.IntentID == id && e.Type == typ {
				n++
				ok = ok || e.Delivered
			}
		}
		return ok
	})
	return n
}

// Paid on the hosted page: checkout.session.completed reaches the origin,
// which reads the payment back from the Stripe API, and the order is paid
// by the payer's card.
func TestStripeSandboxPaymentIsPaid(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 60))
	s := hold(t, o, sale, "alice")
	ord := mustOrder(t, o, s)
	if !strings.HasPrefix(ord.Payment.IntentID, "cs_test_") {
		t.Errorf("order's payment = %s, want a Checkout Session", ord.Payment.IntentID)
	}
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || in.AmountMinor != ord.AmountMinor || in.Currency != ord.Currency || in.Metadata["order_id"] != ord.OrderID ||
		in.ExpiresAt.Before(time.Now().Add(30*time.Minute)) {
		t.Errorf("session = %+v, %v; want %d %s for order %s, expiring 30 minutes on", in, err, ord.AmountMinor, ord.Currency, ord.OrderID)
	}

	onPage(t, p, ord.Payment.PayURL, "pay", "upi:alice@okbank")
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "checkout.session.completed")
	if got, want := orderPayer(t, o.Env, ord.OrderID), "card:"+sandboxgateway.StripeFingerprint("upi:alice@okbank"); got != want {
		t.Errorf("order payer = %q, want %q", got, want)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}

// Failed on the hosted page: checkout.session.expired gives the unit back
// at once.
func TestStripeSandboxFailedPaymentReturnsTheUnit(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	s := hold(t, o, sale, "gina")
	ord := mustOrder(t, o, s)
	onPage(t, p, ord.Payment.PayURL, "fail", "")
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "checkout.session.expired")
	settled(t, o, sale, origintest.Counts{Available: 1})
	hold(t, o, sale, "hank") // the unit is someone else's to take
}

// The hold ends before the shopper pays: the reconciler expires the
// Checkout Session (Stripe's shortest lifetime outlives a hold), the page
// stops taking the payment, and checkout.session.expired finds the order
// cancelled already.
func TestStripeSandboxHoldEndExpiresTheSession(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "ivy")
	ord := mustOrder(t, o, s)
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "checkout.session.expired")
	if in, err := p.Gateway.Intent(ord.Payment.IntentID); err != nil || in.Status != sandboxgateway.StatusFailed {
		t.Errorf("session after the hold's end = %+v, %v; want expired", in, err)
	}
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); !errors.Is(err, sandboxgateway.ErrIntentFailed) {
		t.Errorf("pay the expired session = %v, want %v", err, sandboxgateway.ErrIntentFailed)
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}

// An intent recorded without its hold's end (by its webhook or the
// reconciler, the origin having stopped between making the intent and
// recording it) gets it from the shopper's next read of the order, so its
// page is still expired when the hold ends.
func TestStripeSandboxPageRecordedLateIsExpired(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "ivy")
	ord := mustOrder(t, o, s)
	holdUntil := func() *time.Time {
		var at *time.Time
		if err := o.Env.DB.QueryRow(context.Background(), `SELECT hold_until FROM orders WHERE order_id = $1`, ord.OrderID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if _, err := o.Env.DB.Exec(context.Background(), `UPDATE orders SET hold_until = NULL WHERE order_id = $1`, ord.OrderID); err != nil {
		t.Fatal(err)
	}
	if status, got := o.Order(t, s.userToken, ord.OrderID); status != 200 || got.Payment == nil || got.Payment.IntentID != ord.Payment.IntentID {
		t.Fatalf("read of the order = %d %+v, want its payment", status, got)
	}
	if at := holdUntil(); at == nil || at.Before(s.expiresAt) {
		t.Fatalf("hold_until after the shopper's read = %v, want the hold's end with its grace (after %v)", at, s.expiresAt)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "checkout.session.expired")
	if in, err := p.Gateway.Intent(ord.Payment.IntentID); err != nil || in.Status != sandboxgateway.StatusFailed {
		t.Errorf("session after the hold's end = %+v, %v; want expired", in, err)
	}
}

// Paid after the hold is gone, before its session could be expired, with
// every webhook delivered twice: the payment is refunded once through
// Stripe's Refunds, refund.created comes back, and the unit stays with the
// next shopper.
func TestStripeSandboxLatePaymentIsRefundedOnce(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t, func(c *sandboxgateway.Config) { c.DuplicateRate = 1 })
	p.FailPageCloses.Store(true) // the payment beats the session's expiry
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	late := hold(t, o, sale, "erin")
	ord := mustOrder(t, o, late)
	o.WaitOrder(t, late.userToken, ord.OrderID, "cancelled", 10*time.Second)
	next := hold(t, o, sale, "frank")

	onPage(t, p, ord.Payment.PayURL, "pay", "")
	p.FailPageCloses.Store(false)
	got := o.WaitOrder(t, late.userToken, ord.OrderID, "refunded", 10*time.Second)
	testenv.Eventually(t, 5*time.Second, "refund issued", func() bool {
		_, got = o.Order(t, late.userToken, ord.OrderID)
		return got.Refund != nil && got.Refund.Status == "issued"
	})
	if got.Refund == nil || got.Refund.Status != "issued" || !strings.HasPrefix(got.Refund.RefundID, "re_") {
		t.Errorf("refund = %+v, want issued with a Stripe refund id", got.Refund)
	}
	keptByNext(t, o, sale, next)
	if n := delivered(t, p, ord.Payment.IntentID, "refund.created"); n != 1 {
		t.Errorf("refund.created events = %d, want 1", n)
	}
	quiet(t, p, true)   // every webhook came twice
	roundsPass(t, p, 3) // and the reconciler looked again
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || len(in.Refunds) != 1 || in.Refunds[0].AmountMinor != in.AmountMinor {
		t.Errorf("session = %+v, %v; want one full refund", in, err)
	}
}

// Webhooks lost: the reconciler finds the payment in Stripe's session
// listing (its payment expanded) and settles the order.
func TestStripeSandboxReconcilerRepairsALostWebhook(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 600))
	p.Gateway.SetWebhooksEnabled(false)
	s := hold(t, o, sale, "judy")
	ord := mustOrder(t, o, s)
	onPage(t, p, ord.Payment.PayURL, "pay", "upi:judy@okbank")
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	for _, e := range p.Gateway.Events() {
		if len(e.Deliveries) > 0 {
			t.Errorf("event %s %s was delivered; want every webhook lost", e.ID, e.Type)
		}
	}
	if got, want := orderPayer(t, o.Env, ord.OrderID), "card:"+sandboxgateway.StripeFingerprint("upi:judy@okbank"); got != want {
		t.Errorf("order payer = %q, want %q", got, want)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}

// A refund owed while Stripe refuses refunds (503) is issued by the
// reconciler once it is back, once.
func TestStripeSandboxReconcilerIssuesAnOwedRefund(t *testing.T) {
	t.Parallel()
	o, p, sale := stripeOrigin(t)
	p.FailPageCloses.Store(true) // the payment beats the session's expiry
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "kate")
	ord := mustOrder(t, o, s)
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	p.FailRefunds.Store(true)
	onPage(t, p, ord.Payment.PayURL, "pay", "")
	p.FailPageCloses.Store(false)
	got := o.WaitOrder(t, s.userToken, ord.OrderID, "refunded", 10*time.Second)
	if got.Refund == nil || got.Refund.Status != "pending" {
		t.Errorf("refund while Stripe refuses refunds = %+v, want pending", got.Refund)
	}
	roundsPass(t, p, 3) // the reconciler tried and was refused
	p.FailRefunds.Store(false)
	testenv.Eventually(t, 10*time.Second, "refund issued after Stripe is back", func() bool {
		_, got = o.Order(t, s.userToken, ord.OrderID)
		return got.Refund != nil && got.Refund.Status == "issued"
	})
	if got.Refund == nil || got.Refund.Status != "issued" {
		t.Errorf("refund after Stripe is back = %+v, want issued", got.Refund)
	}
	roundsPass(t, p, 3) // and the reconciler looked again
	if in, _ := p.Gateway.Intent(ord.Payment.IntentID); len(in.Refunds) != 1 {
		t.Errorf("Stripe refunds = %d, want exactly 1", len(in.Refunds))
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}
