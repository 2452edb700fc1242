package app_test

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// A refund the gateway takes is not always money back at once: a bank's
// (UPI) refund is pending for days, then processed or failed. With each
// provider the sandbox plays, holding refunds pending: an order's refund
// reads issued while pending and gains refunded_at once the money is back;
// one that fails is made again under a new key, once, and alerted on; and
// both are learnt by webhook, or by the reconciler asking the provider
// when the webhooks are lost.
func TestRefundOnItsWay(t *testing.T) {
	t.Parallel()
	for _, personality := range sandboxgateway.Personalities() {
		t.Run(personality, func(t *testing.T) {
			t.Parallel()
			o, p, sale := payingOrigin(t, origintest.Personality(personality))
			o.MustCreateSale(t, origintest.OpenSale(sale, 4, 600))
			p.HoldRefunds(true)
			// One payer pays for four orders: the one-unit-per-payer
			// rule sells the first and refunds the others at once.
			const payer = "upi:twice@okbank"
			first := hold(t, o, sale, "alice")
			firstOrder := mustOrder(t, o, first)
			if _, err := p.Gateway.PayAs(firstOrder.Payment.IntentID, payer); err != nil {
				t.Fatal(err)
			}
			o.WaitOrder(t, first.userToken, firstOrder.OrderID, "paid", 10*time.Second)
			refundedOrder := func(account string) (shopper, origintest.Order) {
				t.Helper()
				s := hold(t, o, sale, account)
				ord := mustOrder(t, o, s)
				if _, err := p.Gateway.PayAs(ord.Payment.IntentID, payer); err != nil {
					t.Fatal(err)
				}
				return s, ord
			}

			t.Log("a refund on its way, then processed: told by webhook")
			bob, bobOrder := refundedOrder("bob")
			onItsWay := waitRefundTo(t, o, bob, bobOrder.OrderID, "issued, not yet back", func(r *orderRefund) bool {
				return r.Status == "issued" && r.RefundedAt == nil
			})
			p.ProcessRefund(t, onItsWay.RefundID)
			waitRefundTo(t, o, bob, bobOrder.OrderID, "back", func(r *orderRefund) bool {
				return r.RefundID == onItsWay.RefundID && r.RefundedAt != nil
			})

			t.Log("a refund that fails is made again: told by webhook")
			carol, carolOrder := refundedOrder("carol")
			failing := waitRefundTo(t, o, carol, carolOrder.OrderID, "issued", func(r *orderRefund) bool { return r.Status == "issued" })
			p.FailRefund(t, failing.RefundID)
			again := waitRefundTo(t, o, carol, carolOrder.OrderID, "issued anew", func(r *orderRefund) bool {
				return r.Status == "issued" && r.RefundID != failing.RefundID
			})
			p.ProcessRefund(t, again.RefundID)
			waitRefundTo(t, o, carol, carolOrder.OrderID, "back", func(r *orderRefund) bool { return r.RefundedAt != nil })

			repairs := func(kind string) float64 {
				return metric(t, o, `flashgate_reconcile_repairs_total{kind="`+kind+`"}`)
			}
			if failed, done := repairs("refund_failed"), repairs("refund_completed"); failed != 0 || done != 0 {
				t.Errorf("reconciler repairs before webhooks were lost: refund_failed %v, refund_completed %v; want the webhooks to have told it all", failed, done)
			}

			t.Log("the same, its webhooks lost: the reconciler asks the provider")
			p.Gateway.SetWebhooksEnabled(false)
			dave, daveOrder := refundedOrder("dave")
			lostFail := waitRefundTo(t, o, dave, daveOrder.OrderID, "issued", func(r *orderRefund) bool { return r.Status == "issued" })
			p.FailRefund(t, lostFail.RefundID)
			lostAgain := waitRefundTo(t, o, dave, daveOrder.OrderID, "issued anew", func(r *orderRefund) bool {
				return r.Status == "issued" && r.RefundID != lostFail.RefundID
			})
			p.ProcessRefund(t, lostAgain.RefundID)
			waitRefundTo(t, o, dave, daveOrder.OrderID, "back", func(r *orderRefund) bool { return r.RefundedAt != nil })

			// At the gateway: each refunded order's money went back once,
			// the failed refunds beside it giving nothing.
			for _, c := range []struct {
				ord            origintest.Order
				failed, refund string
			}{{bobOrder, "", onItsWay.RefundID}, {carolOrder, failing.RefundID, again.RefundID}, {daveOrder, lostFail.RefundID, lostAgain.RefundID}} {
				in, err := p.Gateway.Intent(c.ord.Payment.IntentID)
				if err != nil {
					t.Fatal(err)
				}
				statuses := map[string]string{}
				var back int64
				for _, r := range in.Refunds {
					statuses[r.ID] = r.Status
					if r.Status == sandboxgateway.RefundSucceeded {
						back += r.AmountMinor
					}
				}
				want := map[string]string{gatewayRefundID(c.refund): sandboxgateway.RefundSucceeded}
				if c.failed != "" {
					want[gatewayRefundID(c.failed)] = sandboxgateway.RefundFailed
				}
				if len(statuses) != len(want) || back != in.AmountMinor {
					t.Errorf("order %s: gateway refunds %v (%d back of %d), want %v", c.ord.OrderID, statuses, back, in.AmountMinor, want)
				}
				for id, status := range want {
					if statuses[id] != status {
						t.Errorf("order %s: refund %s is %q at the gateway, want %q", c.ord.OrderID, id, statuses[id], status)
					}
				}
			}
			if failed, done := repairs("refund_failed"), repairs("refund_completed"); failed != 1 || done != 1 {
				t.Errorf("reconciler repairs: refund_failed %v, refund_completed %v; want 1 each", failed, done)
			}
			if n := metric(t, o, `flashgate_payment_alerts_total{kind="refund_failed"}`); n != 2 {
				t.Errorf("refund_failed alerts = %v, want 2 (one per failed refund)", n)
			}
			settled(t, o, sale, origintest.Counts{Available: 3, Sold: 1})
		})
	}
}

// orderRefund is an order's refund as the API shows it.
type orderRefund = struct {
	Status     string     `json:"status"`
	RefundID   string     `json:"refund_id"`
	RefundedAt *time.Time `json:"refunded_at"`
}

// waitRefundTo waits until the order reads refunded with a refund that
// satisfies ok (described by what), and returns that refund.
func waitRefundTo(t *testing.T, o *origintest.Origin, s shopper, orderID, what string, ok func(*orderRefund) bool) orderRefund {
	t.Helper()
	var got origintest.Order
	testenv.Eventually(t, 15*time.Second, "order "+orderID+" refunded, its refund "+what, func() bool {
		_, got = o.Order(t, s.userToken, orderID)
		return got.Status == "refunded" && got.Refund != nil && ok(got.Refund)
	})
	return *got.Refund
}

// gatewayRefundID is the sandbox core's id ("re_" and hex digits) of a
// refund as a provider shows it (Razorpay's "rfnd_" and the same digits).
func gatewayRefundID(id string) string { return "re_" + id[strings.LastIndex(id, "_")+1:] }

// metric reads one series of the origin's /metrics (its name and labels
// as exposed), 0 when absent.
func metric(t *testing.T, o *origintest.Origin, series string) float64 {
	t.Helper()
	status, body := o.DoAdmin(t, origintest.Request{Method: "GET", Path: "/metrics", Token: origintest.AdminToken})
	if status != 200 {
		t.Fatalf("GET /metrics = %d", status)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s %s: %v", series, v, err)
			}
			return n
		}
	}
	return 0
}
