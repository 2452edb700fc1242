package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// A gateway slower than FLASHGATE_ORDER_INTENT_WAIT never holds an order
// request: the order comes back at once, pending, without its payment and
// with poll_after_ms; a repeat and the page's reads share the one intent
// call; a read after the call finds the payment link, and the order pays
// as any other.
func TestSlowGatewayAnswersTheOrderWithoutWaiting(t *testing.T) {
	t.Parallel()
	const latency, wait = 1500 * time.Millisecond, 50 * time.Millisecond
	o, p, sale := payingOriginWith(t,
		func(c *app.Config) { c.OrderIntentWait = wait },
		func(c *sandboxgateway.Config) { c.Latency = latency })
	o.MustCreateSale(t, origintest.OpenSale(sale, 3, 60))
	s := hold(t, o, sale, "alice")

	start := time.Now()
	status, ord := o.CreateOrder(t, s.userToken, s.reservationID, "order-alice")
	took := time.Since(start)
	if status != 201 || ord.Status != "pending_payment" || ord.Payment != nil || ord.PollAfterMS <= 0 {
		t.Fatalf("CreateOrder = %d %+v, want 201 pending_payment without a payment yet, with poll_after_ms", status, ord)
	}
	if took >= latency {
		t.Errorf("CreateOrder took %v, want it answered before the gateway's %v", took, latency)
	}
	if status, again := o.CreateOrder(t, s.userToken, s.reservationID, "order-alice"); status != 200 || again.OrderID != ord.OrderID {
		t.Errorf("repeat CreateOrder = %d %+v, want 200 and order %s", status, again, ord.OrderID)
	}

	var got origintest.Order
	testenv.Eventually(t, 10*time.Second, "the order's payment after the gateway answered", func() bool {
		var status int
		status, got = o.Order(t, s.userToken, ord.OrderID)
		if status != 200 {
			t.Fatalf("Order = %d %+v, want 200", status, got)
		}
		return got.Payment != nil
	})
	if got.Payment == nil || got.Payment.PayURL == "" || got.PollAfterMS != 0 {
		t.Fatalf("Order after the gateway answered = %+v, want its payment link and no poll_after_ms", got)
	}
	if n := len(p.Gateway.Intents()); n != 1 {
		t.Errorf("gateway has %d intents, want 1 (the create, its repeat and the reads share one)", n)
	}
	if _, err := p.Gateway.Pay(got.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	settled(t, o, sale, origintest.Counts{Available: 2, Sold: 1})
}

// A webhook for an order whose intent was never recorded (the origin
// stopped between the gateway's answer and its own write) records the
// intent with the payment, in the same transaction, and pays the order.
func TestWebhookRecordsAnIntentTheOrderMissed(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 60))
	s := hold(t, o, sale, "kim")
	ord := mustOrder(t, o, s)
	if _, err := o.Env.DB.Exec(context.Background(), `UPDATE orders SET intent_id = NULL, pay_url = NULL WHERE order_id = $1`, ord.OrderID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	paid := o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	if paid.Payment == nil || paid.Payment.IntentID != ord.Payment.IntentID || paid.Payment.PayURL != ord.Payment.PayURL {
		t.Errorf("paid order = %+v, want the webhook's intent %s recorded with its pay URL", paid, ord.Payment.IntentID)
	}
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 1})
}
