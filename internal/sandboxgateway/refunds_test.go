package sandboxgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

// Refunds held pending and settled by the sandbox, in each personality:
// what the API answers and lists, which webhooks go out with which
// status, and that a failed refund's amount may be refunded again.

// unknownRefund is a refund id no gateway made.
const unknownRefund = "re_000000000000000000000000"

// refundHook waits for the webhook of type typ about refund id, as about
// reads a body's type and refund id, and returns it.
func refundHook(t *testing.T, f *fixture, typ, id string, about func(body []byte) (typ, refundID string)) received {
	t.Helper()
	var got received
	testenv.Eventually(t, 5*time.Second, typ+" webhook of "+id, func() bool {
		for _, r := range f.hooks.requests() {
			if gotTyp, gotID := about(r.body); gotTyp == typ && gotID == id {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// holdRefunds switches refund holding through PUT /sandbox/refunds.
func (f *fixture) holdRefunds(t *testing.T, on bool) {
	t.Helper()
	status, b := f.control(t, "PUT", "/sandbox/refunds", fmt.Sprintf(`{"hold": %t}`, on))
	if want := fmt.Sprintf(`{"hold":%t}`, on); status != http.StatusOK || strings.TrimSpace(string(b)) != want {
		t.Fatalf("PUT /sandbox/refunds %v = %d %s, want 200 %s", on, status, b, want)
	}
}

// settleRefund posts action ("process" or "fail") of refund id to the
// control endpoint.
func (f *fixture) settleRefund(t *testing.T, action, id string) (int, []byte) {
	t.Helper()
	return f.control(t, "POST", "/sandbox/refunds/"+id+"/"+action, "")
}

// checkSettledTwice checks that refund id, settled, can be settled no more
// and that an unknown refund cannot be settled, through the control
// endpoints and the Go methods.
func checkSettledTwice(t *testing.T, f *fixture, id string) {
	t.Helper()
	for _, action := range []string{"process", "fail"} {
		if status, b := f.settleRefund(t, action, id); status != http.StatusConflict || errorCode(t, b) != "refund_not_pending" {
			t.Errorf("%s settled refund %s = %d %s, want 409 refund_not_pending", action, id, status, b)
		}
		if status, b := f.settleRefund(t, action, unknownRefund); status != http.StatusNotFound || errorCode(t, b) != "unknown_refund" {
			t.Errorf("%s unknown refund = %d %s, want 404 unknown_refund", action, status, b)
		}
	}
	if err := f.gw.ProcessRefund(id); !errors.Is(err, ErrRefundNotPending) {
		t.Errorf("ProcessRefund(settled %s) = %v, want ErrRefundNotPending", id, err)
	}
	if err := f.gw.FailRefund(id); !errors.Is(err, ErrRefundNotPending) {
		t.Errorf("FailRefund(settled %s) = %v, want ErrRefundNotPending", id, err)
	}
	if err := f.gw.FailRefund(unknownRefund); !errors.Is(err, ErrUnknownRefund) {
		t.Errorf("FailRefund(unknown) = %v, want ErrUnknownRefund", err)
	}
}

// eventLog is the types and kinds of the events recorded about intent id,
// in order, joined by commas.
func (f *fixture) eventLog(id string) (types, kinds string) {
	var ts, ks []string
	for _, e := range f.eventsOf(id) {
		ts = append(ts, e.Type)
		ks = append(ks, e.Kind)
	}
	return strings.Join(ts, ","), strings.Join(ks, ",")
}

// The switch and its control endpoint; the flashgate protocol's held
// refunds: pending in the answer and the intent, refund.created, then
// refund.succeeded or refund.failed; a failed refund's amount refunded
// again under another key, its own key replaying it failed; and refunds
// succeeding at once again once the switch is off.
func TestHeldRefunds(t *testing.T) {
	t.Parallel()
	f := start(t, nil)
	if status, b := f.control(t, "GET", "/sandbox/refunds", ""); status != http.StatusOK || strings.TrimSpace(string(b)) != `{"hold":false}` {
		t.Errorf("GET /sandbox/refunds = %d %s, want 200 {\"hold\":false}", status, b)
	}
	if status, b := f.control(t, "PUT", "/sandbox/refunds", `{}`); status != http.StatusBadRequest || errorCode(t, b) != "bad_request" {
		t.Errorf("PUT /sandbox/refunds {} = %d %s, want 400 bad_request", status, b)
	}
	f.holdRefunds(t, true)
	if status, b := f.control(t, "GET", "/sandbox/refunds", ""); status != http.StatusOK || strings.TrimSpace(string(b)) != `{"hold":true}` || !f.gw.RefundsHeld() {
		t.Errorf("GET /sandbox/refunds after holding = %d %s, RefundsHeld %v; want {\"hold\":true}, true", status, b, f.gw.RefundsHeld())
	}

	about := func(body []byte) (string, string) {
		var p WebhookPayload
		if json.Unmarshal(body, &p) != nil || p.Data.Refund == nil {
			return "", ""
		}
		return p.Type, p.Data.Refund.ID
	}
	hook := func(t *testing.T, typ string, want Refund) {
		t.Helper()
		r := refundHook(t, f, typ, want.ID, about)
		if _, ok := verifySignature(r.header.Get(SignatureHeader), r.body, testSecrets[0]); !ok {
			t.Errorf("%s of %s: signature does not verify", typ, want.ID)
		}
		p := decode[WebhookPayload](t, r.body)
		if *p.Data.Refund != want || !eventIDRE.MatchString(p.ID) {
			t.Errorf("%s data.refund = %+v (event %s), want %+v", typ, *p.Data.Refund, p.ID, want)
		}
		for _, re := range p.Data.Intent.Refunds {
			if re.ID == want.ID && re != want {
				t.Errorf("%s data.intent.refunds has %+v, want %+v", typ, re, want)
			}
		}
	}
	refund := func(t *testing.T, id, key, body string, wantStatus int) Refund {
		t.Helper()
		status, b := f.api(t, "POST", "/v1/intents/"+id+"/refunds", key, body)
		if status != wantStatus {
			t.Fatalf("refund key %q body %s = %d %s, want %d", key, body, status, b, wantStatus)
		}
		return decode[Refund](t, b)
	}
	in := f.create(t, "ord_held")
	f.pay(t, in.ID)

	a := refund(t, in.ID, "a", `{"amount_minor": 400}`, http.StatusCreated)
	if !refundIDRE.MatchString(a.ID) || a.Status != RefundPending || a.AmountMinor != 400 {
		t.Errorf("held refund = %+v, want re_… pending of 400", a)
	}
	hook(t, EventRefundCreated, a)
	status, b := f.settleRefund(t, "process", a.ID)
	a.Status = RefundSucceeded
	if got := decode[Refund](t, b); status != http.StatusOK || got != a {
		t.Errorf("process %s = %d %s, want 200 %+v", a.ID, status, b, a)
	}
	hook(t, EventRefundSucceeded, a)
	checkSettledTwice(t, f, a.ID)

	b1 := refund(t, in.ID, "b", ``, http.StatusCreated)
	if b1.Status != RefundPending || b1.AmountMinor != 600 {
		t.Errorf("held refund of the rest = %+v, want pending of 600", b1)
	}
	if status, b := f.api(t, "POST", "/v1/intents/"+in.ID+"/refunds", "over", `{"amount_minor": 1}`); status != http.StatusConflict || errorCode(t, b) != "refund_exceeds_amount" {
		t.Errorf("refund beyond a pending refund = %d %s, want 409 refund_exceeds_amount", status, b)
	}
	hook(t, EventRefundCreated, b1)
	status, b = f.settleRefund(t, "fail", b1.ID)
	b1.Status = RefundFailed
	if got := decode[Refund](t, b); status != http.StatusOK || got != b1 {
		t.Errorf("fail %s = %d %s, want 200 %+v", b1.ID, status, b, b1)
	}
	hook(t, EventRefundFailed, b1)
	checkSettledTwice(t, f, b1.ID)
	if again := refund(t, in.ID, "b", ``, http.StatusOK); again != b1 {
		t.Errorf("replay of the failed refund's key = %+v, want %+v", again, b1)
	}
	c := refund(t, in.ID, "c", ``, http.StatusCreated)
	if c.Status != RefundPending || c.AmountMinor != 600 || c.ID == b1.ID {
		t.Errorf("refund after the failed one = %+v, want a new pending refund of 600", c)
	}
	if status, b := f.api(t, "POST", "/v1/intents/"+in.ID+"/refunds", "d", `{"amount_minor": 1}`); status != http.StatusConflict || errorCode(t, b) != "refund_exceeds_amount" {
		t.Errorf("refund of a fully refunded intent = %d %s, want 409 refund_exceeds_amount", status, b)
	}

	status, b = f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	got := decode[Intent](t, b)
	if status != http.StatusOK || len(got.Refunds) != 3 || got.Refunds[0] != a || got.Refunds[1] != b1 || got.Refunds[2] != c {
		t.Errorf("intent's refunds = %d %+v, want %+v, %+v, %+v", status, got.Refunds, a, b1, c)
	}
	types, _ := f.eventLog(in.ID)
	if want := "payment_intent.succeeded,refund.created,refund.succeeded,refund.created,refund.failed,refund.created"; types != want {
		t.Errorf("events = %s, want %s", types, want)
	}

	// Off: a pending refund still settles; new ones succeed at once.
	f.holdRefunds(t, false)
	if err := f.gw.ProcessRefund(c.ID); err != nil {
		t.Errorf("ProcessRefund(%s) with holding off = %v", c.ID, err)
	}
	now := f.create(t, "ord_now")
	f.pay(t, now.ID)
	if re := refund(t, now.ID, "now", ``, http.StatusCreated); re.Status != RefundSucceeded || re.AmountMinor != 1000 {
		t.Errorf("refund with holding off = %+v, want succeeded at once", re)
	}
	if types, _ := f.eventLog(now.ID); types != "payment_intent.succeeded,refund.succeeded" {
		t.Errorf("events with holding off = %s, want payment_intent.succeeded,refund.succeeded", types)
	}
}

// Stripe's held refunds, through stripe-go: pending (pending_reason
// processing) with refund.created; processed, refund.updated with the
// pending status as previous; failed, refund.updated and refund.failed,
// two events, with a failure_reason; the charge's amount_refunded counts
// pending and succeeded refunds, not failed ones, so the failed amount is
// refunded again; every listing shows every refund as it is now.
func TestStripeHeldRefunds(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	ctx := context.Background()
	s, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-h", 5000, time.Now().Add(time.Hour), "h"))
	if err != nil {
		t.Fatal(err)
	}
	f.pay(t, s.ID)
	hex := strings.TrimPrefix(s.ID, "cs_test_")
	pi, ch := "pi_"+hex, "ch_"+hex
	f.gw.HoldRefunds(true)

	about := func(body []byte) (string, string) {
		var e struct {
			Type string
			Data struct{ Object struct{ ID, Object string } }
		}
		if json.Unmarshal(body, &e) != nil || e.Data.Object.Object != "refund" {
			return "", ""
		}
		return e.Type, e.Data.Object.ID
	}
	event := func(t *testing.T, typ, id string, want stripe.RefundStatus) stripe.Event {
		t.Helper()
		ev := verifyStripeEvent(t, typ, refundHook(t, f, typ, id, about))
		var r stripe.Refund
		if err := json.Unmarshal(ev.Data.Raw, &r); err != nil || r.Status != want {
			t.Errorf("%s of %s carries status %s (%v), want %s", typ, id, r.Status, err, want)
		}
		if r.Status == stripe.RefundStatusFailed && (r.FailureReason != stripe.RefundFailureReasonExpiredOrCanceledCard ||
			r.FailureBalanceTransaction == nil || r.FailureBalanceTransaction.ID == r.BalanceTransaction.ID) {
			t.Errorf("%s of failed %s: failure_reason %q, failure_balance_transaction %+v; want a reason and a transaction of its own",
				typ, id, r.FailureReason, r.FailureBalanceTransaction)
		}
		return ev
	}
	create := func(t *testing.T, key string, amount int64) (*stripe.Refund, error) {
		t.Helper()
		p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi)}
		if amount > 0 {
			p.Amount = stripe.Int64(amount)
		}
		p.SetIdempotencyKey(key)
		return sc.V1Refunds.Create(ctx, p)
	}
	charge := func(t *testing.T, wantRefunded int64, wantStatuses ...stripe.RefundStatus) {
		t.Helper()
		p := &stripe.ChargeRetrieveParams{}
		p.AddExpand("refunds")
		c, err := sc.V1Charges.Retrieve(ctx, ch, p)
		if err != nil {
			t.Fatalf("retrieve charge: %v", err)
		}
		var statuses []stripe.RefundStatus
		for _, r := range c.Refunds.Data {
			statuses = append(statuses, r.Status)
		}
		if c.AmountRefunded != wantRefunded || c.Refunded != (wantRefunded == c.Amount) || fmt.Sprint(statuses) != fmt.Sprint(wantStatuses) {
			t.Errorf("charge amount_refunded %d, refunded %v, refunds %v; want %d, %v, %v",
				c.AmountRefunded, c.Refunded, statuses, wantRefunded, wantRefunded == c.Amount, wantStatuses)
		}
	}

	a, err := create(t, "ra", 2000)
	if err != nil || a.Status != stripe.RefundStatusPending || a.PendingReason != stripe.RefundPendingReasonProcessing || a.Amount != 2000 {
		t.Fatalf("held refund = %+v, %v; want pending (processing) of 2000", a, err)
	}
	event(t, "refund.created", a.ID, stripe.RefundStatusPending)
	charge(t, 2000, stripe.RefundStatusPending)
	if err := f.gw.ProcessRefund(a.ID); err != nil {
		t.Fatalf("ProcessRefund(%s) = %v", a.ID, err)
	}
	ev := event(t, "refund.updated", a.ID, stripe.RefundStatusSucceeded)
	if prev := ev.Data.PreviousAttributes["status"]; prev != "pending" {
		t.Errorf("refund.updated previous_attributes.status = %v, want pending", prev)
	}
	if got, err := sc.V1Refunds.Retrieve(ctx, a.ID, nil); err != nil || got.Status != stripe.RefundStatusSucceeded || got.PendingReason != "" {
		t.Errorf("processed refund = %+v, %v; want succeeded", got, err)
	}

	b, err := create(t, "rb", 0)
	if err != nil || b.Status != stripe.RefundStatusPending || b.Amount != 3000 {
		t.Fatalf("held refund of the rest = %+v, %v; want pending of 3000", b, err)
	}
	charge(t, 5000, stripe.RefundStatusPending, stripe.RefundStatusSucceeded)
	if status, body := f.settleRefund(t, "fail", b.ID); status != http.StatusOK || decode[Refund](t, body).Status != RefundFailed {
		t.Fatalf("fail %s = %d %s, want 200 failed", b.ID, status, body)
	}
	updated := event(t, "refund.updated", b.ID, stripe.RefundStatusFailed)
	failed := event(t, "refund.failed", b.ID, stripe.RefundStatusFailed)
	if updated.ID == failed.ID || updated.Data.PreviousAttributes["status"] != "pending" {
		t.Errorf("refund.updated %s (previous %v) and refund.failed %s, want two events, the first from pending",
			updated.ID, updated.Data.PreviousAttributes, failed.ID)
	}
	charge(t, 2000, stripe.RefundStatusFailed, stripe.RefundStatusSucceeded)
	checkSettledTwice(t, f, b.ID)

	if again, err := create(t, "rb", 0); err != nil || again.ID != b.ID || again.Status != stripe.RefundStatusFailed {
		t.Errorf("replay of the failed refund's key = %+v, %v; want %s failed", again, err, b.ID)
	}
	c, err := create(t, "rc", 0)
	if err != nil || c.ID == b.ID || c.Status != stripe.RefundStatusPending || c.Amount != 3000 {
		t.Fatalf("refund after the failed one = %+v, %v; want a new pending refund of 3000", c, err)
	}
	charge(t, 5000, stripe.RefundStatusPending, stripe.RefundStatusFailed, stripe.RefundStatusSucceeded)
	_, err = create(t, "rd", 1)
	if se := stripeErr(t, "refund of a refunded charge", err); se.Code != stripe.ErrorCodeChargeAlreadyRefunded {
		t.Errorf("refund of a refunded charge = %d %s, want charge_already_refunded", se.HTTPStatusCode, se.Code)
	}

	listed := map[string]stripe.RefundStatus{}
	for r, err := range sc.V1Refunds.List(ctx, &stripe.RefundListParams{PaymentIntent: stripe.String(pi)}) {
		if err != nil {
			t.Fatalf("list refunds: %v", err)
		}
		listed[r.ID] = r.Status
	}
	if len(listed) != 3 || listed[a.ID] != stripe.RefundStatusSucceeded || listed[b.ID] != stripe.RefundStatusFailed || listed[c.ID] != stripe.RefundStatusPending {
		t.Errorf("listed refunds = %v, want %s succeeded, %s failed, %s pending", listed, a.ID, b.ID, c.ID)
	}
	types, kinds := f.eventLog(s.ID)
	if want := "checkout.session.completed,refund.created,refund.updated,refund.created,refund.updated,refund.failed,refund.created"; types != want {
		t.Errorf("event types = %s, want %s", types, want)
	}
	if want := "payment_intent.succeeded,refund.created,refund.succeeded,refund.created,refund.failed,refund.failed,refund.created"; kinds != want {
		t.Errorf("event kinds = %s, want %s", kinds, want)
	}
}

// Razorpay's held refunds: pending with refund.created; processed with
// refund.processed; failed with refund.failed, each with the refund and
// the payment; the payment's amount_refunded and refund_status count
// pending and processed refunds, not failed ones, so the failed amount is
// refunded again; the refunds listing shows each as it is now; the
// sandbox takes the rfnd_ id.
func TestRazorpayHeldRefunds(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	f := startRazorpay(t, clk, nil)
	l := f.mustLink(t, "ord-h", clk.Now().Add(time.Hour))
	if _, err := f.gw.Pay(l.ID); err != nil {
		t.Fatal(err)
	}
	payID := "pay_" + strings.TrimPrefix(l.ID, "plink_")
	f.holdRefunds(t, true)

	type refundEvent struct {
		Event    string   `json:"event"`
		Contains []string `json:"contains"`
		Payload  struct {
			Refund  struct{ Entity rzpRefund }  `json:"refund"`
			Payment struct{ Entity rzpPayment } `json:"payment"`
		} `json:"payload"`
	}
	about := func(body []byte) (string, string) {
		var e refundEvent
		if json.Unmarshal(body, &e) != nil {
			return "", ""
		}
		return e.Event, e.Payload.Refund.Entity.ID
	}
	hook := func(t *testing.T, typ, id, status string, refunded int64, refundStatus any) {
		t.Helper()
		r := refundHook(t, f, typ, id, about)
		checkRazorpayHook(t, typ, r)
		e := decode[refundEvent](t, r.body)
		if re, pay := e.Payload.Refund.Entity, e.Payload.Payment.Entity; strings.Join(e.Contains, ",") != "refund,payment" ||
			re.Status != status || re.PaymentID != payID || pay.ID != payID || pay.AmountRefunded != refunded || pay.RefundStatus != refundStatus {
			t.Errorf("%s of %s = %s, want refund %s, payment amount_refunded %d, refund_status %v", typ, id, r.body, status, refunded, refundStatus)
		}
	}
	refund := func(t *testing.T, key string, amount int64) rzpRefund {
		t.Helper()
		status, b := f.rzp(t, "POST", "/v1/payments/"+payID+"/refund", fmt.Sprintf(`{"amount":%d}`, amount), "X-Refund-Idempotency", key)
		if status != http.StatusOK {
			t.Fatalf("refund %s of %d = %d %s, want 200", key, amount, status, b)
		}
		return decode[rzpRefund](t, b)
	}
	listed := func(t *testing.T) string {
		t.Helper()
		status, b := f.rzp(t, "GET", "/v1/payments/"+payID+"/refunds", "")
		if status != http.StatusOK {
			t.Fatalf("refunds of %s = %d %s", payID, status, b)
		}
		var out []string
		for _, r := range decode[rzpCollection[rzpRefund]](t, b).Items {
			out = append(out, r.ID+" "+r.Status)
		}
		return strings.Join(out, ", ")
	}

	a := refund(t, "refund-a-0001", 1000000)
	if !strings.HasPrefix(a.ID, "rfnd_") || a.Status != "pending" || a.Amount != 1000000 {
		t.Errorf("held refund = %+v, want a pending rfnd_ of 1000000", a)
	}
	hook(t, "refund.created", a.ID, "pending", 1000000, "partial")
	if status, b := f.settleRefund(t, "process", a.ID); status != http.StatusOK || decode[Refund](t, b).Status != RefundSucceeded {
		t.Errorf("process %s = %d %s, want 200 succeeded", a.ID, status, b)
	}
	hook(t, "refund.processed", a.ID, "processed", 1000000, "partial")
	checkSettledTwice(t, f, a.ID)

	b := refund(t, "refund-b-0001", 3999900)
	hook(t, "refund.created", b.ID, "pending", 4999900, "full")
	if err := f.gw.FailRefund(b.ID); err != nil {
		t.Fatalf("FailRefund(%s) = %v", b.ID, err)
	}
	hook(t, "refund.failed", b.ID, "failed", 1000000, "partial")
	if got, want := listed(t), a.ID+" processed, "+b.ID+" failed"; got != want {
		t.Errorf("refunds = %s, want %s", got, want)
	}
	if again := refund(t, "refund-b-0001", 3999900); again.ID != b.ID || again.Status != "failed" {
		t.Errorf("replay of the failed refund's key = %+v, want %s failed", again, b.ID)
	}
	c := refund(t, "refund-c-0001", 3999900)
	if c.ID == b.ID || c.Status != "pending" {
		t.Errorf("refund after the failed one = %+v, want a new pending refund", c)
	}
	if got, want := listed(t), a.ID+" processed, "+b.ID+" failed, "+c.ID+" pending"; got != want {
		t.Errorf("refunds = %s, want %s", got, want)
	}
	status, body := f.rzp(t, "GET", "/v1/payments", "")
	if got := decode[rzpCollection[rzpPayment]](t, body); status != http.StatusOK || got.Count != 1 || got.Items[0].AmountRefunded != 4999900 ||
		got.Items[0].RefundStatus != "full" || got.Items[0].Status != "refunded" {
		t.Errorf("payments = %d %s, want %s refunded in full", status, body, payID)
	}
	status, body = f.rzp(t, "POST", "/v1/payments/"+payID+"/refund", `{"amount":100}`, "X-Refund-Idempotency", "refund-d-0001")
	if _, desc, _ := rzpError(t, body); status != http.StatusBadRequest || desc != "The payment has been fully refunded already" {
		t.Errorf("refund of a refunded payment = %d %s, want 400", status, body)
	}
	if err := f.gw.ProcessRefund("re_" + strings.TrimPrefix(c.ID, "rfnd_")); err != nil {
		t.Errorf("ProcessRefund by the core id of %s = %v", c.ID, err)
	}
	hook(t, "refund.processed", c.ID, "processed", 4999900, "full")
	if types, _ := f.eventLog(l.ID); types != "payment_link.paid,refund.created,refund.processed,refund.created,refund.failed,refund.created,refund.processed" {
		t.Errorf("events = %s", types)
	}
}
