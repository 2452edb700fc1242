package pagetest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// handoverBudget bounds everything the browser does in TestHandoverPrompt.
const handoverBudget = 40 * time.Second

// TestHandoverPrompt: a page opened with a sign-in in its address
// (#user_token=) while nobody is signed in, as a link opened in a new tab
// is, does not sign in silently. It takes the token out of the address at
// once, asks "Continue as <account>?" and acts as nobody until the shopper
// answers: Continue signs in, Not me (or Escape) leaves the page signed out.
func TestHandoverPrompt(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), handoverBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	const sale, sku = "page-handover", "sku-1"
	def := s.openSale(t, sale, 2)

	// open opens a fresh tab (nobody signed in) on a link back from the
	// gateway for order o_unknown, carrying account's token. Signed in, the
	// page looks the order up at once, as that account: that request shows
	// whether it acts as the account.
	open := func(t *testing.T, account string) *page {
		t.Helper()
		p := newPage(t, browser)
		p.do("open a link with a sign-in in its address", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)+"&order=o_unknown"+
			"#user_token="+url.QueryEscape(s.Origin.UserToken(t, account))))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		return p
	}
	// asked checks that the page asks about account and has not signed in,
	// nor asked anything as the account, orderWait after the sale showed.
	asked := func(t *testing.T, p *page, account string) {
		t.Helper()
		p.waitUntil("the question", `(document.getElementById('handover') || {}).open`, 5*time.Second)
		if got, want := p.text("handover-title"), "Continue as "+account+"?"; got != want {
			t.Errorf("#handover-title = %q, want %q", got, want)
		}
		// A modal dialog named by its question, with two real buttons, and
		// the keyboard in it.
		a11y, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
  const d = document.getElementById('handover'), c = document.getElementById('handover-continue'),
    n = document.getElementById('handover-cancel');
  return [d.tagName, d.matches(':modal'), document.getElementById(d.getAttribute('aria-labelledby')).id,
    c.tagName, c.type, c.textContent, n.tagName, n.type, n.textContent, d.contains(document.activeElement)].join(' ');
})()`))
		if want := "DIALOG true handover-title BUTTON button Continue BUTTON button Not me true"; err != nil || a11y != want {
			t.Errorf("the question's dialog, name, buttons and focus = %q (%v), want %q", a11y, err, want)
		}
		if href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`location.href`)); err != nil || strings.Contains(href, "user_token") || strings.Contains(href, "#") {
			t.Errorf("address while asking = %q (%v), want the fragment gone", href, err)
		}
		signedOut(t, p, "while asking")
		time.Sleep(orderWait)
		for _, path := range p.requested() {
			if strings.HasPrefix(path, "/v1/") && path != "/v1/sales/"+sale {
				t.Errorf("while asking, the page requested %s; want only the sale's snapshot", path)
			}
		}
	}
	// declined checks that the question is gone, the page signed out and
	// the token forgotten, orderWait after the answer.
	declined := func(t *testing.T, p *page) {
		t.Helper()
		p.waitUntil("the question to close", `!document.getElementById('handover').open`, 5*time.Second)
		time.Sleep(orderWait)
		signedOut(t, p, "after Not me")
		if !p.visible("signin-form") {
			t.Errorf("the sign-in form is hidden after Not me\npage: %s", p.state())
		}
		if got := p.text("notice"); !strings.Contains(got, "not used") {
			t.Errorf("#notice = %q after Not me, want it to say the link was not used", got)
		}
		for _, path := range p.requested() {
			if strings.HasPrefix(path, "/v1/") && path != "/v1/sales/"+sale {
				t.Errorf("after Not me, the page requested %s; want only the sale's snapshot", path)
			}
		}
	}

	t.Run("continue", func(t *testing.T) {
		const account = "shopper-ivy"
		p := open(t, account)
		asked(t, p, account)
		p.screenshot("shopper-page-handover.png")

		p.do("press Continue", chromedp.Click(chromedp.ID("handover-continue")))
		p.waitUntil("signed in as the link's account", fmt.Sprintf(`document.getElementById('who').textContent === %q && !document.getElementById('handover').open`, account), 5*time.Second)
		if got := p.text("notice"); !strings.Contains(got, account) {
			t.Errorf("#notice = %q, want it to say whose account is signed in", got)
		}
		const looked = `performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/v1/orders/o_unknown')`
		p.waitUntil("the order looked up as the account", looked, orderWait)
		p.waitUntil("the join button", `!document.getElementById('join-button').disabled`, 5*time.Second)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("admission", `!!document.getElementById('buy-`+sku+`')`, 10*time.Second)
	})

	t.Run("not_me", func(t *testing.T) {
		const account = "attacker-eve"
		p := open(t, account)
		asked(t, p, account)
		// The keyboard answers: Not me has the focus, Enter presses it.
		if focused, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.activeElement.id`)); err != nil || focused != "handover-cancel" {
			t.Errorf("focus in the question = %q (%v), want handover-cancel", focused, err)
		}
		p.do("press Enter", chromedp.KeyEvent(kb.Enter))
		declined(t, p)
	})

	t.Run("escape", func(t *testing.T) {
		const account = "attacker-eve"
		p := open(t, account)
		asked(t, p, account)
		p.do("press Escape", chromedp.KeyEvent(kb.Escape))
		declined(t, p)
	})
}

// signedOut checks that p shows nobody signed in and holds no user token.
func signedOut(t *testing.T, p *page, when string) {
	t.Helper()
	stored, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('fg.user_token') || ''`))
	if err != nil || stored != "" {
		t.Errorf("%s: the page's user token = %q (%v), want none", when, stored, err)
	}
	if got := p.text("who"); got != "" || p.visible("signed-in") {
		t.Errorf("%s: #who = %q, signed-in shown %v; want nobody signed in", when, got, p.visible("signed-in"))
	}
	if disabled, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.getElementById('join-button').disabled`)); err != nil || !disabled {
		t.Errorf("%s: join button disabled = %v (%v), want disabled", when, disabled, err)
	}
}

// confirmHandover answers Continue to the page's question about a sign-in
// handed over in its address, and waits until it is signed in as account.
func confirmHandover(p *page, account string) {
	p.t.Helper()
	p.waitUntil("the question about "+account, `(document.getElementById('handover') || {}).open`, 5*time.Second)
	p.do("press Continue", chromedp.Click(chromedp.ID("handover-continue")))
	p.waitUntil("signed in as "+account, fmt.Sprintf(`document.getElementById('who').textContent === %q`, account), 5*time.Second)
}
