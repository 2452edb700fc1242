package pagetest

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestPaymentJourneyWithEachProvider: with the sandbox gateway playing each
// payment provider (its own protocol, Stripe, ...) and the origin set up
// for that provider (FLASHGATE_PAYMENT_PROVIDER), a shopper on the real
// page joins, is admitted, reserves, presses Pay now, pays on the hosted
// page and comes back to a paid order; a failed payment puts the unit back
// at once; and a payment made after the hold is gone is refunded once,
// the unit staying in stock.
func TestPaymentJourneyWithEachProvider(t *testing.T) {
	t.Parallel()
	for _, personality := range sandboxgateway.Personalities() {
		t.Run(personality, func(t *testing.T) {
			t.Parallel()
			s := startStackAs(t, personality)
			ctx, cancel := context.WithTimeout(t.Context(), 2*browserBudget)
			defer cancel()
			browser := startBrowser(t, ctx)
			const sku = "sku-1"

			t.Run("paid", func(t *testing.T) {
				sale := "prov-pay-" + personality
				p := shopUntilPayPage(t, s, browser, s.openSale(t, sale, 2), "payer-"+personality)
				p.do("pay on the provider's page", chromedp.Click(chromedp.ID("pay-button")))
				backToShop(p, "succeeded")
				p.waitUntil("the paid order", `document.getElementById('order-status').dataset.status === 'paid'`, 15*time.Second)
				s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
					want := origintest.Counts{Available: 1, Sold: 1}
					return l[sku].Redis == want && l[sku].DB == want && l[sku].PendingIntents == 0
				})
				origintest.CheckInvariant(t, s.Origin.Env, sale)
			})

			t.Run("failed", func(t *testing.T) {
				sale := "prov-fail-" + personality
				p := shopUntilPayPage(t, s, browser, s.openSale(t, sale, 2), "failer-"+personality)
				p.do("fail on the provider's page", chromedp.Click(chromedp.ID("fail-button")))
				backToShop(p, "failed")
				p.waitUntil("the cancelled order", `document.getElementById('order-status').dataset.status === 'cancelled'`, 15*time.Second)
				s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
					want := origintest.Counts{Available: 2}
					return l[sku].Redis == want && l[sku].DB == want && l[sku].PendingIntents == 0
				})
				origintest.CheckInvariant(t, s.Origin.Env, sale)
			})

			t.Run("late", func(t *testing.T) {
				sale := "prov-late-" + personality
				// A hold of 3 s (and the 2 s grace a payment gets), and a
				// page the origin cannot close meanwhile: the shopper pays
				// on it after the hold has ended.
				def := origintest.OpenSale(sale, 1, 3)
				s.Origin.MustCreateSale(t, def)
				s.Node.WaitSale(t, sale)
				s.Payments.FailPageCloses.Store(true)
				defer s.Payments.FailPageCloses.Store(false)
				p := shopUntilPayPage(t, s, browser, def, "late-"+personality)
				s.Origin.WaitLedger(t, sale, 30*time.Second, func(l map[string]origintest.LedgerSKU) bool {
					want := origintest.Counts{Available: 1}
					return l[sku].Redis == want && l[sku].DB == want
				})
				// The payment reaches the origin only after the page has read
				// the order back from the gateway (no webhooks, no listings
				// meanwhile), as a slow webhook does: the page first shows the
				// order cancelled with its hold, and must go on to show it
				// refunded, not leave the shopper told no payment was taken.
				s.Payments.Gateway.SetWebhooksEnabled(false)
				s.Payments.FailListings.Store(true)
				p.do("pay after the hold ended", chromedp.Click(chromedp.ID("pay-button")))
				backToShop(p, "succeeded")
				p.waitUntil("the order cancelled with its hold", `document.getElementById('order-status').dataset.status === 'cancelled'`, 10*time.Second)
				s.Payments.FailListings.Store(false)
				s.Payments.Gateway.SetWebhooksEnabled(true)
				p.waitUntil("the refunded order", `document.getElementById('order-status').dataset.status === 'refunded'`, 20*time.Second)
				s.Origin.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
					want := origintest.Counts{Available: 1}
					return l[sku].Redis == want && l[sku].DB == want && l[sku].PendingIntents == 0
				})
				testenv.Eventually(t, 15*time.Second, "a refund at the provider of sale "+sale, func() bool {
					refunds := refundsOf(s, sale)
					if refunds > 1 {
						t.Fatalf("refunds at the provider of sale %s = %d, want 1", sale, refunds)
					}
					return refunds == 1
				})
				origintest.CheckInvariant(t, s.Origin.Env, sale)
			})
		})
	}
}

// shopUntilPayPage signs account in on the sale's page, joins, buys one
// sku-1 and presses Pay now, and returns once the browser shows the
// provider's hosted page.
func shopUntilPayPage(t *testing.T, s *stack, browser context.Context, def origintest.Sale, account string) *page {
	t.Helper()
	p := newPage(t, browser)
	p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(def.SaleID)))
	p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
	signIn(p, account)
	p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
	p.waitUntil("admission", `!!document.getElementById('buy-sku-1')`, 10*time.Second)
	p.do("press Buy", chromedp.Click(chromedp.ID("buy-sku-1")))
	p.waitUntil("a held reservation", `document.getElementById('res-status').textContent === 'held'`, 10*time.Second)
	p.do("press Pay now", chromedp.Click(chromedp.ID("pay-button")))
	p.waitUntil("the provider's pay page", `location.pathname.startsWith('/pay/') && !!document.getElementById('fail-button')`, 10*time.Second)
	return p
}

// backToShop waits for the hosted page's outcome and follows its link back
// to the shop.
func backToShop(p *page, outcome string) {
	p.t.Helper()
	p.waitUntil("the provider's outcome "+outcome, fmt.Sprintf(`(document.getElementById('pay-result') || {}).dataset && document.getElementById('pay-result').dataset.status === %q`, outcome), 10*time.Second)
	p.waitUntil("the link back to the shop", `!!document.getElementById('return-link') && !document.getElementById('return-link').hidden`, 10*time.Second)
	p.do("go back to the shop", chromedp.Click(chromedp.ID("return-link")))
	p.waitUntil("the order on the shop's page", `location.search.includes('order=') && !!document.getElementById('order-status').dataset.status`, 15*time.Second)
}

// refundsOf counts the refunds the sandbox gateway made on the sale's
// intents.
func refundsOf(s *stack, sale string) int {
	n := 0
	for _, in := range s.Payments.Gateway.Intents() {
		if in.Metadata["sale_id"] == sale {
			n += len(in.Refunds)
		}
	}
	return n
}
