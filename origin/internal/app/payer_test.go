package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// payerRefusals reads flashgate_origin_payer_refusals_total from /metrics.
func payerRefusals(t *testing.T, o *origintest.Origin) int {
	t.Helper()
	return int(metric(t, o, "flashgate_origin_payer_refusals_total"))
}

// waitRefundIssued waits until the order reads refunded with its refund
// issued at the gateway.
func waitRefundIssued(t *testing.T, o *origintest.Origin, s shopper, orderID string) origintest.Order {
	t.Helper()
	got := o.WaitOrder(t, s.userToken, orderID, "refunded", 5*time.Second)
	testenv.Eventually(t, 5*time.Second, "order "+orderID+" refund issued", func() bool {
		_, got = o.Order(t, s.userToken, orderID)
		return got.Refund != nil && got.Refund.Status == "issued"
	})
	if got.Refund == nil || got.Refund.Status != "issued" || got.Refund.RefundID == "" {
		t.Fatalf("order %s refund = %+v, want issued with an id", orderID, got.Refund)
	}
	return got
}

// resigned is the gateway's latest eventType event for an intent, changed
// by edit and signed now: another event (a new id), or what a gateway that
// reports no payer would send.
func resigned(t *testing.T, p *origintest.Payments, intentID, eventType string, edit func(ev map[string]any)) (body []byte, signature string) {
	t.Helper()
	raw, _ := signedEvent(t, p, intentID, eventType)
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	edit(ev)
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return body, sandboxgateway.Sign([]string{p.Secret}, time.Now(), body)
}

// deliver posts a signed event and returns the webhook's result.
func deliver(t *testing.T, o *origintest.Origin, body []byte, signature string) string {
	t.Helper()
	status, raw := o.Do(t, origintest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body,
		Header: map[string]string{"Payment-Signature": signature}})
	var r struct{ Result string }
	_ = json.Unmarshal(raw, &r)
	if status != 200 {
		t.Errorf("webhook = %d %s, want 200", status, raw)
	}
	return r.Result
}

// orderPayer is the payer Postgres recorded on an order ("" for none).
func orderPayer(t *testing.T, env *origintest.Env, orderID string) string {
	t.Helper()
	var payer string
	if err := env.DB.QueryRow(context.Background(), `SELECT coalesce(payer, '') FROM orders WHERE order_id = $1`, orderID).Scan(&payer); err != nil {
		t.Fatalf("read the payer of order %s: %v", orderID, err)
	}
	return payer
}

// A scalper's second account pays with the bank account the first paid
// with: the second order is not sold. Its unit goes back to the line at
// once, its money is refunded exactly once however often the payment is
// reported, and the account may still buy with an instrument of its own.
func TestSecondPaymentFromOnePayerIsRefunded(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 3, 600))
	first, second := hold(t, o, sale, "scalper-1"), hold(t, o, sale, "scalper-2")
	firstOrder, secondOrder := mustOrder(t, o, first), mustOrder(t, o, second)
	const payer = "upi:scalper@okbank"

	if _, err := p.Gateway.PayAs(firstOrder.Payment.IntentID, payer); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, first.userToken, firstOrder.OrderID, "paid", 5*time.Second)
	if _, err := p.Gateway.PayAs(secondOrder.Payment.IntentID, payer); err != nil {
		t.Fatal(err)
	}
	waitRefundIssued(t, o, second, secondOrder.OrderID)
	settled(t, o, sale, origintest.Counts{Available: 2, Sold: 1})
	if _, r := o.Reservation(t, second.userToken, second.reservationID); r.Status != "cancelled" {
		t.Errorf("refused order's reservation = %s, want cancelled (its unit back in the line)", r.Status)
	}
	if n := payerRefusals(t, o); n != 1 {
		t.Errorf("payer refusals = %d, want 1", n)
	}
	for _, ord := range []origintest.Order{firstOrder, secondOrder} {
		if got := orderPayer(t, o.Env, ord.OrderID); got != payer {
			t.Errorf("order %s payer = %q, want %q", ord.OrderID, got, payer)
		}
	}

	// Told again, by the same delivery, by a new event for the same
	// payment, and by the reconciler's rounds: nothing more happens.
	body, sig := signedEvent(t, p, secondOrder.Payment.IntentID, sandboxgateway.EventPaymentSucceeded)
	if got := deliver(t, o, body, sig); got != "duplicate" {
		t.Errorf("the same delivery again = %q, want duplicate", got)
	}
	body, sig = resigned(t, p, secondOrder.Payment.IntentID, sandboxgateway.EventPaymentSucceeded, func(ev map[string]any) {
		ev["id"] = "evt_again_" + testenv.RandomHex(4)
	})
	if got := deliver(t, o, body, sig); got != "applied" {
		t.Errorf("a new event for the same payment = %q, want applied (and no change)", got)
	}
	roundsPass(t, p, 3) // the reconciler's rounds
	if in, _ := p.Gateway.Intent(secondOrder.Payment.IntentID); len(in.Refunds) != 1 || in.Refunds[0].AmountMinor != in.AmountMinor {
		t.Errorf("refused payment's refunds = %+v, want one of the whole amount", in.Refunds)
	}
	if in, _ := p.Gateway.Intent(firstOrder.Payment.IntentID); len(in.Refunds) != 0 {
		t.Errorf("first payment's refunds = %+v, want none", in.Refunds)
	}
	if n := payerRefusals(t, o); n != 1 {
		t.Errorf("payer refusals after the repeats = %d, want still 1", n)
	}
	if _, got := o.Order(t, first.userToken, firstOrder.OrderID); got.Status != "paid" {
		t.Errorf("first order = %s, want paid", got.Status)
	}
	settled(t, o, sale, origintest.Counts{Available: 2, Sold: 1})

	// The refused account's hold is gone, not its right to buy.
	status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, second.account), "sku-1", "k-again")
	if status != 201 {
		t.Fatalf("Reserve(the refused account again) = %d %+v, want 201", status, r)
	}
	again := shopper{account: second.account, userToken: second.userToken, reservationID: r.ReservationID}
	status, againOrder := o.CreateOrder(t, again.userToken, again.reservationID, "order-again")
	if status != 201 || againOrder.Payment == nil {
		t.Fatalf("CreateOrder(again) = %d %+v", status, againOrder)
	}
	if _, err := p.Gateway.PayAs(againOrder.Payment.IntentID, "upi:someone-else@okbank"); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, again.userToken, againOrder.OrderID, "paid", 5*time.Second)
	settled(t, o, sale, origintest.Counts{Available: 1, Sold: 2})
}

// Webhooks for two orders of one payer arriving at the same moment leave
// exactly one of them paid, for every such pair at once.
func TestConcurrentPaymentsFromOnePayerSellOne(t *testing.T) {
	t.Parallel()
	noReconcile := func(c *app.Config) { c.ReconcileInterval = 0 } // only the webhooks race
	o, p, sale := payingOriginWith(t, noReconcile)
	const pairs = 10
	o.MustCreateSale(t, origintest.OpenSale(sale, 2*pairs, 600))
	p.Gateway.SetWebhooksEnabled(false) // delivered by hand, together

	type delivery struct {
		shopper
		order     origintest.Order
		body      []byte
		signature string
	}
	var all [pairs][2]delivery
	for i := range pairs {
		for j := range 2 {
			s := hold(t, o, sale, fmt.Sprintf("scalper-%d-%d", i, j))
			ord := mustOrder(t, o, s)
			if _, err := p.Gateway.PayAs(ord.Payment.IntentID, fmt.Sprintf("upi:scalper-%d@okbank", i)); err != nil {
				t.Fatal(err)
			}
			body, sig := signedEvent(t, p, ord.Payment.IntentID, sandboxgateway.EventPaymentSucceeded)
			all[i][j] = delivery{s, ord, body, sig}
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pairs {
		for j := range 2 {
			wg.Go(func() {
				<-start
				deliver(t, o, all[i][j].body, all[i][j].signature)
			})
		}
	}
	close(start)
	wg.Wait()

	for i := range pairs {
		statuses := map[string]int{}
		for _, d := range all[i] {
			_, got := o.Order(t, d.userToken, d.order.OrderID)
			statuses[got.Status]++
			if got.Status == "refunded" {
				waitRefundIssued(t, o, d.shopper, d.order.OrderID)
			}
		}
		if statuses["paid"] != 1 || statuses["refunded"] != 1 {
			t.Errorf("pair %d: orders %v, want one paid and one refunded", i, statuses)
		}
	}
	settled(t, o, sale, origintest.Counts{Available: pairs, Sold: pairs})
	if n := payerRefusals(t, o); n != pairs {
		t.Errorf("payer refusals = %d, want %d", n, pairs)
	}
}

// The rule refuses only a second payment by one payer in a sale that has
// it; a payment whose payer the gateway does not report is never refused.
func TestOneUnitPerPayerRule(t *testing.T) {
	t.Parallel()
	noReconcile := func(c *app.Config) { c.ReconcileInterval = 0 } // the tests deliver every event
	o, p, _ := payingOriginWith(t, noReconcile)
	p.Gateway.SetWebhooksEnabled(false)
	on, off := true, false
	const alice, bob = "upi:alice@okbank", "upi:bob@okbank"
	tests := []struct {
		name   string
		rule   *bool     // nil: left to the default
		payers [2]string // "": the gateway reports none
		want   [2]string
	}{
		{"one payer, rule by default", nil, [2]string{alice, alice}, [2]string{"paid", "refunded"}},
		{"one payer, rule on", &on, [2]string{alice, alice}, [2]string{"paid", "refunded"}},
		{"one payer, rule off", &off, [2]string{alice, alice}, [2]string{"paid", "paid"}},
		{"two payers", &on, [2]string{alice, bob}, [2]string{"paid", "paid"}},
		{"no payer reported", &on, [2]string{"", ""}, [2]string{"paid", "paid"}},
		{"no payer, then a payer", &on, [2]string{"", alice}, [2]string{"paid", "paid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sale := "rule-" + testenv.RandomHex(3)
			def := origintest.OpenSale(sale, 2, 600)
			def.OneUnitPerPayer = tt.rule
			status, b := o.CreateSale(t, def)
			var answer struct {
				OneUnitPerPayer *bool `json:"one_unit_per_payer"`
			}
			_ = json.Unmarshal(b, &answer)
			wantRule := tt.rule == nil || *tt.rule
			if status != 201 || answer.OneUnitPerPayer == nil || *answer.OneUnitPerPayer != wantRule {
				t.Fatalf("POST /admin/sales = %d %s, want 201 with one_unit_per_payer %v", status, b, wantRule)
			}
			// The same definition again is the same sale; the switch flipped is another.
			if status, b := o.CreateSale(t, def); status != 200 || !bytes.Contains(b, fmt.Appendf(nil, `"one_unit_per_payer":%v`, wantRule)) {
				t.Errorf("POST /admin/sales again = %d %s, want 200 with one_unit_per_payer %v", status, b, wantRule)
			}
			flipped := def
			flipped.OneUnitPerPayer = new(!wantRule)
			if status, b := o.CreateSale(t, flipped); status != 409 || origintest.ErrorCode(b) != "sale_exists" {
				t.Errorf("POST /admin/sales with the rule flipped = %d %s, want 409 sale_exists", status, b)
			}

			sold := 0
			for i, payer := range tt.payers {
				s := hold(t, o, sale, fmt.Sprintf("shopper-%d", i))
				ord := mustOrder(t, o, s)
				if _, err := p.Gateway.PayAs(ord.Payment.IntentID, payer); err != nil {
					t.Fatal(err)
				}
				body, sig := resigned(t, p, ord.Payment.IntentID, sandboxgateway.EventPaymentSucceeded, func(ev map[string]any) {
					if payer == "" {
						delete(ev["data"].(map[string]any)["intent"].(map[string]any), "payer")
					}
				})
				if got := deliver(t, o, body, sig); got != "applied" {
					t.Errorf("order %d webhook = %q, want applied", i, got)
				}
				got := o.WaitOrder(t, s.userToken, ord.OrderID, tt.want[i], 5*time.Second)
				if got.Status == "paid" {
					sold++
				}
				if got := orderPayer(t, o.Env, ord.OrderID); got != payer {
					t.Errorf("order %d payer = %q, want %q", i, got, payer)
				}
			}
			settled(t, o, sale, origintest.Counts{Available: int64(2 - sold), Sold: int64(sold)})
		})
	}
}
