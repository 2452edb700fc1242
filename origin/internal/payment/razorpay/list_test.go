package razorpay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Intents lists each paid link of the window once, from Razorpay's
// payments: its status, amount, notes as metadata, the UPI payer, and its
// refunds (pending ones not succeeded); unpaid links, failed payments and
// payments before the window are not listed.
func TestIntents(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	oldLink, _ := paidLink(t, f, p, "o_old", 100)
	f.advance(time.Hour)
	since := f.clock().Add(-time.Minute)

	upiLink, _ := paidLink(t, f, p, "o_upi", 49900)
	card, err := p.CreateIntent(ctx, newIntent("o_card", 1500), "order-o_card-intent")
	if err != nil {
		t.Fatal(err)
	}
	f.pay(card.ID, "card", "")
	unpaid, err := p.CreateIntent(ctx, newIntent("o_unpaid", 700), "order-o_unpaid-intent")
	if err != nil {
		t.Fatal(err)
	}
	refundedLink, _ := paidLink(t, f, p, "o_refunded", 10000)
	if _, err := p.Refund(ctx, refundedLink, 4000, "refund-first-1"); err != nil {
		t.Fatal(err)
	}
	f.setRefundStatus(refundPending)
	if _, err := p.Refund(ctx, refundedLink, 0, "refund-rest-1"); err != nil {
		t.Fatal(err)
	}
	f.failPayment()

	ins, err := p.Intents(ctx, since)
	if err != nil {
		t.Fatalf("Intents: %v", err)
	}
	got := map[string]payment.Intent{}
	for _, in := range ins {
		if _, dup := got[in.ID]; dup {
			t.Errorf("link %s listed twice", in.ID)
		}
		got[in.ID] = in
	}
	if len(got) != 3 {
		t.Errorf("Intents listed %d links, want 3 (upi, card, refunded): %+v", len(got), ins)
	}
	for _, id := range []string{oldLink, unpaid.ID} {
		if _, ok := got[id]; ok {
			t.Errorf("Intents listed %s (paid before the window, or unpaid)", id)
		}
	}
	if in := got[upiLink]; in.Status != payment.IntentSucceeded || in.AmountMinor != 49900 || in.Currency != "INR" ||
		in.OrderID() != "o_upi" || in.Metadata["sale_id"] != "diwali" || in.Payer != "upi:shopper@okbank" || len(in.Refunds) != 0 ||
		in.PayURL == "" {
		t.Errorf("UPI link = %+v", in)
	}
	if in := got[card.ID]; in.Status != payment.IntentSucceeded || in.Payer != "" || in.OrderID() != "o_card" {
		t.Errorf("card link = %+v (a card has no documented stable payer)", in)
	}
	in := got[refundedLink]
	if in.Refunded() != 10000 || len(in.Refunds) != 2 || in.Refunds[0].AmountMinor != 4000 || in.Refunds[0].Status != payment.RefundSucceeded ||
		in.Refunds[1].Status != "pending" || in.Refunds[1].IntentID != refundedLink {
		t.Errorf("refunded link = %+v, refunds %+v", in, in.Refunds)
	}

	// The window's bounds, as Fetch All Payments takes them.
	q := f.lastRequest("GET", "/v1/payments").Query
	if q.Get("from") != strconv.FormatInt(since.Unix(), 10) || q.Get("to") != strconv.FormatInt(f.clock().Unix(), 10) || q.Get("count") != "100" {
		t.Errorf("payments listed with %v", q)
	}
}

// A paid link is final: listed again, it is not looked up again.
func TestIntentsRemembersPaidLinks(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	paidLink(t, f, p, "o_1", 100)
	paidLink(t, f, p, "o_2", 100)
	if _, err := p.Intents(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	lookups := f.calls("GET", "/v1/payment_links")
	ins, err := p.Intents(ctx, time.Time{})
	if err != nil || len(ins) != 2 {
		t.Fatalf("Intents again = %+v, %v", ins, err)
	}
	if n := f.calls("GET", "/v1/payment_links") - lookups; n != 0 {
		t.Errorf("listing again looked %d links up, want 0", n)
	}
	if q := f.lastRequest("GET", "/v1/payments").Query; q.Has("from") {
		t.Errorf("Intents(zero time) sent from=%s, want none", q.Get("from"))
	}
}

// More payments than a page: Intents pages through with count and skip.
func TestIntentsPages(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	const n = 230
	for i := range n {
		paidLink(t, f, p, fmt.Sprintf("o_%03d", i), 100)
	}
	ins, err := p.Intents(context.Background(), fakeEpoch.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != n {
		t.Errorf("Intents listed %d links, want %d", len(ins), n)
	}
	var skips []string
	f.mu.Lock()
	for _, r := range f.requests {
		if r.Path == "/v1/payments" {
			skips = append(skips, r.Query.Get("skip"))
		}
	}
	f.mu.Unlock()
	if fmt.Sprint(skips) != "[0 100 200]" {
		t.Errorf("pages at skip %v, want [0 100 200]", skips)
	}
}

// Money captured on a link Razorpay has cancelled since (a UPI payment
// confirmed late) is listed as a payment, so the order flow refunds it.
func TestIntentsListsMoneyOnAClosedLink(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, _ := paidLink(t, f, p, testOrder, 10000)
	f.mu.Lock()
	f.links[linkID]["status"] = linkCancelled
	f.mu.Unlock()
	ins, err := p.Intents(ctx, time.Time{})
	if err != nil || len(ins) != 1 {
		t.Fatalf("Intents = %+v, %v; want the one link", ins, err)
	}
	if in := ins[0]; in.ID != linkID || in.Status != payment.IntentSucceeded || in.AmountMinor != 10000 {
		t.Errorf("Intents = %+v, want %s succeeded with 10000", in, linkID)
	}
}

// A VPA is one payer whatever its case.
func TestPayerIgnoresTheVPAsCase(t *testing.T) {
	for _, vpa := range []string{"Alice@OKBank", "alice@okbank"} {
		if got := (paymentEntity{Method: "upi", VPA: vpa}).payer(); got != "upi:alice@okbank" {
			t.Errorf("payer(%q) = %q, want upi:alice@okbank", vpa, got)
		}
	}
}
