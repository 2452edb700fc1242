package razorpay

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

const testOrder = "o_0123456789abcdef0123"

func newIntent(order string, amount int64) payment.NewIntent {
	return payment.NewIntent{
		AmountMinor: amount,
		Currency:    "INR",
		Metadata:    map[string]string{"order_id": order, "reservation_id": "r_" + order, "sale_id": "diwali"},
		ReturnURL:   "https://shop.example/paid?sale=diwali&order=" + order,
		ExpiresAt:   fakeEpoch.Add(30*time.Minute + 500*time.Millisecond),
	}
}

// linkBody decodes the last create-link request the fake received.
func linkBody(t *testing.T, f *fakeRazorpay) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.lastRequest("POST", "/v1/payment_links").Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// CreateIntent sends what the create-link page documents — amount,
// currency, the order id as reference_id, the metadata as notes, the
// return URL as callback_url with callback_method get, expire_by at the
// hold's end — and maps the link onto an intent awaiting payment.
func TestCreateIntent(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	req := newIntent(testOrder, 49900)
	in, err := p.CreateIntent(context.Background(), req, "order-"+testOrder+"-intent")
	if err != nil {
		t.Fatalf("CreateIntent: %v", err)
	}
	body := linkBody(t, f)
	want := map[string]any{
		"amount":          float64(49900),
		"currency":        "INR",
		"reference_id":    testOrder,
		"description":     "Order " + testOrder,
		"expire_by":       float64(fakeEpoch.Add(30*time.Minute + time.Second).Unix()), // rounded up, never before the hold ends
		"callback_url":    req.ReturnURL,
		"callback_method": "get",
		"reminder_enable": false,
		"notes":           map[string]any{"order_id": testOrder, "reservation_id": "r_" + testOrder, "sale_id": "diwali"},
	}
	for k, v := range want {
		if got, _ := json.Marshal(body[k]); string(got) != mustJSON(v) {
			t.Errorf("request %s = %s, want %s", k, got, mustJSON(v))
		}
	}
	if _, ok := body["upi_link"]; ok {
		t.Errorf("request has upi_link without Config.UPILink: %v", body["upi_link"])
	}
	auth := f.lastRequest("POST", "/v1/payment_links").Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Basic ") {
		t.Errorf("Authorization = %q, want basic auth", auth)
	}

	if !strings.HasPrefix(in.ID, "plink_") || in.Status != payment.IntentRequiresPayment || in.AmountMinor != 49900 ||
		in.Currency != "INR" || in.OrderID() != testOrder || !strings.HasPrefix(in.PayURL, "https://rzp.io/i/") ||
		in.ReturnURL != req.ReturnURL || !in.CreatedAt.Equal(fakeEpoch) || !maps.Equal(in.Metadata, req.Metadata) {
		t.Errorf("CreateIntent = %+v", in)
	}
}

// A link expires when the hold ends, but never sooner than Razorpay's
// 15 minutes (and a minute of slack) from now; the fake refuses less, as
// Razorpay documents.
func TestCreateIntentExpiryFloor(t *testing.T) {
	floor := fakeEpoch.Add(MinExpiry + ExpirySlack).Unix()
	for _, tc := range []struct {
		name    string
		expires time.Time
		want    int64
	}{
		{"no hold end", time.Time{}, floor},
		{"a 5-minute hold", fakeEpoch.Add(5 * time.Minute), floor},
		{"a hold ending at Razorpay's minimum", fakeEpoch.Add(MinExpiry), floor},
		{"a hold ending just past the floor", fakeEpoch.Add(MinExpiry + ExpirySlack + 1500*time.Millisecond), floor + 2},
		{"an hour's hold", fakeEpoch.Add(time.Hour), fakeEpoch.Add(time.Hour).Unix()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			req := newIntent(testOrder, 100)
			req.ExpiresAt = tc.expires
			if _, err := f.provider().CreateIntent(context.Background(), req, "k-0123456789"); err != nil {
				t.Fatalf("CreateIntent: %v", err)
			}
			if got := int64(linkBody(t, f)["expire_by"].(float64)); got != tc.want {
				t.Errorf("expire_by = now%+ds, want now%+ds", got-fakeEpoch.Unix(), tc.want-fakeEpoch.Unix())
			}
		})
	}

	// The slack covers a clock up to a minute behind Razorpay's; two
	// minutes behind, Razorpay refuses the link.
	for _, tc := range []struct {
		behind time.Duration
		ok     bool
	}{{30 * time.Second, true}, {2 * time.Minute, false}} {
		f := newFake(t)
		p := f.provider()
		p.cfg.Clock = clock.NewFake(f.clock().Add(-tc.behind))
		req := newIntent(testOrder, 100)
		req.ExpiresAt = time.Time{}
		_, err := p.CreateIntent(context.Background(), req, "k-0123456789")
		if tc.ok && err != nil {
			t.Errorf("clock %v behind: CreateIntent = %v", tc.behind, err)
		}
		if !tc.ok && (!payment.IsRefusal(err) || !strings.Contains(err.Error(), "15 minutes")) {
			t.Errorf("clock %v behind: CreateIntent = %v, want Razorpay's 15-minute refusal", tc.behind, err)
		}
	}
}

// Config.UPILink asks for a UPI Payment Link.
func TestCreateIntentUPILink(t *testing.T) {
	f := newFake(t)
	p := f.provider()
	p.cfg.UPILink = true
	if _, err := p.CreateIntent(context.Background(), newIntent(testOrder, 100), "k-0123456789"); err != nil {
		t.Fatal(err)
	}
	if got := linkBody(t, f)["upi_link"]; got != true {
		t.Errorf("upi_link = %v, want true", got)
	}
}

// The same order always gets its one link back: repeated, retried after
// a lost answer, or raced; Razorpay's unique reference_id is the guard.
func TestCreateIntentIdempotent(t *testing.T) {
	ctx := context.Background()
	t.Run("repeated", func(t *testing.T) {
		f := newFake(t)
		p := f.provider()
		first, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "order-"+testOrder+"-intent")
		if err != nil {
			t.Fatal(err)
		}
		again, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "order-"+testOrder+"-intent")
		if err != nil || again.ID != first.ID || again.PayURL != first.PayURL {
			t.Fatalf("CreateIntent again = %+v, %v; want link %s", again, err, first.ID)
		}
		other, err := p.CreateIntent(ctx, newIntent("o_another", 100), "order-o_another-intent")
		if err != nil || other.ID == first.ID {
			t.Fatalf("CreateIntent(another order) = %+v, %v; want a new link", other, err)
		}
		if n := f.linkCount(); n != 2 {
			t.Errorf("Razorpay has %d links, want 2", n)
		}
	})
	t.Run("answer lost", func(t *testing.T) {
		f := newFake(t)
		f.inject(fault{status: 502, description: "bad gateway", lost: true})
		in, err := f.provider().CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
		if err != nil || in.ID == "" {
			t.Fatalf("CreateIntent = %+v, %v", in, err)
		}
		if n := f.linkCount(); n != 1 {
			t.Errorf("Razorpay has %d links after a retried create, want 1", n)
		}
		if n := f.calls("POST", "/v1/payment_links"); n != 2 {
			t.Errorf("%d create requests, want 2 (the lost one and its retry)", n)
		}
	})
	t.Run("raced", func(t *testing.T) {
		f := newFake(t)
		p := f.provider()
		ids := make([]string, 16)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				in, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
				if err != nil {
					t.Error(err)
				}
				ids[i] = in.ID
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("concurrent creates got links %v, want one", ids)
			}
		}
		if n := f.linkCount(); n != 1 {
			t.Errorf("Razorpay has %d links, want 1", n)
		}
	})
	t.Run("reference taken by another amount", func(t *testing.T) {
		f := newFake(t)
		p := f.provider()
		if _, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789"); err != nil {
			t.Fatal(err)
		}
		if in, err := p.CreateIntent(ctx, newIntent(testOrder, 200), "k-0123456789"); err == nil {
			t.Fatalf("CreateIntent(same order, another amount) = %+v, want an error", in)
		}
	})
}

// What Razorpay documents it refuses is refused before asking.
func TestCreateIntentRefusedLocally(t *testing.T) {
	many := map[string]string{"order_id": testOrder}
	for i := range 15 {
		many[string(rune('a'+i))] = "x"
	}
	for name, tc := range map[string]struct {
		req payment.NewIntent
		key string
	}{
		"16 notes":           {payment.NewIntent{AmountMinor: 100, Metadata: many}, "k-0123456789"},
		"a 256-char note":    {payment.NewIntent{AmountMinor: 100, Metadata: map[string]string{"order_id": testOrder, "x": strings.Repeat("y", 256)}}, "k-0123456789"},
		"a 41-char order id": {payment.NewIntent{AmountMinor: 100, Metadata: map[string]string{"order_id": strings.Repeat("o", 41)}}, "k-0123456789"},
		"no order, no key":   {payment.NewIntent{AmountMinor: 100}, ""},
		"no amount":          {payment.NewIntent{Metadata: map[string]string{"order_id": testOrder}}, "k-0123456789"},
	} {
		f := newFake(t)
		if in, err := f.provider().CreateIntent(context.Background(), tc.req, tc.key); err == nil {
			t.Errorf("%s: CreateIntent = %+v, want an error", name, in)
		}
		if n := f.calls("POST", "/v1/payment_links"); n != 0 {
			t.Errorf("%s: %d requests made, want none", name, n)
		}
	}
}

// Cancel closes an unpaid link's page; a paid or cancelled link is
// refused.
func TestCancel(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	in, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Cancel(ctx, in.ID)
	if err != nil || got.ID != in.ID || got.Status != payment.IntentFailed {
		t.Fatalf("Cancel = %+v, %v; want %s failed", got, err, in.ID)
	}
	if _, err := p.Cancel(ctx, in.ID); !payment.IsRefusal(err) {
		t.Errorf("Cancel(cancelled) = %v, want a refusal", err)
	}
	paid, _ := p.CreateIntent(ctx, newIntent("o_paid", 100), "k-0123456789")
	f.pay(paid.ID, "upi", "a@okbank")
	if _, err := p.Cancel(ctx, paid.ID); !payment.IsRefusal(err) {
		t.Errorf("Cancel(paid) = %v, want a refusal", err)
	}
}

// ClosePage closes an open link, takes one cancelled already as closed,
// and says a paid link's payment came first.
func TestClosePage(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	p := f.provider()
	open, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ClosePage(ctx, open.ID); err != nil {
		t.Fatalf("ClosePage(open) = %v, want nil", err)
	}
	if err := p.ClosePage(ctx, open.ID); err != nil {
		t.Errorf("ClosePage(cancelled already) = %v, want nil", err)
	}
	paid, _ := p.CreateIntent(ctx, newIntent("o_paid", 100), "k-0123456789")
	f.pay(paid.ID, "upi", "a@okbank")
	if err := p.ClosePage(ctx, paid.ID); !errors.Is(err, payment.ErrPaymentStarted) {
		t.Errorf("ClosePage(paid) = %v, want payment.ErrPaymentStarted", err)
	}
}

// Every documented API answer decodes into the adapter's entities: notes
// as an object, [] or null; a duplicated receipt; "upi_link" as a string.
func TestDocumentedAnswersDecode(t *testing.T) {
	var l link
	decode := func(name string, v any) {
		t.Helper()
		if err := json.Unmarshal(readFixture(t, name), v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	decode("link_upi_created.json", &l)
	if in := l.intent(); in.ID != "plink_ExjpAUN3gVHrPJ" || in.Status != payment.IntentRequiresPayment || in.PayURL != "https://rzp.io/i/nxrHnLJ" ||
		in.Metadata["policy_name"] != "Life Insurance Policy" || in.AmountMinor != 1000 || len(l.Payments) != 0 {
		t.Errorf("link_upi_created.json = %+v", in)
	}
	l = link{}
	decode("link_standard_cancelled.json", &l)
	if in := l.intent(); in.Status != payment.IntentFailed || in.ReturnURL != "https://example-callback-url.com/" {
		t.Errorf("link_standard_cancelled.json = %+v", in)
	}
	l = link{}
	decode("link_fetch_paid.json", &l)
	if in := l.intent(); in.Status != payment.IntentSucceeded || in.Metadata != nil || in.AmountMinor != 10000 ||
		len(l.Payments) != 1 || l.Payments[0].PaymentID != "pay_KBnebtRrhTEatJ" || l.Payments[0].Amount != 10000 {
		t.Errorf("link_fetch_paid.json = %+v (payments %+v)", in, l.Payments)
	}
	l = link{}
	decode("link_cancel_upi.json", &l)
	if in := l.intent(); in.ID != "plink_Fo4oI0cXjpQIz3" || in.Status != payment.IntentFailed {
		t.Errorf("link_cancel_upi.json = %+v", in)
	}
	var list linkList
	decode("links_fetch_all.json", &list)
	if len(list.PaymentLinks) != 1 || list.PaymentLinks[0].ReferenceID != "111" || list.PaymentLinks[0].Notes != nil {
		t.Errorf("links_fetch_all.json = %+v", list)
	}
	for _, name := range []string{"refund_create.json", "refund_create_idempotent.json"} {
		var r refundEntity
		decode(name, &r)
		if got := r.refund("plink_1"); got.ID != "rfnd_FP8QHiV938haTz" || got.AmountMinor != 500100 || got.Status != payment.RefundSucceeded ||
			got.IntentID != "plink_1" || got.CreatedAt.Unix() != 1597078866 {
			t.Errorf("%s = %+v", name, got)
		}
	}
	var pe paymentEntity
	decode("payment_fetch_upi.json", &pe)
	if pe.ID != "pay_MT3PgKGazkDUUM" || pe.Status != paymentCaptured || pe.Amount != 1000 || pe.payer() != "upi:gaurav.kumar@examplebank" {
		t.Errorf("payment_fetch_upi.json = %+v (payer %q)", pe, pe.payer())
	}
	var rs collection[refundEntity]
	decode("refunds_of_payment.json", &rs)
	if got := refunds("plink_1", rs.Items); len(got) != 2 || got[0].ID != "rfnd_FP8DDKxqJif6ca" || got[0].AmountMinor+got[1].AmountMinor != 500100 {
		t.Errorf("refunds_of_payment.json = %+v", got)
	}
	for name, want := range map[string]string{
		"error_refund_amount.json":        "The amount must be at least INR 1.00",
		"error_idempotency_conflict.json": "Different request with the same idempotency key has already been processed.",
	} {
		var e errorBody
		decode(name, &e)
		if e.Error.Code != "BAD_REQUEST_ERROR" || e.Error.Description != want {
			t.Errorf("%s = %+v", name, e)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
