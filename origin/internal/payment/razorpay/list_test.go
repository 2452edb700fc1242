package razorpay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// Intent reads one link as Intents lists it, however old: an unpaid link
// from the link alone; a paid one with its payment (the payer, the amount
// taken) and all the payment's refunds, failed and pending ones with their
// status, oldest first.
func TestIntent(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()

	unpaid, err := p.CreateIntent(ctx, newIntent("o_unpaid", 700), "order-o_unpaid-intent")
	if err != nil {
		t.Fatal(err)
	}
	f.forget()
	in, err := p.Intent(ctx, unpaid.ID)
	if err != nil {
		t.Fatalf("Intent(unpaid): %v", err)
	}
	if in.ID != unpaid.ID || in.Status != payment.IntentRequiresPayment || in.AmountMinor != 700 || in.Currency != "INR" ||
		in.OrderID() != "o_unpaid" || in.PayURL != unpaid.PayURL || in.Payer != "" || len(in.Refunds) != 0 {
		t.Errorf("Intent(unpaid) = %+v, want %+v", in, unpaid)
	}
	if got, want := f.requestLines(), []string{"GET /v1/payment_links/" + unpaid.ID}; !slices.Equal(got, want) {
		t.Errorf("Intent(unpaid) asked %q, want %q", got, want)
	}

	in0, err := p.CreateIntent(ctx, newIntent(testOrder, 10000), "order-"+testOrder+"-intent")
	if err != nil {
		t.Fatal(err)
	}
	linkID := in0.ID
	pid := f.pay(linkID, "upi", "Shopper@OKBank")
	if _, err := p.Refund(ctx, linkID, 3000, "refund-processed"); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute)
	f.setRefundStatus(refundFailed)
	if _, err := p.Refund(ctx, linkID, 2000, "refund-failed-1"); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute)
	f.setRefundStatus(refundPending)
	if _, err := p.Refund(ctx, linkID, 4000, "refund-pending"); err != nil {
		t.Fatal(err)
	}
	f.advance(90 * 24 * time.Hour) // long past any listing's window
	f.forget()

	in, err = p.Intent(ctx, linkID)
	if err != nil {
		t.Fatalf("Intent(paid): %v", err)
	}
	if in.ID != linkID || in.Status != payment.IntentSucceeded || in.AmountMinor != 10000 || in.Payer != "upi:shopper@okbank" ||
		in.OrderID() != testOrder || !in.CreatedAt.Equal(fakeEpoch) {
		t.Errorf("Intent(paid) = %+v", in)
	}
	var statuses []string
	var amounts []int64
	for _, r := range in.Refunds {
		statuses, amounts = append(statuses, r.Status), append(amounts, r.AmountMinor)
		if r.IntentID != linkID || !strings.HasPrefix(r.ID, "rfnd_") {
			t.Errorf("refund %+v, want one of %s", r, linkID)
		}
	}
	if want := []string{payment.RefundSucceeded, payment.RefundFailed, payment.RefundPending}; !slices.Equal(statuses, want) {
		t.Errorf("Intent(paid) refunds' statuses = %v, want %v (oldest first)", statuses, want)
	}
	if want := []int64{3000, 2000, 4000}; !slices.Equal(amounts, want) {
		t.Errorf("Intent(paid) refunds' amounts = %v, want %v", amounts, want)
	}
	if n := in.Refunded(); n != 7000 {
		t.Errorf("Intent(paid).Refunded() = %d, want 7000 (the failed refund gave nothing back)", n)
	}
	want := []string{"GET /v1/payment_links/" + linkID, "GET /v1/payments/" + pid, "GET /v1/payments/" + pid + "/refunds"}
	if got := f.requestLines(); !slices.Equal(got, want) {
		t.Errorf("Intent(paid) asked %q, want %q", got, want)
	}
	if q := f.lastRequest("GET", "/v1/payments/"+pid+"/refunds").Query; q.Get("count") != "100" || q.Get("skip") != "0" {
		t.Errorf("refunds listed with %v, want count 100, skip 0", q)
	}
}

// A failed refund gives nothing back, so the payment's amount_refunded
// does not show it: Intent asks for the refunds anyway and finds it.
func TestIntentFindsARefundThatOnlyFailed(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)
	f.setRefundStatus(refundFailed)
	r, err := p.Refund(ctx, linkID, 0, "order-o_1-refund")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	refunded := num(f.payments[pid]["amount_refunded"])
	f.mu.Unlock()
	if refunded != 0 {
		t.Fatalf("the fake's payment shows amount_refunded %d after a failed refund, want 0", refunded)
	}
	in, err := p.Intent(ctx, linkID)
	if err != nil {
		t.Fatalf("Intent: %v", err)
	}
	if len(in.Refunds) != 1 || in.Refunds[0].ID != r.ID || in.Refunds[0].Status != payment.RefundFailed || in.Refunded() != 0 {
		t.Errorf("Intent refunds = %+v, want %s failed and nothing refunded", in.Refunds, r.ID)
	}
}

// Money taken on a link closed since is a payment, as Intents lists it.
func TestIntentMoneyOnAClosedLink(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	linkID, _ := paidLink(t, f, p, testOrder, 10000)
	f.mu.Lock()
	f.links[linkID]["status"] = linkCancelled
	f.mu.Unlock()
	in, err := p.Intent(context.Background(), linkID)
	if err != nil || in.Status != payment.IntentSucceeded || in.AmountMinor != 10000 || in.Payer != "upi:shopper@okbank" {
		t.Errorf("Intent = %+v, %v; want succeeded with 10000 from upi:shopper@okbank", in, err)
	}
}

// A link, or its payment, that cannot be read is an error naming the
// link: Razorpay's refusal (an unknown id) stays a refusal, Razorpay down
// is not one; a link with more than one captured payment is not guessed.
func TestIntentFails(t *testing.T) {
	ctx := context.Background()
	t.Run("unknown link", func(t *testing.T) {
		f := newFake(t)
		_, err := f.provider().Intent(ctx, "plink_Nope0000000000")
		if !payment.IsRefusal(err) || !strings.Contains(err.Error(), "plink_Nope0000000000") {
			t.Errorf("Intent(unknown) = %v, want a refusal naming the link", err)
		}
		if got, want := f.requestLines(), []string{"GET /v1/payment_links/plink_Nope0000000000"}; !slices.Equal(got, want) {
			t.Errorf("Intent(unknown) asked %q, want %q", got, want)
		}
	})
	for name, faults := range map[string][]fault{
		"the link's fetch":    {{status: 503}, {status: 503}, {status: 503}},
		"the payment's fetch": {{status: passThrough}, {status: 503}, {status: 503}, {status: 503}},
		"the refunds' list":   {{status: passThrough}, {status: passThrough}, {status: 503}, {status: 503}, {status: 503}},
	} {
		t.Run("Razorpay down at "+name, func(t *testing.T) {
			f := newFake(t)
			p := f.provider()
			linkID, _ := paidLink(t, f, p, testOrder, 10000)
			f.inject(faults...)
			in, err := p.Intent(ctx, linkID)
			if err == nil || payment.IsRefusal(err) || !strings.Contains(err.Error(), linkID) {
				t.Errorf("Intent = %+v, %v; want an error that is not a refusal, naming %s", in, err, linkID)
			}
		})
	}
	t.Run("two captured payments", func(t *testing.T) {
		f := newFake(t)
		p := f.provider()
		linkID, _ := paidLink(t, f, p, testOrder, 10000)
		f.mu.Lock()
		ps := f.links[linkID]["payments"].([]any)
		f.links[linkID]["payments"] = append(ps, ps[0])
		f.mu.Unlock()
		if _, err := p.Intent(ctx, linkID); err == nil {
			t.Error("Intent of a link with two captured payments succeeded")
		}
	})
}

// The fake's payment fetch answers what it was seeded with, as the Fetch a
// Payment page documents it, and refuses an unknown id as the page does.
func TestFakeFetchPayment(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	f.seed(nil, fixture(t, "payment_fetch_upi.json"))
	var got paymentEntity
	if err := p.do(context.Background(), request{method: "GET", path: "/v1/payments/pay_MT3PgKGazkDUUM"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "pay_MT3PgKGazkDUUM" || got.Status != paymentCaptured || got.Amount != 1000 || got.payer() != "upi:gaurav.kumar@examplebank" {
		t.Errorf("fetched %+v, want the page's UPI example", got)
	}
	if err := p.do(context.Background(), request{method: "GET", path: "/v1/payments/pay_MT3PgKGazkDUUM", query: url.Values{"expand[]": {"card"}}}, &got); !payment.IsRefusal(err) {
		t.Errorf("fetch with expand[] = %v, want a refusal (another page's parameter)", err)
	}
	err := p.do(context.Background(), request{method: "GET", path: "/v1/payments/pay_Nope0000000000"}, &got)
	var ae *payment.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Message != "The id provided does not exist" {
		t.Errorf("fetch of an unknown payment = %v, want 400 The id provided does not exist", err)
	}
}
