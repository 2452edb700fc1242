package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/origintest"
)

// shopper is one account with a held reservation.
type shopper struct {
	account, userToken, reservationID string
	expiresAt                         time.Time
}

func hold(t *testing.T, o *origintest.Origin, sale, account string) shopper {
	t.Helper()
	status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, account), "sku-1", "k-"+account)
	if status != 201 {
		t.Fatalf("Reserve(%s) = %d %+v, want 201", account, status, r)
	}
	return shopper{account: account, userToken: o.UserToken(t, account), reservationID: r.ReservationID, expiresAt: r.ExpiresAt}
}

func mustOrder(t *testing.T, o *origintest.Origin, s shopper) origintest.Order {
	t.Helper()
	status, ord := o.CreateOrder(t, s.userToken, s.reservationID, "order-"+s.account)
	if status != 201 || ord.Payment == nil || ord.Status != "pending_payment" {
		t.Fatalf("CreateOrder(%s) = %d %+v, want 201 pending_payment with a payment", s.account, status, ord)
	}
	return ord
}

// keptByNext checks that a late payment left the next shopper's unit
// alone: the ledger settles with nothing sold and the unit held, or back
// in stock once his hold has ended on its own (the tests' holds last 1 s,
// which a slow run's refund can outlast), and his reservation is held or
// expired at its end, never anything else.
func keptByNext(t *testing.T, o *origintest.Origin, sale string, next shopper) {
	t.Helper()
	settledAs(t, o, sale, func(c origintest.Counts) bool {
		return c == origintest.Counts{Held: 1} || c == origintest.Counts{Available: 1}
	})
	switch _, r := o.Reservation(t, next.userToken, next.reservationID); {
	case r.Status == "held":
	case r.Status == "expired" && !time.Now().Before(next.expiresAt):
		t.Logf("the other shopper's hold ended on its own (at %v) before the check", next.expiresAt)
	default:
		t.Errorf("the other shopper's reservation = %s (its hold ends at %v), want still held", r.Status, next.expiresAt)
	}
}

// settled waits until Redis and Postgres agree on want, with nothing
// pending, and checks the schema's invariant.
func settled(t *testing.T, o *origintest.Origin, sale string, want origintest.Counts) {
	t.Helper()
	settledAs(t, o, sale, func(c origintest.Counts) bool { return c == want })
}

// settledAs is settled for counts that satisfy ok rather than one want.
func settledAs(t *testing.T, o *origintest.Origin, sale string, ok func(origintest.Counts) bool) {
	t.Helper()
	o.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		s := l["sku-1"]
		return s.PendingIntents == 0 && s.Redis == s.DB && ok(s.DB) && s.Drift == (origintest.Counts{})
	})
	origintest.CheckInvariant(t, o.Env, sale)
}

func payingOrigin(t *testing.T, overrides ...func(*sandboxgateway.Config)) (*origintest.Origin, *origintest.Payments, string) {
	t.Helper()
	return payingOriginWith(t, nil, overrides...)
}

// payingOriginWith is payingOrigin with the origin's configuration changed
// by origin (nil: none).
func payingOriginWith(t *testing.T, origin func(*app.Config), overrides ...func(*sandboxgateway.Config)) (*origintest.Origin, *origintest.Payments, string) {
	t.Helper()
	env := origintest.NewEnv(t)
	p := origintest.StartPayments(t, overrides...)
	configure := []func(*app.Config){p.Configure}
	if origin != nil {
		configure = append(configure, origin)
	}
	o := origintest.StartOrigin(t, env, configure...)
	p.DeliverTo(o)
	return o, p, "pay-" + testenv.RandomHex(3)
}

// A double click makes one order and one payment intent: ten concurrent
// POST /v1/orders for one hold (two idempotency keys) answer one 201 and
// nine 200s, all with the same order and intent, and the hold is extended
// once by the grace.
func TestOrderDoubleClickMakesOneOrderAndOneIntent(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 3, 60))
	s := hold(t, o, sale, "alice")

	var wg sync.WaitGroup
	statuses := make([]int, 10)
	orders := make([]origintest.Order, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], orders[i] = o.CreateOrder(t, s.userToken, s.reservationID, fmt.Sprintf("click-%d", i%2))
		}()
	}
	wg.Wait()
	created := 0
	for i := range 10 {
		switch statuses[i] {
		case 201:
			created++
		case 200:
		default:
			t.Errorf("CreateOrder #%d = %d %+v, want 201 or 200", i, statuses[i], orders[i])
		}
		if orders[i].OrderID != orders[0].OrderID || orders[i].Payment == nil || orders[i].Payment.IntentID != orders[0].Payment.IntentID {
			t.Errorf("CreateOrder #%d = %+v, want order %s with intent of #0", i, orders[i], orders[0].OrderID)
		}
	}
	if created != 1 {
		t.Errorf("%d answers were 201, want exactly 1", created)
	}
	if n := len(p.Gateway.Intents()); n != 1 {
		t.Errorf("gateway has %d intents, want 1", n)
	}
	ord := orders[0]
	if ord.AmountMinor != 4999900 || ord.Currency != "INR" {
		t.Errorf("order amount = %d %s, want the SKU's price 4999900 INR", ord.AmountMinor, ord.Currency)
	}
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || in.AmountMinor != 4999900 || in.Metadata["order_id"] != ord.OrderID {
		t.Errorf("gateway intent = %+v, %v; want 4999900 for order %s", in, err, ord.OrderID)
	}
	// The reservation names its order, and its hold lives the grace longer, once.
	_, r := o.Reservation(t, s.userToken, s.reservationID)
	if r.OrderID != ord.OrderID || r.Status != "held" {
		t.Errorf("reservation = %+v, want held with order %s", r, ord.OrderID)
	}
	if got := r.ExpiresAt.Sub(s.expiresAt); got != 2*time.Second {
		t.Errorf("hold extended by %v, want the 2 s grace exactly once", got)
	}

	// Someone else's reservation does not exist for you; nor does nonsense.
	other := o.UserToken(t, "mallory")
	if status, got := o.CreateOrder(t, other, s.reservationID, "k"); status != 404 || got.Error != "unknown_reservation" {
		t.Errorf("CreateOrder(another account) = %d %+v, want 404 unknown_reservation", status, got)
	}
	if status, _ := o.Order(t, other, ord.OrderID); status != 404 {
		t.Errorf("Order(another account) = %d, want 404", status)
	}
	unknown := "r_" + reverse(s.reservationID[2:18]) + s.reservationID[18:] // well formed, never made
	if status, got := o.CreateOrder(t, s.userToken, unknown, "k"); status != 404 || got.Error != "unknown_reservation" {
		t.Errorf("CreateOrder(unknown reservation %s) = %d %q, want 404 unknown_reservation", unknown, status, got.Error)
	}
	if status, got := o.CreateOrder(t, s.userToken, "not-a-reservation", "k"); status != 400 || got.Error != "invalid_reservation_id" {
		t.Errorf("CreateOrder(malformed reservation id) = %d %q, want 400 invalid_reservation_id", status, got.Error)
	}
	if status, got := o.CreateOrder(t, s.userToken, s.reservationID, ""); status != 400 || got.Error != "invalid_idempotency_key" {
		t.Errorf("CreateOrder(no idempotency key) = %d %+v, want 400 invalid_idempotency_key", status, got)
	}
	if status, _ := o.CreateOrder(t, "", s.reservationID, "k"); status != 401 {
		t.Errorf("CreateOrder(no user token) = %d, want 401", status)
	}
	settled(t, o, sale, origintest.Counts{Available: 2, Held: 1})
}

// signedEvent is the gateway's latest event for an intent, re-signed now.
func signedEvent(t *testing.T, p *origintest.Payments, intentID, eventType string) (body []byte, signature string) {
	t.Helper()
	for _, e := range p.Gateway.Events() {
		if e.IntentID == intentID && e.Type == eventType {
			body, err := json.Marshal(e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			return body, sandboxgateway.Sign([]string{p.Secret}, time.Now(), body)
		}
	}
	t.Fatalf("gateway has no %s event for intent %s", eventType, intentID)
	return nil, ""
}

func postWebhook(t *testing.T, o *origintest.Origin, body []byte, signature string) (int, origintest.Reply) {
	t.Helper()
	status, raw := o.Do(t, origintest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body,
		Header: map[string]string{"Payment-Signature": signature}})
	return status, origintest.ParseReply(t, raw)
}

// A webhook delivered five times, at once, changes the order once and
// sells one unit: one pay intent reaches the ledger.
func TestWebhookDeliveredFiveTimesChangesStateOnce(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 60))
	s := hold(t, o, sale, "bob")
	ord := mustOrder(t, o, s)
	p.Gateway.SetWebhooksEnabled(false) // this test delivers by hand
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	body, sig := signedEvent(t, p, ord.Payment.IntentID, sandboxgateway.EventPaymentSucceeded)

	var wg sync.WaitGroup
	results := make([]string, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, raw := o.Do(t, origintest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body,
				Header: map[string]string{"Payment-Signature": sig}})
			var r struct{ Result string }
			_ = json.Unmarshal(raw, &r)
			if status != 200 {
				t.Errorf("delivery %d = %d %s, want 200", i, status, raw)
			}
			results[i] = r.Result
		}()
	}
	wg.Wait()
	applied := 0
	for _, r := range results {
		if r == "applied" {
			applied++
		}
	}
	if applied != 1 {
		t.Errorf("results = %v, want exactly one applied and the rest duplicate", results)
	}
	got := o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 5*time.Second)
	if got.Refund != nil {
		t.Errorf("paid order has a refund: %+v", got.Refund)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
	if n := streamCount(t, o, sale, "pay"); n != 1 {
		t.Errorf("pay intents in the stream = %d, want 1", n)
	}
	if _, r := o.Reservation(t, s.userToken, s.reservationID); r.Status != "paid" {
		t.Errorf("reservation status = %s, want paid", r.Status)
	}
	// The account has bought its limit.
	if status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "bob"), "sku-1", "again"); status != 403 || r.Error != "limit_reached" {
		t.Errorf("Reserve(bob again) = %d %+v, want 403 limit_reached", status, r)
	}
}

func streamCount(t *testing.T, o *origintest.Origin, sale, kind string) int {
	t.Helper()
	keys := checkout.NewKeys(o.Config.RedisPrefix)
	entries, err := o.Env.Redis.XRange(context.Background(), keys.Intents(sale), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Values["kind"] == kind {
			n++
		}
	}
	return n
}

// Forged, stale and replayed signatures are 401 and change nothing; a
// signed body that is not an event is 400.
func TestWebhookSignatures(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 60))
	s := hold(t, o, sale, "carol")
	ord := mustOrder(t, o, s)
	p.Gateway.SetWebhooksEnabled(false)
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	body, good := signedEvent(t, p, ord.Payment.IntentID, sandboxgateway.EventPaymentSucceeded)
	otherBody := []byte(`{"id":"evt_other","type":"payment_intent.succeeded","data":{"intent":{"intent_id":"` + ord.Payment.IntentID + `"}}}`)

	tests := []struct {
		name      string
		body      []byte
		signature string
		status    int
		code      string
	}{
		{"forged (another secret)", body, sandboxgateway.Sign([]string{"whsec-forged"}, time.Now(), body), 401, "invalid_signature"},
		{"no signature", body, "", 401, "invalid_signature"},
		{"stale (6 minutes old)", body, sandboxgateway.Sign([]string{p.Secret}, time.Now().Add(-6*time.Minute), body), 401, "stale_signature"},
		{"replayed onto another body", otherBody, good, 401, "invalid_signature"},
		{"signed, but not an event", []byte(`{"hello":1}`), sandboxgateway.Sign([]string{p.Secret}, time.Now(), []byte(`{"hello":1}`)), 400, "invalid_event"},
		{"signed, not JSON", []byte(`not json`), sandboxgateway.Sign([]string{p.Secret}, time.Now(), []byte(`not json`)), 400, "invalid_event"},
	}
	for _, tt := range tests {
		status, r := postWebhook(t, o, tt.body, tt.signature)
		if status != tt.status || r.Error != tt.code {
			t.Errorf("%s: webhook = %d %q, want %d %q", tt.name, status, r.Error, tt.status, tt.code)
		}
	}
	if _, got := o.Order(t, s.userToken, ord.OrderID); got.Status != "pending_payment" {
		t.Errorf("after bad deliveries order = %s, want pending_payment", got.Status)
	}
	// The genuine delivery still works.
	if status, _ := postWebhook(t, o, body, good); status != 200 {
		t.Errorf("genuine webhook = %d, want 200", status)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 5*time.Second)
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}

// Paid inside the grace: the hold's TTL has passed but the payment started
// before it did, so the hold still lives and the money buys the unit.
func TestPaymentInsideTheGraceIsPaid(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	payInsideTheGrace(t, o, p, sale, false)
}

// payInsideTheGrace holds the sale's only unit (1 s holds), starts paying,
// optionally has Redis rebuilt from Postgres, pays once the TTL has passed
// but the grace has not, and checks that the unit was sold.
func payInsideTheGrace(t *testing.T, o *origintest.Origin, p *origintest.Payments, sale string, rebuild bool) {
	t.Helper()
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "dave")
	ord := mustOrder(t, o, s)
	if rebuild {
		if status, body := o.DoAdmin(t, origintest.Request{Method: "POST", Path: "/admin/sales/" + sale + "/rebuild", Token: origintest.AdminToken}); status != 200 {
			t.Fatalf("rebuild = %d %s", status, body)
		}
	}
	time.Sleep(time.Until(s.expiresAt) + 500*time.Millisecond) // past the TTL, inside the grace
	if _, r := o.Reservation(t, s.userToken, s.reservationID); r.Status != "held" {
		t.Fatalf("reservation after its TTL, inside the grace (rebuilt: %v) = %s, want held", rebuild, r.Status)
	}
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 5*time.Second)
	settled(t, o, sale, origintest.Counts{Sold: 1})
}

// Paid after the hold expired: the unit went back and another shopper holds
// it; the late payment is refunded through the gateway, the order reads
// refunded, nobody else's unit is taken, and the ledger is intact.
func TestPaymentAfterExpiryIsRefunded(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	late := hold(t, o, sale, "erin")
	ord := mustOrder(t, o, late)
	o.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].Redis.Available == 1 // the sweeper gave the unit back after TTL + grace
	})
	o.WaitOrder(t, late.userToken, ord.OrderID, "cancelled", 5*time.Second)
	next := hold(t, o, sale, "frank")

	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	got := o.WaitOrder(t, late.userToken, ord.OrderID, "refunded", 5*time.Second)
	testenv.Eventually(t, 5*time.Second, "refund issued", func() bool {
		_, got = o.Order(t, late.userToken, ord.OrderID)
		return got.Refund != nil && got.Refund.Status == "issued"
	})
	if got.Refund == nil || got.Refund.Status != "issued" || got.Refund.RefundID == "" {
		t.Errorf("refund = %+v, want issued with an id", got.Refund)
	}
	in, err := p.Gateway.Intent(ord.Payment.IntentID)
	if err != nil || len(in.Refunds) != 1 || in.Refunds[0].AmountMinor != in.AmountMinor {
		t.Errorf("gateway intent = %+v, %v; want one full refund", in, err)
	}
	keptByNext(t, o, sale, next)
}

// A failed payment gives the unit back at once, not at the hold's expiry.
func TestFailedPaymentReturnsTheUnitAtOnce(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	s := hold(t, o, sale, "gina")
	ord := mustOrder(t, o, s)
	if _, err := p.Gateway.Fail(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 5*time.Second)
	settled(t, o, sale, origintest.Counts{Available: 1})
	if _, r := o.Reservation(t, s.userToken, s.reservationID); r.Status != "cancelled" {
		t.Errorf("reservation = %s, want cancelled", r.Status)
	}
	// The unit is someone else's to take; gina's hold is gone for good.
	hold(t, o, sale, "hank")
	if status, got := o.CreateOrder(t, s.userToken, s.reservationID, "again"); status != 409 || got.Error != "hold_expired" {
		t.Errorf("CreateOrder(after the failure) = %d %q, want 409 hold_expired", status, got.Error)
	}
}

// The origin dies between the gateway's success and our database write:
// Redis has sold the unit, but the order still reads pending and the
// webhook is lost. Another origin's reconciler finds the payment at the
// gateway and records it; a second payment whose webhook never came at all
// is settled the same way.
func TestReconciliationRepairsAPaymentTheOriginMissed(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	p := origintest.StartPayments(t)
	noReconcile := func(c *app.Config) { c.ReconcileInterval = 0 }
	a := origintest.StartOrigin(t, env, p.Configure, noReconcile, instance("origin-a"))
	sale := "rec-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 3, 600))
	p.Gateway.SetWebhooksEnabled(false) // the webhooks are lost

	half := hold(t, a, sale, "ivan")
	halfOrder := mustOrder(t, a, half)
	if _, err := p.Gateway.Pay(halfOrder.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	// The webhook's first step, then death before the order is written.
	if _, err := a.App.Checkout.Pay(context.Background(), sale,
		checkout.Hold{ID: half.reservationID, SKU: "sku-1", Account: half.account}, halfOrder.OrderID); err != nil {
		t.Fatal(err)
	}
	lost := hold(t, a, sale, "judy")
	lostOrder := mustOrder(t, a, lost)
	if _, err := p.Gateway.Pay(lostOrder.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if _, got := mustOrderStatus(t, env, halfOrder.OrderID); got != "pending_payment" {
		t.Fatalf("order before reconciliation = %s, want pending_payment", got)
	}

	b := origintest.StartOrigin(t, env, p.Configure, instance("origin-b"))
	b.WaitOrder(t, half.userToken, halfOrder.OrderID, "paid", 10*time.Second)
	b.WaitOrder(t, lost.userToken, lostOrder.OrderID, "paid", 10*time.Second)
	settled(t, b, sale, origintest.Counts{Available: 1, Sold: 2})
	if n := streamCount(t, b, sale, "pay"); n != 2 {
		t.Errorf("pay intents = %d, want 2 (one per order)", n)
	}
}

// A refund owed but not issued (the gateway was down when the late payment
// came) is issued by the reconciler once the gateway is back.
func TestReconciliationIssuesAnOwedRefund(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "kate")
	ord := mustOrder(t, o, s)
	o.WaitOrder(t, s.userToken, ord.OrderID, "cancelled", 10*time.Second) // expired, unpaid
	p.FailRefunds.Store(true)
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	got := o.WaitOrder(t, s.userToken, ord.OrderID, "refunded", 5*time.Second)
	if got.Refund == nil || got.Refund.Status != "pending" {
		t.Errorf("refund while the gateway refuses refunds = %+v, want pending", got.Refund)
	}
	roundsPass(t, p, 3) // a few reconciler rounds fail meanwhile
	if _, got = o.Order(t, s.userToken, ord.OrderID); got.Refund == nil || got.Refund.Status != "pending" {
		t.Errorf("refund = %+v, want still pending while the gateway is down", got.Refund)
	}
	p.FailRefunds.Store(false)
	testenv.Eventually(t, 5*time.Second, "refund issued after the gateway is back", func() bool {
		_, got = o.Order(t, s.userToken, ord.OrderID)
		return got.Refund != nil && got.Refund.Status == "issued"
	})
	if got.Refund == nil || got.Refund.Status != "issued" {
		t.Errorf("refund after the gateway is back = %+v, want issued", got.Refund)
	}
	if in, _ := p.Gateway.Intent(ord.Payment.IntentID); len(in.Refunds) != 1 {
		t.Errorf("gateway refunds = %d, want exactly 1", len(in.Refunds))
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func mustOrderStatus(t *testing.T, env *origintest.Env, orderID string) (string, string) {
	t.Helper()
	var status string
	if err := env.DB.QueryRow(context.Background(), `SELECT status FROM orders WHERE order_id = $1`, orderID).Scan(&status); err != nil {
		t.Fatalf("read order %s: %v", orderID, err)
	}
	return orderID, status
}
