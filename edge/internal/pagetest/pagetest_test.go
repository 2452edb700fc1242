// Package pagetest drives the shopper page (static/index.html and app.js)
// in headless Chromium, end to end: the page as the edge serves it on a
// real 127.0.0.1 port, an edge node on real Redis, and a real origin on its
// own Redis prefix and Postgres schema behind it. Chromium is found in PATH
// (chromium, chromium-browser or google-chrome); without it the test fails.
// Each test starts its own stack and browser and runs beside the others:
// they wait on pages, not on the CPU (make test gives the lab -parallel 4).
package pagetest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// browserBudget bounds everything the browser does in TestShopperPage:
// its six parts, one after the other, take about 40 s alone here and over
// a minute beside the lab's other tests. Each step has its own wait.
const browserBudget = 2 * time.Minute

// TestShopperPage: a shopper signs in on the page, joins the line, is
// admitted, presses Buy and sees a held reservation whose id the origin's
// ledger and Postgres agree on; on a sale whose only unit is already held,
// the page says sold out after joining and offers nothing to buy.
func TestShopperPage(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := startStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	t.Logf("stack and browser up in %v", time.Since(start).Round(time.Millisecond))

	t.Run("reserve", func(t *testing.T) {
		const sale, account, sku = "page-buy", "shopper-ann", "sku-1"
		def := s.openSale(t, sale, 3)
		p := newPage(t, browser)
		p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		if got := p.text("sale-status"); got != "On sale now" {
			t.Errorf("#sale-status = %q, want %q", got, "On sale now")
		}

		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		joined := time.Now()
		p.waitUntil("admission", `document.getElementById('queue-state').dataset.state === 'admitted' || !!document.getElementById('buy-`+sku+`')`, 10*time.Second)
		t.Logf("admitted %v after joining", time.Since(joined).Round(time.Millisecond))
		if got := p.text("position"); got != "#1" {
			t.Errorf("#position once admitted = %q, want #1 (the only shopper in line)", got)
		}

		p.do("press Buy", chromedp.Click(chromedp.ID("buy-"+sku)))
		p.waitUntil("a held reservation",
			`/Reserved/.test(document.getElementById('reservation').textContent) && !document.getElementById('reservation').hidden && document.getElementById('res-id').textContent.startsWith('r_')`,
			10*time.Second)
		resID := p.text("res-id")
		if got := p.text("res-status"); got != "held" {
			t.Errorf("#res-status = %q, want held", got)
		}
		if got := p.text("res-countdown"); !strings.HasPrefix(got, "Reserved! Pay within ") {
			t.Errorf("#res-countdown = %q, want Reserved! Pay within mm:ss", got)
		}
		if p.visible("buy") {
			t.Errorf("the Buy section is still shown after the reserve; an admission token is single-use")
		}

		// The origin holds exactly one unit, for this account, under the id the page shows.
		ledger := s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
			return l[sku].Redis.Held == 1 && l[sku].DB.Held == 1
		})[sku]
		want := origintest.Counts{Available: 2, Held: 1, Sold: 0}
		if ledger.Total != 3 || ledger.Redis != want || ledger.DB != want {
			t.Errorf("ledger of %s/%s = total %d, redis %+v, db %+v; want total 3 and %+v on both sides", sale, sku, ledger.Total, ledger.Redis, ledger.DB, want)
		}
		rows := s.reservationsOf(t, sale, account)
		if len(rows) != 1 || rows[0] != (accountReservation{ID: resID, SKU: sku, Status: "held"}) {
			t.Errorf("reservations of %s in Postgres = %+v, want exactly [{%s %s held}]", account, rows, resID, sku)
		}
		if got := origintest.ReservationStatuses(t, s.Origin.Env, sale); len(got) != 1 || got["held"] != 1 {
			t.Errorf("reservations of %s by status = %v, want only one, held", sale, got)
		}
		status, r := s.Origin.Reservation(t, s.Origin.UserToken(t, account), resID)
		if status != fasthttp.StatusOK || r.Status != "held" || r.ReservationID != resID {
			t.Errorf("GET /v1/reservations/%s as %s = %d %+v, want 200 held", resID, account, status, r)
		}
		origintest.CheckInvariant(t, s.Origin.Env, sale)

		// The item list follows the snapshot, which the page re-reads every 2 s.
		p.waitUntil("the item list to count the held unit", `(document.querySelector('#skus .hint') || {}).textContent === '2 left'`, 10*time.Second)
		p.screenshot("shopper-page-reserved.png")
	})

	t.Run("pay", func(t *testing.T) {
		const sale, account, sku = "page-pay", "shopper-cat", "sku-1"
		def := s.openSale(t, sale, 2)
		p := newPage(t, browser)
		p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("admission", `!!document.getElementById('buy-`+sku+`')`, 10*time.Second)
		p.do("press Buy", chromedp.Click(chromedp.ID("buy-"+sku)))
		p.waitUntil("a held reservation", `document.getElementById('res-status').textContent === 'held'`, 10*time.Second)
		resID := p.text("res-id")

		// Pay now: the order is made and the browser goes to the gateway's own page — through a gateway
		// slower than the origin waits, so the page is answered without the link and reads the order until
		// it is there.
		s.Payments.SlowIntents.Store(int64(1500 * time.Millisecond))
		p.do("press Pay now", chromedp.Click(chromedp.ID("pay-button")))
		p.waitUntil("the page preparing the payment", `/Preparing your payment/.test(document.body.textContent)`, 5*time.Second)
		p.waitUntil("the gateway's pay page", `location.pathname.startsWith('/pay/') && !!document.getElementById('fail-button')`, 10*time.Second)
		s.Payments.SlowIntents.Store(0)
		p.screenshot("gateway-pay-page.png")
		p.do("pay on the gateway's page", chromedp.Click(chromedp.ID("pay-button")))
		p.waitUntil("the gateway's confirmation", `(document.getElementById('pay-result') || {}).dataset && document.getElementById('pay-result').dataset.status === 'succeeded'`, 10*time.Second)
		p.waitUntil("the link back to the shop", `!!document.getElementById('return-link') && !document.getElementById('return-link').hidden`, 10*time.Second)
		p.do("go back to the shop", chromedp.Click(chromedp.ID("return-link")))

		// Back on the shop's page: the webhook (gateway → edge → origin) has paid the order.
		p.waitUntil("the paid order", `location.search.includes('order=') && (document.getElementById('order-status').dataset.status === 'paid')`, 15*time.Second)
		p.waitUntil("the paid reservation", `document.getElementById('res-status').textContent === 'paid'`, 10*time.Second)
		if got := p.text("order-note"); !strings.Contains(got, "Paid") {
			t.Errorf("#order-note = %q, want it to say paid", got)
		}
		p.screenshot("shopper-page-paid.png")

		ledger := s.Origin.WaitLedger(t, sale, 5*time.Second, func(l map[string]origintest.LedgerSKU) bool {
			return l[sku].DB.Sold == 1 && l[sku].PendingIntents == 0
		})[sku]
		if want := (origintest.Counts{Available: 1, Sold: 1}); ledger.Redis != want || ledger.DB != want {
			t.Errorf("ledger = redis %+v, db %+v; want %+v on both sides", ledger.Redis, ledger.DB, want)
		}
		if rows := s.reservationsOf(t, sale, account); len(rows) != 1 || rows[0] != (accountReservation{ID: resID, SKU: sku, Status: "paid"}) {
			t.Errorf("reservations of %s = %+v, want [{%s %s paid}]", account, rows, resID, sku)
		}
		if n := len(s.Payments.Gateway.Intents()); n != 1 {
			t.Errorf("gateway intents = %d, want 1", n)
		}
		origintest.CheckInvariant(t, s.Origin.Env, sale)
	})

	t.Run("turn_from_the_snapshot", func(t *testing.T) {
		// Admission paused at a crawl: the join's answer says to ask again
		// in 60 s (the longest poll). When ops resume it, the snapshot the
		// page re-reads every second shows now_serving at the shopper's
		// place, and the page asks for its admission then, not 60 s later.
		const sale, account, sku = "page-turn", "shopper-dan", "sku-1"
		def := s.openSale(t, sale, 2)
		admission := func(body string) {
			t.Helper()
			res := s.Node.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission", Body: []byte(body)})
			if res.Status != fasthttp.StatusOK {
				t.Fatalf("PUT admission %s = %d %s, want 200", body, res.Status, res.Body)
			}
		}
		admission(`{"rate_per_s": 0.01, "paused": true}`)
		p := newPage(t, browser)
		p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("a place in line", `document.getElementById('queue-state').dataset.state === 'waiting' && document.getElementById('position').textContent === '#1'`, 10*time.Second)
		// A snapshot read or two while the line stands: the first of two
		// that have ended is handled.
		snapshotReads := func() int {
			n := 0
			for _, path := range p.requested() {
				if path == "/v1/sales/"+sale {
					n++
				}
			}
			return n
		}
		standing := snapshotReads()
		testenv.Eventually(t, 5*time.Second, "two snapshot reads while the line stands", func() bool { return snapshotReads() >= standing+2 })
		if p.visible("buy") {
			t.Fatalf("the page offers Buy while admission is paused: %s", p.state())
		}
		admission(`{"rate_per_s": 1000, "paused": false}`)
		resumed := time.Now()
		p.waitUntil("admission", `!!document.getElementById('buy-`+sku+`')`, 8*time.Second)
		t.Logf("admitted %v after admission resumed (the join said to ask again in 45–60 s)", time.Since(resumed).Round(time.Millisecond))
	})

	t.Run("pre_queue_place_from_the_draw", func(t *testing.T) {
		// A shopper who joins before the start is in the pre-queue, whose
		// places are drawn at the start; then the snapshot reveals the
		// draw's seed. The page works its drawn place out from the seed
		// and its queue token, without asking the edge (the whole
		// pre-queue would otherwise ask in the sale's first seconds), and
		// shows the place the edge's own draw gives it. Admission is paused
		// so that no admission tells it either.
		const sale, account = "page-draw", "shopper-eli"
		def := origintest.OpenSale(sale, 5, 600)
		def.StartsAt = time.Now().Add(12 * time.Second).Truncate(time.Second) // room to join first on a busy box
		s.Origin.MustCreateSale(t, def)
		s.Node.WaitSale(t, sale)
		if res := s.Node.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission", Body: []byte(`{"rate_per_s": 0.01, "paused": true}`)}); res.Status != fasthttp.StatusOK {
			t.Fatalf("pause admission = %d %s, want 200", res.Status, res.Body)
		}
		for i := range 20 { // others in the pre-queue: a real shuffle
			if res, a := s.Node.JoinAgainWhileBusy(t, sale, fmt.Sprintf("early-%02d", i)); res.Status != fasthttp.StatusAccepted || !a.PreQueue {
				t.Fatalf("join before the start = %d %s, want 202 in the pre-queue", res.Status, res.Body)
			}
		}
		p := newPage(t, browser)
		p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		signIn(p, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the pre-queue", `/pre-queue/.test(document.getElementById('queue-state').textContent)`, 10*time.Second)
		if time.Now().After(def.StartsAt) {
			t.Fatalf("the page joined after the start (%v); the test needs it in the pre-queue", def.StartsAt)
		}

		// The page would have asked at its moment of the edge's spread after
		// the start; it waits for the draw, which the snapshot shows first.
		p.waitUntil("a drawn place", `document.getElementById('position').textContent !== '–'`, time.Until(def.StartsAt)+8*time.Second)
		t.Logf("place shown %v after the start", time.Since(def.StartsAt).Round(time.Millisecond))
		for _, path := range p.requested() {
			if strings.HasSuffix(path, "/queue/status") {
				t.Errorf("the page asked the edge (%s) before showing its drawn place; want it worked out from the snapshot", path)
			}
		}
		queueToken, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('fg.queue.`+sale+`')`))
		if err != nil || queueToken == "" {
			t.Fatalf("read the page's queue token: %q, %v", queueToken, err)
		}
		res, a := s.Node.Status(t, sale, queueToken)
		if res.Status != fasthttp.StatusOK || a.Position < 1 || a.Position > 21 {
			t.Fatalf("status of the page's queue token = %d %s, want a drawn place in 1..21", res.Status, res.Body)
		}
		if got, want := p.text("position"), fmt.Sprintf("#%d", a.Position); got != want {
			t.Errorf("#position = %q, want %q, the edge's draw", got, want)
		}
		if got := p.text("queue-state"); strings.Contains(got, "pre-queue") {
			t.Errorf("#queue-state = %q after the draw, want the place in line", got)
		}
	})

	t.Run("sold_out", func(t *testing.T) {
		const sale, account, sku = "page-soldout", "shopper-bob", "sku-1"
		def := s.openSale(t, sale, 1)
		// Someone else holds the only unit, reserved straight at the origin.
		status, r := s.Origin.Reserve(t, sale, s.Origin.AdmissionToken(t, sale, "early-bird"), sku, "early-bird-key")
		if status != fasthttp.StatusCreated {
			t.Fatalf("reserve the only unit as early-bird = %d %+v, want 201", status, r)
		}
		s.waitEdgeSoldOut(t, sale)

		p := newPage(t, browser)
		p.do("open the page", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		signIn(p, account)
		// The unit is held, not sold: it may come back, so the line stays open.
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("sold out in the line", `document.getElementById('queue-state').dataset.state === 'sold_out'`, 10*time.Second)
		if got := p.text("queue-state"); !strings.Contains(got, "Sold out") {
			t.Errorf("#queue-state = %q, want a sold-out message", got)
		}
		if got := p.text("sale-status"); got != "Sold out" {
			t.Errorf("#sale-status = %q, want Sold out", got)
		}
		// Admission stopped at sold out before anyone was admitted: the shopper is next, nobody is ahead.
		if pos, serving, ahead := p.text("position"), p.text("now-serving"), p.text("ahead"); pos != "#1" || serving != "#0" || ahead != "0" {
			t.Errorf("#position, #now-serving, #ahead = %q, %q, %q; want #1, #0 and 0 people ahead", pos, serving, ahead)
		}
		if got := p.text("skus"); !strings.Contains(got, "sold out") {
			t.Errorf("#skus = %q, want the item marked sold out", got)
		}
		if p.visible("buy") || p.visible("buy-"+sku) || p.visible("reservation") {
			t.Errorf("a sold-out page offers something to buy or shows a reservation\npage: %s", p.state())
		}

		if rows := s.reservationsOf(t, sale, account); len(rows) != 0 {
			t.Errorf("reservations of %s in Postgres = %+v, want none", account, rows)
		}
		ledger := s.Origin.Ledger(t, sale)[sku]
		if want := (origintest.Counts{Available: 0, Held: 1}); ledger.Redis != want {
			t.Errorf("ledger of %s/%s in Redis = %+v, want %+v (early-bird's hold only)", sale, sku, ledger.Redis, want)
		}
		p.screenshot("shopper-page-sold-out.png")
	})
	t.Run("security", func(t *testing.T) {
		const sale = "page-security"
		def := s.openSale(t, sale, 1)

		// The page runs under its Content-Security-Policy: its own stylesheet applies (the
		// script running is shown by every other subtest), and it may not be framed, by
		// browsers that predate frame-ancestors neither.
		resp, err := http.Get(s.BaseURL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET / Content-Security-Policy %q, Referrer-Policy %q; want frame-ancestors 'none' and no-referrer", csp, resp.Header.Get("Referrer-Policy"))
		}
		if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET / X-Frame-Options %q, want DENY", got)
		}
		// The JSON the page reads is never sniffed as anything else: the sale's snapshot, the
		// first answer the page asks for.
		resp, err = http.Get(s.BaseURL + "/v1/sales/" + sale)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /v1/sales/%s = %d, Content-Type %q, X-Content-Type-Options %q; want 200, application/json and nosniff",
				sale, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"))
		}

		// Nobody signed in: the shop's handed-over token signs the shopper in once they confirm the account
		// (TestHandoverPrompt), and the page says as whom.
		p := newPage(t, browser)
		handover := func(query, account string) {
			p.do("open the shop's sign-in link",
				chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)+query+"#user_token="+url.QueryEscape(s.Origin.UserToken(t, account))))
			p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		}
		handover("", "shopper-dan")
		confirmHandover(p, "shopper-dan")
		if got := p.text("notice"); !strings.Contains(got, "shopper-dan") {
			t.Errorf("#notice = %q, want it to say whose account the link signed in", got)
		}
		if style, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).maxWidth`)); err != nil || style != "640px" {
			t.Errorf("body max-width = %q (%v), want 640px from style.css: the policy blocked the page's own stylesheet", style, err)
		}

		// Signed in: a crafted link carrying another account's token is ignored, and the page says so.
		handover("&again=1", "attacker-eve")
		p.waitUntil("the ignored link's notice", `document.getElementById('notice').textContent.includes('attacker-eve')`, 5*time.Second)
		if got := p.text("who"); got != "shopper-dan" {
			t.Errorf("after a link with attacker-eve's token, #who = %q, want shopper-dan still", got)
		}
		if got := p.text("notice"); !strings.Contains(got, "ignored") {
			t.Errorf("#notice = %q, want it to say the link was ignored", got)
		}

		// Ids in the page's address are checked before they become API paths: `?sale=..` would
		// otherwise send the shopper's token to /v1/queue, a path of the shop's.
		crafted := newPage(t, browser)
		crafted.do("open a crafted link", chromedp.Navigate(s.BaseURL+"/?sale=..&order=..#user_token="+url.QueryEscape(s.Origin.UserToken(t, "shopper-fay"))))
		crafted.waitUntil("the invalid-sale notice", `document.getElementById('notice').textContent.includes('not name a valid sale')`, 5*time.Second)
		if href, err := chromedp.Run(crafted.ctx, chromedp.Evaluate[string](`location.href`)); err != nil || strings.Contains(href, "user_token") {
			t.Errorf("address of the crafted link's page = %q (%v), want the token out of it", href, err)
		}
		for _, path := range crafted.requested() {
			if strings.HasPrefix(path, "/v1/") {
				t.Errorf("the page with ?sale=.. requested %s; want no API request", path)
			}
		}

		// So is `?order=..` beside a valid sale: signed in, the page would send the shopper's token
		// to GET /v1/orders/.., which the browser resolves to /v1/. A valid order id it does look up,
		// which shows that the wait below is long enough to see the request.
		back := func(order, account string) *page {
			p := newPage(t, browser)
			p.do("open a link back from the gateway", chromedp.Navigate(s.BaseURL+"/?sale="+url.QueryEscape(sale)+"&order="+url.QueryEscape(order)+
				"#user_token="+url.QueryEscape(s.Origin.UserToken(t, account))))
			p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
			confirmHandover(p, account)
			return p
		}
		const looked = `performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname.startsWith('/v1/orders/'))`
		back("o_unknown", "shopper-gil").waitUntil("the order looked up", looked, orderWait)
		bad := back("..", "shopper-hal")
		time.Sleep(orderWait)
		for _, path := range bad.requested() {
			if strings.HasPrefix(path, "/v1/") && path != "/v1/sales/"+sale {
				t.Errorf("the page with ?sale=%s&order=.. requested %s; want only the sale's snapshot", sale, path)
			}
		}
	})
	t.Logf("TestShopperPage took %v", time.Since(start).Round(time.Millisecond))
}

// orderWait is how long after the sale's name shows the page has to ask
// for an order named in its address.
const orderWait = 2 * time.Second

// signIn types account into the sign-in form, submits it and waits until
// the page says who is signed in and offers to join the line.
func signIn(p *page, account string) {
	p.t.Helper()
	p.do("sign in",
		chromedp.SendKeys(chromedp.ID("signin-user"), account),
		chromedp.Click(chromedp.ID("signin-button")))
	p.waitUntil("signed in", fmt.Sprintf(`document.getElementById('who').textContent === %q && !document.getElementById('join-button').disabled`, account), 10*time.Second)
}
