package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/flashgate/flashgate/origin/internal/payment/razorpay"
	"github.com/flashgate/flashgate/origin/origintest"
)

// The payment journeys of payments_test.go with the origin on Razorpay
// (FLASHGATE_PAYMENT_PROVIDER=razorpay, through the razorpay adapter) and
// the sandbox gateway playing Razorpay: Payment Links (cancelled by the
// reconciler when a hold ends, as expire_by cannot come sooner than 15
// minutes), Razorpay's webhooks signed in X-Razorpay-Signature, Refunds,
// and the payments listing the reconciler reads.

// razorpayOrigin is payingOrigin with the gateway playing Razorpay and the
// origin configured for it, the gateway adjusted by overrides.
func razorpayOrigin(t *testing.T, overrides ...func(*sandboxgateway.Config)) (*origintest.Origin, *origintest.Payments, string) {
	t.Helper()
	o, p, sale := payingOrigin(t, append([]func(*sandboxgateway.Config){origintest.Personality(sandboxgateway.PersonalityRazorpay)}, overrides...)...)
	if !o.Config.PaymentsOn() || o.Config.PaymentProvider != "razorpay" || o.Config.RazorpayAPIURL != p.URL {
		t.Fatalf("origin payments: provider %q, Razorpay API %q; want razorpay at %s", o.Config.PaymentProvider, o.Config.RazorpayAPIURL, p.URL)
	}
	return o, p, sale
}

// onLinkPage acts on a Payment Link as the hosted page does: POST
// /sandbox/intents/{id}/<action> with the pay key from short_url, paying
// as payer ("" for none).
func onLinkPage(t *testing.T, p *origintest.Payments, payURL, action, payer string) {
	t.Helper()
	u, err := url.Parse(payURL)
	if err != nil || !strings.HasPrefix(payURL, p.URL+"/pay/plink_") {
		t.Fatalf("pay url %q, want the sandbox's page of a Payment Link (%v)", payURL, err)
	}
	frag, _ := url.ParseQuery(u.Fragment)
	body := ""
	if payer != "" {
		body = `{"payer":"` + payer + `"}`
	}
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/sandbox/intents/"+path.Base(u.Path)+"/"+action, strings.NewReader(body))
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

// roundsPass waits until the reconciler has listed payments n more times:
// n-1 whole rounds have run since the call.
func roundsPass(t *testing.T, p *origintest.Payments, n int64) {
	t.Helper()
	from := p.Listings()
	testenv.Eventually(t, 10*time.Second, "reconciler rounds", func() bool { return p.Listings() >= from+n })
}

// quiet waits until every event the gateway recorded is delivered (or
// suppressed) with its duplicate, if DuplicateRate sends one, sent.
func quiet(t *testing.T, p *origintest.Payments, duplicates bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "every webhook delivered", func() bool {
		for _, e := range p.Gateway.Events() {
			if e.Suppressed {
				continue
			}
			if !e.Delivered || (duplicates && !hasDuplicate(e)) {
				return false
			}
		}
		return true
	})
}

func hasDuplicate(e sandboxgateway.Event) bool {
	for _, d := range e.Deliveries {
		if d.Duplicate && d.StatusCode != 0 {
			return true
		}
	}
	return false
}

// waitRefund polls an order until its refund's status is want.
func waitRefund(t *testing.T, o *origintest.Origin, userToken, id, want string) origintest.Order {
	t.Helper()
	var got origintest.Order
	testenv.Eventually(t, 10*time.Second, "refund "+want, func() bool {
		_, got = o.Order(t, userToken, id)
		return got.Refund != nil && got.Refund.Status == want
	})
	return got
}

// Paid on the hosted page by a UPI payer: payment_link.paid reaches the
// origin, and the order is paid by the payer's VPA.
func TestRazorpaySandboxPaymentIsPaid(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 60))
	s := hold(t, o, sale, "alice")
	ord := mustOrder(t, o, s)
	if !strings.HasPrefix(ord.Payment.IntentID, "plink_") {
		t.Errorf("order's payment = %s, want a Payment Link", ord.Payment.IntentID)
	}
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || in.AmountMinor != ord.AmountMinor || in.Currency != ord.Currency || in.Metadata["order_id"] != ord.OrderID ||
		in.ExpiresAt.Before(time.Now().Add(razorpay.MinExpiry)) {
		t.Errorf("link = %+v, %v; want %d %s for order %s, expiring 15 minutes on", in, err, ord.AmountMinor, ord.Currency, ord.OrderID)
	}

	onLinkPage(t, p, ord.Payment.PayURL, "pay", "upi:Alice@okbank")
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "payment_link.paid")
	if got, want := orderPayer(t, o.Env, ord.OrderID), "upi:alice@okbank"; got != want {
		t.Errorf("order payer = %q, want %q", got, want)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}

// Failed on the hosted page: payment_link.expired gives the unit back at
// once.
func TestRazorpaySandboxFailedPaymentReturnsTheUnit(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	s := hold(t, o, sale, "gina")
	ord := mustOrder(t, o, s)
	onLinkPage(t, p, ord.Payment.PayURL, "fail", "")
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "payment_link.expired")
	settled(t, o, sale, origintest.Counts{Available: 1})
	hold(t, o, sale, "hank") // the unit is someone else's to take
}

// The hold ends before the shopper pays: the reconciler cancels the
// Payment Link (its expire_by is 15 minutes on at the soonest), the page
// stops taking the payment, and payment_link.cancelled finds the order
// cancelled already.
func TestRazorpaySandboxHoldEndCancelsTheLink(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "ivy")
	ord := mustOrder(t, o, s)
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	delivered(t, p, ord.Payment.IntentID, "payment_link.cancelled")
	if in, err := p.Gateway.Intent(ord.Payment.IntentID); err != nil || in.Status != sandboxgateway.StatusFailed || !in.Closed {
		t.Errorf("link after the hold's end = %+v, %v; want cancelled", in, err)
	}
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); !errors.Is(err, sandboxgateway.ErrIntentFailed) {
		t.Errorf("pay the cancelled link = %v, want %v", err, sandboxgateway.ErrIntentFailed)
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}

// Paid after the hold is gone, before its link could be cancelled, with
// every webhook delivered twice: the payment is refunded once through
// Razorpay's Refunds, refund.processed comes back, and the unit stays
// with the next shopper.
func TestRazorpaySandboxLatePaymentIsRefundedOnce(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t, func(c *sandboxgateway.Config) { c.DuplicateRate = 1 })
	p.FailPageCloses.Store(true) // the payment beats the link's cancel
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	late := hold(t, o, sale, "erin")
	ord := mustOrder(t, o, late)
	o.WaitOrder(t, late.userToken, ord.OrderID, "cancelled", 10*time.Second)
	next := hold(t, o, sale, "frank")

	onLinkPage(t, p, ord.Payment.PayURL, "pay", "")
	p.FailPageCloses.Store(false)
	o.WaitOrder(t, late.userToken, ord.OrderID, "refunded", 10*time.Second)
	got := waitRefund(t, o, late.userToken, ord.OrderID, "issued")
	if !strings.HasPrefix(got.Refund.RefundID, "rfnd_") {
		t.Errorf("refund = %+v, want issued with a Razorpay refund id", got.Refund)
	}
	keptByNext(t, o, sale, next)
	if n := delivered(t, p, ord.Payment.IntentID, "refund.processed"); n != 1 {
		t.Errorf("refund.processed events = %d, want 1", n)
	}
	quiet(t, p, true)   // every webhook came twice
	roundsPass(t, p, 3) // and the reconciler looked again
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || len(in.Refunds) != 1 || in.Refunds[0].AmountMinor != in.AmountMinor {
		t.Errorf("link = %+v, %v; want one full refund", in, err)
	}
}

// Webhooks lost: the reconciler finds the payment in Razorpay's payments
// listing, its link by the payment id, and settles the order.
func TestRazorpaySandboxReconcilerRepairsALostWebhook(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 600))
	p.Gateway.SetWebhooksEnabled(false)
	s := hold(t, o, sale, "judy")
	ord := mustOrder(t, o, s)
	onLinkPage(t, p, ord.Payment.PayURL, "pay", "upi:judy@okbank")
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	for _, e := range p.Gateway.Events() {
		if len(e.Deliveries) > 0 {
			t.Errorf("event %s %s was delivered; want every webhook lost", e.ID, e.Type)
		}
	}
	if got, want := orderPayer(t, o.Env, ord.OrderID), "upi:judy@okbank"; got != want {
		t.Errorf("order payer = %q, want %q", got, want)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}

// A refund owed while Razorpay refuses refunds (503) is issued by the
// reconciler once it is back, once.
func TestRazorpaySandboxReconcilerIssuesAnOwedRefund(t *testing.T) {
	t.Parallel()
	o, p, sale := razorpayOrigin(t)
	p.FailPageCloses.Store(true) // the payment beats the link's cancel
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "kate")
	ord := mustOrder(t, o, s)
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second)
	p.FailRefunds.Store(true)
	onLinkPage(t, p, ord.Payment.PayURL, "pay", "")
	p.FailPageCloses.Store(false)
	got := o.WaitOrder(t, s.userToken, ord.OrderID, "refunded", 10*time.Second)
	if got.Refund == nil || got.Refund.Status != "pending" {
		t.Errorf("refund while Razorpay refuses refunds = %+v, want pending", got.Refund)
	}
	roundsPass(t, p, 3) // the reconciler tried and was refused
	if in, _ := p.Gateway.Intent(ord.Payment.IntentID); len(in.Refunds) != 0 {
		t.Fatalf("Razorpay refunds while refused = %d, want 0", len(in.Refunds))
	}
	p.FailRefunds.Store(false)
	waitRefund(t, o, s.userToken, ord.OrderID, "issued")
	quiet(t, p, false)
	roundsPass(t, p, 3)
	if in, _ := p.Gateway.Intent(ord.Payment.IntentID); len(in.Refunds) != 1 {
		t.Errorf("Razorpay refunds = %d, want exactly 1", len(in.Refunds))
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}

// hookCatcher records the webhooks a gateway delivers.
type hookCatcher struct {
	mu  sync.Mutex
	got []caught
	srv *httptest.Server
}

type caught struct {
	header http.Header
	body   []byte
}

func newHookCatcher(t *testing.T) *hookCatcher {
	h := &hookCatcher{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, caught{r.Header.Clone(), b})
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// of waits for the deliveries of events of Razorpay type typ, and returns
// them.
func (h *hookCatcher) of(t *testing.T, typ string, n int) []caught {
	t.Helper()
	var out []caught
	testenv.Eventually(t, 5*time.Second, typ+" webhook", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		out = nil
		for _, c := range h.got {
			var e struct{ Event string }
			if json.Unmarshal(c.body, &e) == nil && e.Event == typ {
				out = append(out, c)
			}
		}
		return len(out) >= n
	})
	return out
}

// The adapter against the personality, call by call: a link made (and
// made again for the same order: Razorpay refuses the reference_id, the
// adapter finds the first link), cancelled, paid, refunded once under one
// key, listed, and every webhook verified and decoded by the adapter's
// own Webhook, under the secret and not another.
func TestRazorpaySandboxAdapterCalls(t *testing.T) {
	t.Parallel()
	hooks := newHookCatcher(t)
	const secret = "whsec-razorpay-test-secret"
	g, err := sandboxgateway.New(sandboxgateway.Config{
		Personality: sandboxgateway.PersonalityRazorpay, APIKey: "test-gateway-key", ControlToken: "test-gateway-control-token",
		WebhookSecrets: []string{secret}, WebhookURL: hooks.srv.URL, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		DuplicateRate: 1, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Close(ctx)
		srv.Close()
	})
	if err := g.SetPublicURL(srv.URL); err != nil {
		t.Fatal(err)
	}
	rp := razorpay.New(razorpay.Config{KeyID: sandboxgateway.RazorpayKeyID, KeySecret: "test-gateway-key", BaseURL: srv.URL,
		WebhookSecrets: [][]byte{[]byte(secret)}, Attempts: 1})
	ctx := context.Background()
	req := payment.NewIntent{AmountMinor: 4999900, Currency: "INR", Metadata: map[string]string{"order_id": "ord-1"},
		ReturnURL: "https://shop.example/orders/ord-1", ExpiresAt: time.Now().Add(time.Minute)}

	in, err := rp.CreateIntent(ctx, req, "key-1")
	if err != nil || !strings.HasPrefix(in.ID, "plink_") || in.Status != payment.IntentRequiresPayment || in.AmountMinor != 4999900 ||
		in.Currency != "INR" || in.Metadata["order_id"] != "ord-1" || !strings.HasPrefix(in.PayURL, srv.URL+"/pay/"+in.ID+"#key=") ||
		in.ReturnURL != req.ReturnURL {
		t.Fatalf("CreateIntent = %+v, %v; want a created link of 4999900 INR for ord-1 on the sandbox's page", in, err)
	}
	again, err := rp.CreateIntent(ctx, req, "key-2")
	if err != nil || again.ID != in.ID {
		t.Errorf("CreateIntent for the same order = %+v, %v; want link %s again", again, err, in.ID)
	}
	if n := len(g.Intents()); n != 1 {
		t.Errorf("links = %d, want 1", n)
	}
	core, _ := g.Intent(in.ID)
	if min := time.Now().Add(razorpay.MinExpiry); core.ExpiresAt.Before(min) {
		t.Errorf("expire_by = %v, want at least %v", core.ExpiresAt, min)
	}

	// A second order's link is cancelled, as ClosePage does at the hold's end.
	req2 := req
	req2.Metadata = map[string]string{"order_id": "ord-2"}
	other, err := rp.CreateIntent(ctx, req2, "key-3")
	if err != nil {
		t.Fatalf("CreateIntent(ord-2) = %v", err)
	}
	if err := rp.ClosePage(ctx, other.ID); err != nil {
		t.Errorf("ClosePage = %v, want nil", err)
	}
	if err := rp.ClosePage(ctx, other.ID); err != nil {
		t.Errorf("ClosePage again = %v, want nil (cancelled already)", err)
	}
	cancelled := hooks.of(t, "payment_link.cancelled", 1)
	ev, err := rp.Webhook(ctx, cancelled[0].header.Get, cancelled[0].body, time.Now())
	if err != nil || ev.Type != payment.EventPaymentFailed || ev.Data.Intent.ID != other.ID || ev.Data.Intent.Status != payment.IntentFailed {
		t.Errorf("Webhook(payment_link.cancelled) = %+v, %v; want %s failed", ev, err, other.ID)
	}

	if _, err := g.PayAs(in.ID, "upi:alice@okbank"); err != nil {
		t.Fatal(err)
	}
	if err := rp.ClosePage(ctx, in.ID); !errors.Is(err, payment.ErrPaymentStarted) {
		t.Errorf("ClosePage of the paid link = %v, want %v", err, payment.ErrPaymentStarted)
	}
	paid := hooks.of(t, "payment_link.paid", 2) // the delivery and its duplicate
	var paidID string
	for i, c := range paid {
		ev, err := rp.Webhook(ctx, c.header.Get, c.body, time.Now())
		if err != nil || ev.Type != payment.EventPaymentSucceeded || ev.Data.Intent.ID != in.ID ||
			ev.Data.Intent.Status != payment.IntentSucceeded || ev.Data.Intent.Payer != "upi:alice@okbank" ||
			ev.Data.Intent.AmountMinor != 4999900 || ev.Data.Intent.Metadata["order_id"] != "ord-1" {
			t.Errorf("Webhook(payment_link.paid #%d) = %+v, %v; want %s paid by upi:alice@okbank", i, ev, err, in.ID)
		}
		if i == 0 {
			paidID = ev.ID
		} else if ev.ID != paidID {
			t.Errorf("duplicate delivery's event id = %q, want %q", ev.ID, paidID)
		}
		if err := razorpay.VerifySignature(c.header.Get(razorpay.SignatureHeader), c.body, [][]byte{[]byte("another secret")}); err == nil {
			t.Errorf("payment_link.paid verifies under another secret")
		}
	}

	r1, err := rp.Refund(ctx, in.ID, 0, "refund-ord-1")
	if err != nil || !strings.HasPrefix(r1.ID, "rfnd_") || r1.AmountMinor != 4999900 || r1.Status != payment.RefundSucceeded {
		t.Fatalf("Refund = %+v, %v; want a processed refund of 4999900", r1, err)
	}
	r2, err := rp.Refund(ctx, in.ID, 0, "refund-ord-1")
	if err != nil || r2.ID != r1.ID {
		t.Errorf("Refund again = %+v, %v; want %s again", r2, err, r1.ID)
	}
	if core, _ := g.Intent(in.ID); len(core.Refunds) != 1 {
		t.Errorf("refunds = %d, want 1", len(core.Refunds))
	}
	processed := hooks.of(t, "refund.processed", 1)
	ev, err = rp.Webhook(ctx, processed[0].header.Get, processed[0].body, time.Now())
	if err != nil || ev.Type != payment.EventRefundSucceeded || ev.Data.Intent.ID != in.ID || ev.Data.Refund == nil ||
		ev.Data.Refund.ID != r1.ID || ev.Data.Refund.Status != payment.RefundSucceeded || len(ev.Data.Intent.Refunds) != 1 {
		t.Errorf("Webhook(refund.processed) = %+v, %v; want refund %s of %s", ev, err, r1.ID, in.ID)
	}

	listed, err := rp.Intents(ctx, time.Now().Add(-time.Hour))
	if err != nil || len(listed) != 1 || listed[0].ID != in.ID || listed[0].Status != payment.IntentSucceeded ||
		listed[0].Payer != "upi:alice@okbank" || len(listed[0].Refunds) != 1 || listed[0].Refunds[0].ID != r1.ID {
		t.Errorf("Intents = %+v, %v; want %s paid and refunded once (the cancelled link is not listed)", listed, err, in.ID)
	}
	if listed, err := rp.Intents(ctx, time.Now().Add(time.Hour)); err != nil || len(listed) != 0 {
		t.Errorf("Intents from an hour on = %+v, %v; want none", listed, err)
	}

	// A failed link is expired.
	req3 := req
	req3.Metadata = map[string]string{"order_id": "ord-3"}
	third, err := rp.CreateIntent(ctx, req3, "key-4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Fail(third.ID); err != nil {
		t.Fatal(err)
	}
	expired := hooks.of(t, "payment_link.expired", 1)
	ev, err = rp.Webhook(ctx, expired[0].header.Get, expired[0].body, time.Now())
	if err != nil || ev.Type != payment.EventPaymentFailed || ev.Data.Intent.ID != third.ID {
		t.Errorf("Webhook(payment_link.expired) = %+v, %v; want %s failed", ev, err, third.ID)
	}

	bad := razorpay.New(razorpay.Config{KeyID: "rzp_test_SomeoneElse00", KeySecret: "test-gateway-key", BaseURL: srv.URL, Attempts: 1})
	if _, err := bad.CreateIntent(ctx, req3, "key-5"); err == nil {
		t.Errorf("CreateIntent with another key id = nil error, want refused")
	}
}
