package razorpay

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// paidLink makes a link of amount and pays it by UPI; it returns the link
// and payment ids.
func paidLink(t *testing.T, f *fakeRazorpay, p *Provider, order string, amount int64) (string, string) {
	t.Helper()
	in, err := p.CreateIntent(context.Background(), newIntent(order, amount), "order-"+order+"-intent")
	if err != nil {
		t.Fatal(err)
	}
	return in.ID, f.pay(in.ID, "upi", "shopper@okbank")
}

func refundPath(pid string) string { return "/v1/payments/" + pid + "/refund" }

// A full refund (amount 0) gives back all that was paid, at normal speed,
// under the key as receipt and X-Refund-Idempotency; the same key again
// gets the same refund, without asking for another.
func TestRefundFull(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)
	key := "order-" + testOrder + "-refund"

	r, err := p.Refund(ctx, linkID, 0, key)
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if r.ID == "" || r.IntentID != linkID || r.AmountMinor != 10000 || r.Status != payment.RefundSucceeded || !r.CreatedAt.Equal(fakeEpoch) {
		t.Errorf("Refund = %+v", r)
	}
	req := f.lastRequest("POST", refundPath(pid))
	var body map[string]any
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	if mustJSON(body) != mustJSON(map[string]any{"amount": 10000, "speed": "normal", "receipt": key}) {
		t.Errorf("refund request = %s", req.Body)
	}
	if got := req.Header.Get("X-Refund-Idempotency"); got != key {
		t.Errorf("X-Refund-Idempotency = %q, want %q", got, key)
	}

	again, err := p.Refund(ctx, linkID, 0, key)
	if err != nil || again.ID != r.ID || again.AmountMinor != 10000 {
		t.Fatalf("Refund again = %+v, %v; want %s", again, err, r.ID)
	}
	if n := f.refundCount(pid); n != 1 {
		t.Errorf("Razorpay made %d refunds, want 1", n)
	}
	if n := f.calls("POST", refundPath(pid)); n != 1 {
		t.Errorf("%d refund requests, want 1 (the repeat finds the receipt)", n)
	}
}

// Partial refunds: each key its own refund, "all that is left" counted
// after the earlier ones, a repeated key the same refund, and nothing
// left refused.
func TestRefundPartial(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)

	part, err := p.Refund(ctx, linkID, 3000, "refund-part-1")
	if err != nil || part.AmountMinor != 3000 || part.Status != payment.RefundSucceeded {
		t.Fatalf("Refund(3000) = %+v, %v", part, err)
	}
	rest, err := p.Refund(ctx, linkID, 0, "refund-rest-1")
	if err != nil || rest.AmountMinor != 7000 || rest.ID == part.ID {
		t.Fatalf("Refund(rest) = %+v, %v; want 7000", rest, err)
	}
	if again, err := p.Refund(ctx, linkID, 3000, "refund-part-1"); err != nil || again.ID != part.ID {
		t.Fatalf("Refund(3000) again = %+v, %v; want %s", again, err, part.ID)
	}
	posts := f.calls("POST", refundPath(pid))
	if _, err := p.Refund(ctx, linkID, 0, "refund-more-1"); !payment.IsRefusal(err) {
		t.Errorf("Refund(nothing left) = %v, want a refusal", err)
	}
	if _, err := p.Refund(ctx, linkID, 500, "refund-over-1"); !payment.IsRefusal(err) {
		t.Errorf("Refund(500 of nothing left) = %v, want Razorpay's refusal", err)
	}
	if n := f.refundCount(pid); n != 2 {
		t.Errorf("Razorpay made %d refunds, want 2", n)
	}
	if n := f.calls("POST", refundPath(pid)) - posts; n != 1 {
		t.Errorf("%d refund requests after the payment was all refunded, want 1 (the explicit amount)", n)
	}
}

// A refund is succeeded only once processed: pending until then, and the
// same key reads its progress.
func TestRefundPending(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)
	f.setRefundStatus(refundPending)
	r, err := p.Refund(ctx, linkID, 0, "order-o_1-refund")
	if err != nil || r.Status != "pending" {
		t.Fatalf("Refund = %+v, %v; want pending", r, err)
	}
	f.settleRefunds()
	again, err := p.Refund(ctx, linkID, 0, "order-o_1-refund")
	if err != nil || again.ID != r.ID || again.Status != payment.RefundSucceeded {
		t.Fatalf("Refund again = %+v, %v; want %s succeeded", again, err, r.ID)
	}
	if n := f.refundCount(pid); n != 1 {
		t.Errorf("Razorpay made %d refunds, want 1", n)
	}
}

// A refund whose answer is lost, or that is still in progress (409), is
// asked again with the same body and key: one refund.
func TestRefundRetried(t *testing.T) {
	for name, ft := range map[string]fault{
		"answer lost": {status: 500, description: "Internal server error", lost: true},
		"in progress": {status: 409, description: "Another request with the same idempotency key is still in progress."},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			p := f.provider()
			linkID, pid := paidLink(t, f, p, testOrder, 10000)
			r, err := refundWithFaultOnPost(t, f, p, linkID, ft)
			if err != nil || r.AmountMinor != 10000 {
				t.Fatalf("Refund = %+v, %v", r, err)
			}
			if n := f.refundCount(pid); n != 1 {
				t.Errorf("Razorpay made %d refunds, want 1", n)
			}
			var keys, bodies []string
			f.mu.Lock()
			for _, req := range f.requests {
				if req.Method == "POST" && req.Path == refundPath(pid) {
					keys = append(keys, req.Header.Get("X-Refund-Idempotency"))
					bodies = append(bodies, string(req.Body))
				}
			}
			f.mu.Unlock()
			if len(keys) != 2 || keys[0] != keys[1] || bodies[0] != bodies[1] {
				t.Errorf("refund requests: keys %q, bodies %q; want two alike", keys, bodies)
			}
		})
	}
}

// refundWithFaultOnPost refunds linkID in full, with ft given to the first
// refund POST only.
func refundWithFaultOnPost(t *testing.T, f *fakeRazorpay, p *Provider, linkID string, ft fault) (payment.Refund, error) {
	t.Helper()
	// The refund makes two GETs (the link, the payment's refunds) before
	// its POST; queue two pass-throughs, then the fault.
	f.inject(fault{status: passThrough}, fault{status: passThrough}, ft)
	return p.Refund(context.Background(), linkID, 0, "order-"+testOrder+"-refund")
}

// A link not paid yet has nothing to refund: an error to retry, not a
// refusal.
func TestRefundUnpaid(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	in, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refund(ctx, in.ID, 0, "order-o_1-refund"); err == nil || payment.IsRefusal(err) {
		t.Errorf("Refund(unpaid) = %v, want an error that is not a refusal", err)
	}
	if _, err := p.Refund(ctx, "plink_Nope0000000000", 0, "order-o_1-refund"); !payment.IsRefusal(err) {
		t.Errorf("Refund(no such link) = %v, want a refusal", err)
	}
}

// A key Razorpay would not take as X-Refund-Idempotency (too short, or
// other characters) is replaced by a digest of it, the same every time.
func TestRefundKeyDigest(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)
	for _, key := range []string{"short", "order:o_1/refund"} {
		want := refundKey(key)
		if want == key || len(want) < 10 || len(want) > 40 {
			t.Fatalf("refundKey(%q) = %q", key, want)
		}
		first, err := p.Refund(ctx, linkID, 1000, key)
		if err != nil {
			t.Fatalf("Refund(key %q): %v", key, err)
		}
		if got := f.lastRequest("POST", refundPath(pid)).Header.Get("X-Refund-Idempotency"); got != want {
			t.Errorf("X-Refund-Idempotency = %q, want %q", got, want)
		}
		if again, err := p.Refund(ctx, linkID, 1000, key); err != nil || again.ID != first.ID {
			t.Errorf("Refund(key %q) again = %+v, %v; want %s", key, again, err, first.ID)
		}
	}
	if n := f.refundCount(pid); n != 2 {
		t.Errorf("Razorpay made %d refunds, want 2", n)
	}
}

// Two refunds of one key at once (the webhook and the reconciler): both
// ask with the same body and X-Refund-Idempotency, and Razorpay makes one.
func TestRefundRaced(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	linkID, pid := paidLink(t, f, p, testOrder, 10000)
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			r, err := p.Refund(context.Background(), linkID, 0, "order-"+testOrder+"-refund")
			if err != nil {
				t.Error(err)
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent refunds of one key got %v, want one refund", ids)
		}
	}
	if n := f.refundCount(pid); n != 1 {
		t.Errorf("Razorpay made %d refunds, want 1", n)
	}
}

// A refund Razorpay reports failed is not answered again as if it were
// the refund: it is a refusal, which the order flow alerts on.
func TestRefundFailedIsARefusal(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	linkID, _ := paidLink(t, f, p, testOrder, 10000)
	f.setRefundStatus(refundFailed)
	if _, err := p.Refund(ctx, linkID, 0, "order-o_1-refund"); err != nil {
		t.Fatalf("Refund = %v", err)
	}
	_, err := p.Refund(ctx, linkID, 0, "order-o_1-refund")
	if !payment.IsRefusal(err) {
		t.Errorf("Refund of a key whose refund failed = %v, want a refusal", err)
	}
}
