package pagetest

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// journeysBudget bounds everything the browser does in TestShopperJourneys.
const journeysBudget = 90 * time.Second

// The page's plain words for a hold that ended without a sale (static/app.js).
const (
	holdExpiredText   = "Your hold has expired — the unit went back to the line."
	paymentFailedText = "Your payment did not go through — nothing was charged, and the unit went back to the line."
)

// TestShopperJourneys drives the shopper page through the journeys off the
// happy path, each on its own sale of one stack, asserting what the shopper
// sees: a hold that runs out while the page is open, a payment that fails
// on the hosted page, a while of 503 please_wait answers, a while without a
// network, a device clock ten minutes fast, and the whole journey by
// keyboard with named controls and readable colours.
func TestShopperJourneys(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := startStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), journeysBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	t.Logf("stack and browser up in %v", time.Since(start).Round(time.Millisecond))

	t.Run("hold_expires", func(t *testing.T) {
		// A hold of 3 s, left to run out with the page open: the short hold
		// itself is the wait.
		const sale, account, sku = "journey-expire", "journey-eve", "sku-1"
		def := origintest.OpenSale(sale, 2, 3)
		s.Origin.MustCreateSale(t, def)
		s.Node.WaitSale(t, sale)
		p := openSalePage(t, s, browser, def)
		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the Buy button", `!!document.getElementById('buy-`+sku+`')`, 10*time.Second)
		p.do("press Buy", chromedp.Click(chromedp.ID("buy-"+sku)))
		p.waitUntil("a held reservation", `document.getElementById('res-status').textContent === 'held'`, 10*time.Second)
		first := p.text("res-id")
		if got := p.text("res-countdown"); !strings.HasPrefix(got, "Reserved! Pay within 00:0") {
			t.Errorf("#res-countdown = %q, want Reserved! Pay within 00:0s (a 3 s hold)", got)
		}

		p.waitUntil("the page to say the hold expired", fmt.Sprintf(`document.getElementById('res-countdown').textContent === %q`, holdExpiredText), 10*time.Second)
		if p.visible("pay-button") {
			t.Errorf("the page still offers Pay now for an expired hold\npage: %s", p.state())
		}
		if got := p.text("res-status"); got != "expired" {
			t.Errorf("#res-status = %q, want expired", got)
		}
		// The sale is still on and the shopper's turn is still theirs: the page offers to buy again.
		p.waitUntil("the offer to buy again", `(() => { const b = document.getElementById('buy-`+sku+`');
			return !!b && b.getClientRects().length > 0 && !b.disabled; })()`, 5*time.Second)
		if got := p.text("queue-state"); !strings.Contains(got, "your turn") {
			t.Errorf("#queue-state = %q after the hold expired, want it to say it is the shopper's turn again", got)
		}
		if got := p.text("notice"); got != "" && p.visible("notice") {
			t.Errorf("#notice = %q after the hold expired, want none (the reservation says it)", got)
		}
		p.screenshot("journey-hold-expired.png")
		s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
			want := origintest.Counts{Available: 2}
			return l[sku].Redis == want && l[sku].DB == want
		})

		// The offer is real: Buy holds a unit again.
		p.do("press Buy again", chromedp.Click(chromedp.ID("buy-"+sku)))
		p.waitUntil("a second held reservation", `document.getElementById('res-status').textContent === 'held' &&
			document.getElementById('res-id').textContent !== `+strconv.Quote(first), 10*time.Second)
		if !p.visible("pay-button") {
			t.Errorf("no Pay now for the second hold\npage: %s", p.state())
		}
	})

	t.Run("payment_fails", func(t *testing.T) {
		// The only unit: while it is held the item list says sold out, and
		// the failed payment's release shows as "1 left" again.
		const sale, account, sku = "journey-payfail", "journey-fay", "sku-1"
		def := s.openSale(t, sale, 1)
		p := shopUntilPayPage(t, s, browser, def, account)
		p.do("press Fail on the hosted page", chromedp.Click(chromedp.ID("fail-button")))
		backToShop(p, "failed")

		p.waitUntil("the page to say the payment failed", fmt.Sprintf(`document.getElementById('res-countdown').textContent === %q`, paymentFailedText), 15*time.Second)
		if p.visible("pay-button") {
			t.Errorf("the page still offers Pay now after the payment failed\npage: %s", p.state())
		}
		if got := p.text("order-status"); got != "cancelled" {
			t.Errorf("#order-status = %q, want cancelled", got)
		}
		if got := p.text("order-note"); !strings.Contains(got, "No payment was taken") {
			t.Errorf("#order-note = %q, want it to say no payment was taken", got)
		}
		p.waitUntil("the unit back in the item list", `(document.querySelector('#skus .hint') || {}).textContent === '1 left'`, 10*time.Second)
		p.waitUntil("the offer to try again", `(() => { const b = document.getElementById('buy-`+sku+`');
			return !!b && b.getClientRects().length > 0 && !b.disabled; })()`, 5*time.Second)
		p.screenshot("journey-payment-failed.png")
		s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
			want := origintest.Counts{Available: 1}
			return l[sku].Redis == want && l[sku].DB == want
		})
	})

	t.Run("please_wait", func(t *testing.T) {
		// Three shoppers ahead and admission paused: the shopper waits at
		// #4. Then every answer about the sale is 503 please_wait for a
		// while (the browser's request interception), during which ops
		// resume admission.
		const sale, account, sku = "journey-wait", "journey-gus", "sku-1"
		def := s.openSale(t, sale, 5)
		s.admission(t, sale, `{"rate_per_s": 0.01, "paused": true}`)
		for i := range 3 {
			if res, _ := s.Node.JoinAgainWhileBusy(t, sale, fmt.Sprintf("ahead-%d", i)); res.Status != fasthttp.StatusAccepted {
				t.Fatalf("join as ahead-%d = %d %s, want 202", i, res.Status, res.Body)
			}
		}
		p := waitInLine(t, s, browser, def, account, "#4")

		var failing atomic.Bool
		var answered atomic.Int64
		failing.Store(true)
		intercept(t, p, "*/v1/sales/"+sale+"*", "the page's requests about the sale", func(e *fetch.EventRequestPaused) {
			if !failing.Load() {
				_, _ = chromedp.Call(p.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
				return
			}
			if _, err := chromedp.Call(p.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID: e.RequestID, ResponseCode: fasthttp.StatusServiceUnavailable,
				Body: []byte(`{"error":"please_wait","message":"The sale is busy right now; please try again in a moment.","request_id":"journey"}`),
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"},
					{Name: "Retry-After", Value: "1"}, {Name: "Cache-Control", Value: "no-store"}},
			}); err != nil {
				if p.ctx.Err() == nil {
					t.Errorf("answer the page's request with 503: %v", err)
				}
				return
			}
			answered.Add(1)
		})
		p.waitUntil("the please-wait notice", `!document.getElementById('notice').hidden && /please wait/i.test(document.getElementById('notice').textContent)`, 8*time.Second)
		// For a while: a few answers in a row, each one retried after the second it asks for.
		testenv.Eventually(t, 8*time.Second, "three 503 answers", func() bool { return answered.Load() >= 3 })
		s.admission(t, sale, `{"rate_per_s": 1000, "paused": false}`)
		note := p.text("notice")
		for _, bad := range []string{"error", "Error", "HTTP", "Unexpected", "please_wait", "503"} {
			if strings.Contains(note, bad) {
				t.Errorf("#notice = %q while the sale is busy, want a calm please-wait without %q", note, bad)
			}
		}
		if !strings.Contains(note, "place") {
			t.Errorf("#notice = %q, want it to say the shopper keeps their place", note)
		}
		if pos, state := p.text("position"), p.text("queue-state"); pos != "#4" || !strings.Contains(state, "3 people ahead") {
			t.Errorf("#position, #queue-state = %q, %q while the sale is busy; want #4 and 3 people ahead, as before", pos, state)
		}
		if name, items := p.text("sale-name"), p.text("skus"); name != def.Name || !strings.Contains(items, "Phone") {
			t.Errorf("#sale-name, #skus = %q, %q while the sale is busy; want the sale as before", name, items)
		}
		p.screenshot("journey-please-wait.png")

		failing.Store(false)
		p.waitUntil("admission once answers return", `!!document.getElementById('buy-`+sku+`') && !document.getElementById('buy').hidden`, 10*time.Second)
		p.waitUntil("the notice to go", `document.getElementById('notice').hidden`, 5*time.Second)
		checkSameDocument(t, p)
		t.Logf("503 please_wait answers given: %d", answered.Load())
	})

	t.Run("dropped_connection", func(t *testing.T) {
		// Waiting at #1 with admission paused; then the browser is offline
		// for a while, during which ops resume admission.
		const sale, account, sku = "journey-offline", "journey-hal", "sku-1"
		def := s.openSale(t, sale, 2)
		s.admission(t, sale, `{"rate_per_s": 0.01, "paused": true}`)
		p := waitInLine(t, s, browser, def, account, "#1")

		setOffline(t, p, true)
		p.waitUntil("the reconnecting notice", `!document.getElementById('notice').hidden && /reconnecting/i.test(document.getElementById('notice').textContent)`, 8*time.Second)
		s.admission(t, sale, `{"rate_per_s": 1000, "paused": false}`)
		if pos := p.text("position"); pos != "#1" {
			t.Errorf("#position = %q while offline, want #1 as before", pos)
		}
		if note := p.text("notice"); strings.Contains(note, "HTTP") || strings.Contains(note, "Unexpected") {
			t.Errorf("#notice = %q while offline, want a plain reconnecting message", note)
		}
		if p.visible("buy") {
			t.Errorf("the page offers Buy while offline: %s", p.state())
		}
		p.screenshot("journey-reconnecting.png")

		setOffline(t, p, false)
		p.waitUntil("admission after reconnecting", `!!document.getElementById('buy-`+sku+`') && !document.getElementById('buy').hidden`, 10*time.Second)
		p.waitUntil("the notice to go", `document.getElementById('notice').hidden`, 5*time.Second)
		checkSameDocument(t, p)
	})

	t.Run("server_clock", func(t *testing.T) {
		// The device's clock runs ten minutes fast; the countdowns still
		// show the server's time left.
		startDef := origintest.OpenSale("journey-clock-start", 2, 600)
		startDef.StartsAt = time.Now().Add(40 * time.Second).Truncate(time.Second)
		s.Origin.MustCreateSale(t, startDef)
		s.Node.WaitSale(t, startDef.SaleID)
		const holdSale, account, sku = "journey-clock-hold", "journey-ida", "sku-1"
		holdDef := s.openSale(t, holdSale, 2)

		p := newPage(t, browser)
		if _, err := chromedp.Call(p.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: fastClockJS}); err != nil {
			t.Fatalf("skew the page's clock: %v", err)
		}
		p.do("open the upcoming sale", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(startDef.SaleID)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, startDef.Name), 10*time.Second)
		skew, err := chromedp.Run(p.ctx, chromedp.Evaluate[float64](`(Date.now() - performance.timeOrigin - performance.now()) / 60000`))
		if err != nil || skew < 9.9 || skew > 10.1 {
			t.Fatalf("the page's clock is %.2f minutes ahead (%v), want 10", skew, err)
		}
		p.waitUntil("the start countdown", `/^Starts in /.test(document.getElementById('countdown').textContent)`, 5*time.Second)
		checkCountdown(t, p, "countdown", "Starts in ", startDef.StartsAt)
		p.screenshot("journey-server-clock.png")

		p.do("open the open sale", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(holdSale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, holdDef.Name), 10*time.Second)
		p.waitUntil("the end countdown", `/^Ends in /.test(document.getElementById('countdown').textContent)`, 5*time.Second)
		checkCountdown(t, p, "countdown", "Ends in ", holdDef.EndsAt)
		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the Buy button", `!!document.getElementById('buy-`+sku+`')`, 10*time.Second)
		p.do("press Buy", chromedp.Click(chromedp.ID("buy-"+sku)))
		p.waitUntil("a held reservation", `document.getElementById('res-status').textContent === 'held'`, 10*time.Second)
		status, r := s.Origin.Reservation(t, s.Origin.UserToken(t, account), p.text("res-id"))
		if status != fasthttp.StatusOK || r.ExpiresAt.IsZero() {
			t.Fatalf("GET /v1/reservations/%s = %d %+v, want 200 with expires_at", p.text("res-id"), status, r)
		}
		checkCountdown(t, p, "res-countdown", "Reserved! Pay within ", r.ExpiresAt)
	})

	t.Run("keyboard_and_accessibility", func(t *testing.T) {
		const sale, account, sku = "journey-keys", "journey-jo", "sku-1"
		def := s.openSale(t, sale, 2)
		p := openSalePage(t, s, browser, def)
		checkNamed(t, p, "signed out")
		checkContrast(t, p, "signed out")

		// Keyboard only, from the top of the page.
		tabTo(p, "signin-user")
		p.do("type the account and press Enter", chromedp.KeyEvent(account), chromedp.KeyEvent(kb.Enter))
		p.waitUntil("signed in", fmt.Sprintf(`document.getElementById('who').textContent === %q && !document.getElementById('join-button').disabled`, account), 10*time.Second)
		tabTo(p, "join-button")
		checkFocusVisible(t, p)
		p.do("press Enter on Join", chromedp.KeyEvent(kb.Enter))
		p.waitUntil("the Buy button", `!!document.getElementById('buy-`+sku+`') && !document.getElementById('buy').hidden`, 10*time.Second)
		checkNamed(t, p, "admitted")
		checkContrast(t, p, "admitted")
		tabTo(p, "buy-"+sku)
		checkFocusVisible(t, p)
		p.do("press Enter on Buy", chromedp.KeyEvent(kb.Enter))
		p.waitUntil("a held reservation", `document.getElementById('res-status').textContent === 'held'`, 10*time.Second)
		checkNamed(t, p, "reserved")
		checkContrast(t, p, "reserved")
		// The hold's clock ticks every second inside a live region: the
		// ticking time itself is a timer, which screen readers do not read
		// out at each tick.
		quiet, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
  const t = document.querySelector('#res-countdown [role="timer"]');
  return !!t && /\d\d:\d\d/.test(t.textContent) && t.getAttribute('aria-live') === 'off';
})()`))
		if err != nil || !quiet {
			t.Errorf("the hold's ticking time is not a quiet timer (role=timer, aria-live=off) in #res-countdown (%v): %s", err, p.state())
		}

		// The same colours hold in the dark scheme.
		setColorScheme(t, p, "dark")
		checkContrast(t, p, "reserved, dark scheme")
		p.screenshot("journey-keyboard-dark.png")
		setColorScheme(t, p, "light")
		p.screenshot("journey-keyboard-reserved.png")

		tabTo(p, "pay-button")
		checkFocusVisible(t, p)
		p.do("press Enter on Pay now", chromedp.KeyEvent(kb.Enter))
		p.waitUntil("the gateway's pay page", `location.pathname.startsWith('/pay/') && !!document.getElementById('pay-button')`, 10*time.Second)
	})
	t.Logf("TestShopperJourneys took %v", time.Since(start).Round(time.Millisecond))
}

// fastClockJS, evaluated before the page's own script, runs the page's
// clock (Date.now() and new Date()) ten minutes ahead of the real one, as
// a device whose clock is wrong; Date.parse and dates built from values
// are untouched.
const fastClockJS = `(() => {
  const ahead = 10 * 60 * 1000, RealDate = Date;
  class FastDate extends RealDate {
    constructor(...args) { if (args.length === 0) super(RealDate.now() + ahead); else super(...args); }
    static now() { return RealDate.now() + ahead; }
  }
  globalThis.Date = FastDate;
})();`

// openSalePage opens a new tab on the page of def and waits until it shows
// the sale's name.
func openSalePage(t *testing.T, s *stack, browser context.Context, def origintest.Sale) *page {
	t.Helper()
	p := newPage(t, browser)
	p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(def.SaleID)))
	p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
	return p
}

// waitInLine opens def's page, signs in as account, joins the line and
// waits until the page shows place; then it marks the document, so that a
// later checkSameDocument proves the page never reloaded.
func waitInLine(t *testing.T, s *stack, browser context.Context, def origintest.Sale, account, place string) *page {
	t.Helper()
	p := openSalePage(t, s, browser, def)
	signIn(p, account)
	p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
	p.waitUntil("a place in line", fmt.Sprintf(`document.getElementById('position').textContent === %q`, place), 10*time.Second)
	markDocument(p)
	return p
}

// admission puts body to the edge's admission settings of sale.
func (s *stack) admission(t *testing.T, sale, body string) {
	t.Helper()
	res := s.Node.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission", Body: []byte(body)})
	if res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT admission of %s %s = %d %s, want 200", sale, body, res.Status, res.Body)
	}
}

// markDocument leaves a mark on the page's document that a reload would
// take away (checkSameDocument).
func markDocument(p *page) {
	p.t.Helper()
	p.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.journeyMark = 'same document'`))
}

// checkSameDocument fails t if the page's document is not the one
// markDocument marked: the page reloaded or went elsewhere.
func checkSameDocument(t *testing.T, p *page) {
	t.Helper()
	mark, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`window.journeyMark || ''`))
	if err != nil || mark != "same document" {
		t.Errorf("the page's mark = %q (%v): it reloaded to recover, want it to carry on by itself", mark, err)
	}
}

// setOffline takes p's tab off the network, or back on: its requests fail
// at network level and navigator.onLine says so.
func setOffline(t *testing.T, p *page, offline bool) {
	t.Helper()
	if _, err := chromedp.Call(p.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		t.Fatalf("set the tab offline=%v: %v", offline, err)
	}
	if _, err := chromedp.Call(p.ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{
		Offline: offline, DownloadThroughput: -1, UploadThroughput: -1,
	}); err != nil {
		t.Fatalf("set navigator.onLine=%v: %v", !offline, err)
	}
}

// setColorScheme makes p's tab prefer the light or the dark colour scheme.
func setColorScheme(t *testing.T, p *page, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		t.Fatalf("prefer the %s colour scheme: %v", scheme, err)
	}
	p.waitUntil("the "+scheme+" scheme", fmt.Sprintf(`matchMedia('(prefers-color-scheme: %s)').matches`, scheme), 2*time.Second)
}

// countdownRE is the time at the end of a countdown: [h:]mm:ss.
var countdownRE = regexp.MustCompile(`(?:(\d+):)?(\d{2}):(\d{2})$`)

// checkCountdown reads the countdown in the element with that id, which
// starts with prefix, and checks that it shows the time left until at, on
// the real clock, within 2 s.
func checkCountdown(t *testing.T, p *page, id, prefix string, at time.Time) {
	t.Helper()
	text := p.text(id)
	left := time.Until(at)
	m := countdownRE.FindStringSubmatch(text)
	if !strings.HasPrefix(text, prefix) || m == nil {
		t.Errorf("#%s = %q, want %s[h:]mm:ss", id, text, prefix)
		return
	}
	h, _ := strconv.Atoi(m[1])
	mm, _ := strconv.Atoi(m[2])
	ss, _ := strconv.Atoi(m[3])
	shown := time.Duration(h)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second
	if d := shown - left; d < -2*time.Second || d > 2*time.Second {
		t.Errorf("#%s = %q (%v) with %v left on the server's clock; want within 2 s of it", id, text, shown, left.Round(100*time.Millisecond))
	}
}

// tabTo presses Tab until the element with that id has the focus, and fails
// the test when 30 presses do not get there: it cannot be reached by
// keyboard.
func tabTo(p *page, id string) {
	p.t.Helper()
	var path []string
	for range 30 {
		focused, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => { const e = document.activeElement;
  return !e || e === document.body ? 'body' : e.id || e.tagName.toLowerCase(); })()`))
		if err != nil {
			p.t.Fatalf("read the focus: %v", err)
		}
		if focused == id {
			return
		}
		path = append(path, focused)
		p.do("press Tab", chromedp.KeyEvent(kb.Tab))
	}
	p.t.Fatalf("#%s not reached by 30 presses of Tab (focus went %s)\npage: %s", id, strings.Join(path, " → "), p.state())
}

// checkFocusVisible fails t unless the focused element shows an outline.
func checkFocusVisible(t *testing.T, p *page) {
	t.Helper()
	outline, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => { const s = getComputedStyle(document.activeElement);
  return document.activeElement.id + ' ' + s.outlineStyle + ' ' + s.outlineWidth; })()`))
	if err != nil || strings.Contains(outline, " none ") || strings.HasSuffix(outline, " 0px") {
		t.Errorf("focused element and its outline = %q (%v), want a visible outline", outline, err)
	}
}
