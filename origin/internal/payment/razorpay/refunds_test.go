package razorpay

import (
	"context"
	"encoding/json"
	"slices"
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

// A refund still in progress (409) after every attempt is an error worth
// another try later, not Razorpay's refusal (which the order flow would
// alert on and stop asking about).
func TestRefundInProgressIsNoRefusal(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	linkID, _ := paidLink(t, f, p, testOrder, 10000)
	inProgress := fault{status: 409, description: "Another request with the same idempotency key is still in progress."}
	f.inject(fault{status: passThrough}, fault{status: passThrough}, inProgress, inProgress, inProgress)
	_, err := p.Refund(context.Background(), linkID, 0, "order-"+testOrder+"-refund")
	if err == nil || payment.IsRefusal(err) {
		t.Errorf("Refund, in progress through every attempt = %v; want an error that is not a refusal", err)
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

// A refund that failed — at once, or after days pending — stays failed
// under its key: the key answers it again, Status failed, without asking
// for another. The order flow's next key then makes a new refund of all
// that was paid, since a failed refund gave nothing back.
func TestRefundFailedThenAnotherKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(f *fakeRazorpay) // makes the first refund fail
	}{
		{"failed at once", func(f *fakeRazorpay) { f.setRefundStatus(refundFailed) }},
		{"failed after pending", func(f *fakeRazorpay) { f.setRefundStatus(refundPending) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFake(t)
			p := f.provider()
			linkID, pid := paidLink(t, f, p, testOrder, 10000)
			const first, next = "order-o_1-refund", "order-o_1-refund-after-1"
			tc.fail(f)
			r, err := p.Refund(ctx, linkID, 0, first)
			if err != nil {
				t.Fatalf("Refund: %v", err)
			}
			f.failRefunds()
			failed, err := p.Refund(ctx, linkID, 0, first)
			if err != nil || failed.ID != r.ID || failed.Status != payment.RefundFailed || failed.AmountMinor != 10000 || failed.IntentID != linkID {
				t.Fatalf("Refund(%s) again = %+v, %v; want %s failed, of 10000", first, failed, err, r.ID)
			}
			if n := f.calls("POST", refundPath(pid)); n != 1 {
				t.Errorf("%d refund requests for the failed key, want 1", n)
			}

			f.setRefundStatus(refundProcessed)
			again, err := p.Refund(ctx, linkID, 0, next)
			if err != nil || again.ID == r.ID || again.AmountMinor != 10000 || again.Status != payment.RefundSucceeded {
				t.Fatalf("Refund(%s) = %+v, %v; want a new refund of 10000, succeeded", next, again, err)
			}
			if n := f.refundCount(pid); n != 2 {
				t.Errorf("Razorpay made %d refunds, want 2", n)
			}
			req := f.lastRequest("POST", refundPath(pid))
			var body map[string]any
			if err := json.Unmarshal(req.Body, &body); err != nil {
				t.Fatal(err)
			}
			if want := mustJSON(map[string]any{"amount": 10000, "speed": "normal", "receipt": next}); mustJSON(body) != want {
				t.Errorf("second refund request = %s, want %s", req.Body, want)
			}
			if got := req.Header.Get("X-Refund-Idempotency"); got != next {
				t.Errorf("second refund's X-Refund-Idempotency = %q, want %q", got, next)
			}
			if n := f.calls("POST", refundPath(pid)); n != 2 {
				t.Errorf("%d refund requests in all, want 2", n)
			}
			if again, err := p.Refund(ctx, linkID, 0, first); err != nil || again.ID != r.ID || again.Status != payment.RefundFailed {
				t.Errorf("Refund(%s) after the next = %+v, %v; want %s failed still", first, again, err, r.ID)
			}
		})
	}
}

// A refund entity's status maps onto the order flow's: processed is
// succeeded, failed failed, and pending — or a status Razorpay adds — is
// on its way.
func TestRefundStatus(t *testing.T) {
	for status, want := range map[string]string{
		refundProcessed: payment.RefundSucceeded,
		refundFailed:    payment.RefundFailed,
		refundPending:   payment.RefundPending,
		"reversed":      payment.RefundPending,
		"":              payment.RefundPending,
	} {
		r := refundEntity{ID: "rfnd_1", Amount: 500, Status: status, CreatedAt: 1597734071}
		if got := r.refund("plink_1"); got.Status != want || got.ID != "rfnd_1" || got.IntentID != "plink_1" || got.AmountMinor != 500 ||
			got.CreatedAt.Unix() != 1597734071 {
			t.Errorf("refund(status %q) = %+v, want status %s", status, got, want)
		}
	}
}

// refunds keeps every refund, failed ones with status failed, oldest
// first (ties by id); Refunded counts all but the failed ones.
func TestRefundsKeepFailed(t *testing.T) {
	got := refunds("plink_1", []refundEntity{
		{ID: "rfnd_C", Amount: 2000, Status: refundPending, CreatedAt: 300},
		{ID: "rfnd_B", Amount: 10000, Status: refundFailed, CreatedAt: 200},
		{ID: "rfnd_A", Amount: 3000, Status: refundProcessed, CreatedAt: 100},
		{ID: "rfnd_D", Amount: 5000, Status: refundFailed, CreatedAt: 300},
	})
	var ids, statuses []string
	for _, r := range got {
		ids, statuses = append(ids, r.ID), append(statuses, r.Status)
		if r.IntentID != "plink_1" {
			t.Errorf("refund %s of intent %q, want plink_1", r.ID, r.IntentID)
		}
	}
	if want := []string{"rfnd_A", "rfnd_B", "rfnd_C", "rfnd_D"}; !slices.Equal(ids, want) {
		t.Errorf("refunds = %v, want %v", ids, want)
	}
	if want := []string{payment.RefundSucceeded, payment.RefundFailed, payment.RefundPending, payment.RefundFailed}; !slices.Equal(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	if n := (payment.Intent{Refunds: got}).Refunded(); n != 5000 {
		t.Errorf("Refunded = %d, want 5000 (the processed and the pending one)", n)
	}
	if got := refunds("plink_1", nil); len(got) != 0 {
		t.Errorf("refunds(none) = %+v", got)
	}
}
