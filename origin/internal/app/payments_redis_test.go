package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/origintest"
)

// Asked to pay for a hold that has expired, the origin says so: 409
// hold_expired, and no payment intent is made.
func TestOrderForAnExpiredHoldIsRefused(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	s := hold(t, o, sale, "lena")
	o.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].Redis.Available == 1
	})
	if status, got := o.CreateOrder(t, s.userToken, s.reservationID, "late"); status != 409 || got.Error != "hold_expired" {
		t.Errorf("CreateOrder(expired hold) = %d %+v, want 409 hold_expired", status, got)
	}
	if n := len(p.Gateway.Intents()); n != 0 {
		t.Errorf("gateway intents = %d, want none", n)
	}
	settled(t, o, sale, origintest.Counts{Available: 1})
}

// loseSale deletes every Redis key of a sale, as a restart without
// persistence or a failover to an empty replica would.
func loseSale(t *testing.T, o *origintest.Origin, sale string) {
	t.Helper()
	ctx := context.Background()
	keys, err := o.Env.Redis.Keys(ctx, o.Config.RedisPrefix+"{s:"+sale+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of sale %s: %v, %v", sale, keys, err)
	}
	if err := o.Env.Redis.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// A paid unit stays sold when Redis loses the pay before the order writer
// has carried it to Postgres: the webhook marked the reservation paid in
// Postgres, so the sale rebuilt from Postgres counts the unit sold, no
// sweeper gives it back, and nobody else can take it.
func TestPaidUnitSurvivesRedisLosingThePay(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 2)) // 2 s holds, 2 s grace
	s := hold(t, o, sale, "mona")
	ord := mustOrder(t, o, s)
	settled(t, o, sale, origintest.Counts{Held: 1})
	// Keep the order writer off the stream: the pay intent will not reach
	// Postgres through it before Redis loses everything.
	keys := checkout.NewKeys(o.Config.RedisPrefix)
	if err := o.Env.Redis.Set(context.Background(), keys.WriterLease(sale), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 5*time.Second)
	if got := origintest.ReservationStatuses(t, o.Env, sale); got["paid"] != 1 {
		t.Fatalf("reservations in Postgres right after the webhook = %v, want the one paid", got)
	}
	loseSale(t, o, sale)

	// The origin restores the sale from Postgres within a few seconds.
	o.WaitLedger(t, sale, 15*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].Redis == origintest.Counts{Sold: 1}
	})
	time.Sleep(time.Until(s.expiresAt.Add(3 * time.Second))) // past the hold and its grace
	if status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "nina"), "sku-1", "k"); status != 409 || r.Error != "sold_out" {
		t.Errorf("Reserve(another shopper) after the loss = %d %+v, want 409 sold_out", status, r)
	}
	if _, r := o.Reservation(t, s.userToken, s.reservationID); r.Status != "paid" {
		t.Errorf("reservation = %s, want paid", r.Status)
	}
	settled(t, o, sale, origintest.Counts{Sold: 1})
}

// The grace survives a rebuild of Redis from Postgres: a shopper who
// started paying before the TTL and pays after it, but inside the grace,
// after a rebuild, is paid, not refunded. (A longer grace leaves room for
// the rebuild itself.)
func TestGraceSurvivesARebuild(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	p := origintest.StartPayments(t)
	o := origintest.StartOrigin(t, env, p.Configure, func(c *app.Config) { c.PaymentGrace = 4 * time.Second })
	p.DeliverTo(o)
	payInsideTheGrace(t, o, p, "grace-"+env.Prefix[1:7], true)
}

// A payment that arrives while Redis has lost the sale is not mistaken for
// one whose hold has gone: the webhook answers 503, the gateway delivers
// it again, and once the sale is restored from Postgres the order is paid.
func TestPaymentWhileRedisLostTheSaleIsPaidOnceRestored(t *testing.T) {
	t.Parallel()
	// The sale stays lost long enough for the first delivery to meet it:
	// a check every 5 s, not every second.
	o, p, sale := payingOriginWith(t, func(c *app.Config) { c.RedisCheckInterval = 5 * time.Second })
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	s := hold(t, o, sale, "pia")
	ord := mustOrder(t, o, s)
	settled(t, o, sale, origintest.Counts{Held: 1})
	loseSale(t, o, sale)
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	got := o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 20*time.Second)
	if got.Refund != nil {
		t.Errorf("order refund = %+v, want none", got.Refund)
	}
	settled(t, o, sale, origintest.Counts{Sold: 1})
	unavailable := 0
	for _, e := range p.Gateway.Events() {
		for _, d := range e.Deliveries {
			if d.StatusCode == 503 {
				unavailable++
			}
		}
	}
	if unavailable == 0 {
		t.Errorf("no delivery was answered 503 while Redis had lost the sale")
	}
}
