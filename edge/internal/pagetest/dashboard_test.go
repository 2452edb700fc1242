package pagetest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// The ops dashboard in headless Chromium, on one of two edges sharing a
// Redis of their own, in front of a real origin: it signs in with the
// admin token, shows the sale live (line, rate, stock from the origin's
// ledger), the reserves made through the edge with their rate and the
// origin's answer time; a rate change and a pause made from the page, each
// after a confirmation, are in force on both edges within a tick and
// listed with who made them; and banners say when Redis lost the sale's
// line and it is being rebuilt (then the sale says when it was), when
// Redis is unreachable, when a change is recorded but not yet in effect,
// and when the origin does not answer; a render that throws says so in a
// banner without stopping the refreshes. Screenshots of each state:
// dashboard-*.png.
func TestOpsDashboard(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	proxy := edgetest.NewCountingProxy(t, o.PublicLn.Dial)
	redisSrv := edgetest.StartRedisServer(t)
	r := edgetest.NewRedisAt(t, redisSrv.URL)
	cfg := edgetest.Config(r, proxy.URL)
	cfg.DefaultRatePerSecond = 50
	a, b := edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)
	const sale = "opsdash"
	o.MustCreateSale(t, origintest.OpenSale(sale, 40, 600))
	a.WaitSale(t, sale)
	b.WaitSale(t, sale)
	for _, account := range []string{"ann", "bo", "cy"} {
		if res, _ := a.JoinAgainWhileBusy(t, sale, account); res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %s = %d %s", account, res.Status, res.Body)
		}
	}
	admin := serveAdmin(t, a)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newPage(t, startBrowser(t, ctx))
	p.do("open the dashboard", chromedp.Navigate(admin+"/admin/dashboard"), chromedp.WaitVisible(chromedp.ID("token")))
	p.do("sign in", chromedp.SendKeys(chromedp.ID("token"), edgetest.AdminToken),
		chromedp.SendKeys(chromedp.ID("operator"), "priya"), chromedp.Click(chromedp.CSS("#signin button")))
	p.waitUntil("the sale, live", `[...document.querySelectorAll('#sales tbody tr')].some((r) =>
		r.dataset.sale === 'opsdash' && r.textContent.includes('50 /s') && r.textContent.includes('running'))`, 15*time.Second)
	p.waitUntil("the stock from the ledger", `(() => { const c = document.querySelectorAll('#books tbody tr td');
		return c.length >= 5 && c[0].textContent === 'sku-1' && c[1].textContent === '40'; })()`, 15*time.Second)
	p.waitUntil("both edge nodes, ready", `(() => { const rows = [...document.querySelectorAll('#nodes tbody tr')];
		return rows.length === 2 && rows.every((r) => r.cells[1].textContent === 'yes') &&
			rows.filter((r) => r.cells[0].textContent.includes('(this one)')).length === 1; })()`, 15*time.Second)
	p.waitUntil("the admitted rate measured", `!document.querySelector('#sales tbody tr').textContent.includes('…')`, 15*time.Second)

	// Reserves through edge a, each answered by the origin after 30 ms or
	// more: counted, with a rate while they are recent, and the origin's
	// answer time.
	proxy.Delay("/v1/sales/"+sale+"/reserve", 30*time.Millisecond)
	for _, account := range []string{"dee", "eve"} {
		reserveThrough(t, a, sale, account)
	}
	proxy.Delay("/v1/sales/"+sale+"/reserve", 0)
	p.waitUntil("the reserves counted, with a rate", `(() => {
		const row = (sel) => document.querySelector(sel);
		const reserved = row('#reserves tr[data-status="201"]'), answered = row('#origin tr[data-outcome="ok"]');
		return reserved && answered && reserved.cells[1].textContent === '2' && Number(reserved.cells[2].textContent) > 0 &&
			answered.cells[1].textContent === '2' && row('#reserves tr[data-status="409"]').cells[2].textContent === '0' &&
			/\(2 answers\): p50 [0-9.]+ ms · p99 [0-9.]+ ms/.test(document.getElementById('latency').textContent); })()`, 15*time.Second)
	p.screenshot("dashboard-live.png")

	// A rate change: asked, confirmed, in force on both edges.
	p.do("ask for 7 a second", chromedp.SendKeys(chromedp.ID("rate"), "7"), chromedp.Click(chromedp.CSS("#rate-form button")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open &&
		document.getElementById('confirm-text').textContent.includes('from 50 to 7')`, 5*time.Second)
	p.screenshot("dashboard-confirm.png")
	if st, _ := a.App.Admission.State(sale); st.RatePerSecond != 50 {
		t.Fatalf("rate before the confirmation = %v, want still 50", st.RatePerSecond)
	}
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	// Within a tick of the change, plus the page's request to make it.
	limit := cfg.Tick + time.Second
	inForce(t, limit, []*edgetest.Node{a, b}, sale, "rate 7", func(rate float64, paused bool) bool { return rate == 7 && !paused })
	p.waitUntil("the change listed with who made it", `(() => { const r = document.querySelector('#changes tbody tr');
		return r && r.textContent.includes('(priya)') && r.textContent.includes('rate 50 → 7 /s'); })()`, 10*time.Second)

	// A pause, then a resume.
	p.do("pause", chromedp.Click(chromedp.ID("pause")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	inForce(t, limit, []*edgetest.Node{a, b}, sale, "paused", func(_ float64, paused bool) bool { return paused })
	p.waitUntil("the sale shown paused", `document.querySelector('#sales tbody tr').textContent.includes('PAUSED') &&
		!document.getElementById('resume').hidden`, 10*time.Second)
	p.screenshot("dashboard-paused.png")
	p.do("resume", chromedp.Click(chromedp.ID("resume")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	inForce(t, limit, []*edgetest.Node{a, b}, sale, "resumed", func(_ float64, paused bool) bool { return !paused })

	// The rate tuning itself between bounds, then stopped.
	p.do("ask to tune from 5 to 80", chromedp.SendKeys(chromedp.ID("autotune-min"), "5"),
		chromedp.SendKeys(chromedp.ID("autotune-max"), "80"), chromedp.Click(chromedp.CSS("#autotune-form button[type=submit]")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open &&
		document.getElementById('confirm-text').textContent.includes('between 5 and 80')`, 5*time.Second)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	p.waitUntil("the sale tuning itself", `document.querySelector('#sales tbody tr').textContent.includes('tuning itself') &&
		document.getElementById('autotune-state').textContent.includes('between 5 and 80') &&
		!document.getElementById('autotune-off').hidden &&
		document.querySelector('#changes tbody tr').textContent.includes('tuning itself')`, 10*time.Second)
	p.screenshot("dashboard-autotune.png")
	p.do("stop tuning", chromedp.Click(chromedp.ID("autotune-off")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	p.waitUntil("the rate set by hand again", `document.getElementById('autotune-state').textContent === 'The rate is set by hand.' &&
		document.querySelector('#changes tbody tr').textContent.includes('tuning stopped')`, 10*time.Second)

	// A defence change made through the admin API shows in the record of
	// admin changes, with who made it and what it changed.
	if res := a.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(`{"tarpit": {"hold_s": 120}}`),
		Header: map[string]string{"X-Operator": "sam"}}); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT /admin/defences = %d %s, want 200", res.Status, res.Body)
	}
	p.waitUntil("the defence change recorded", `(() => { const r = document.querySelector('#admin-changes tbody tr');
		return r && r.textContent.includes('(sam)') && r.textContent.includes('tarpit.hold_s: 3600 → 120'); })()`, 10*time.Second)
	p.waitUntil("an outcome unknown named so", `describeAdmin({what: 'tarpit_release_unknown', before: {account: 'mallory'}, after: null})
		=== 'released mallory from the tarpit — not known whether it landed: check the defences and the tarpit'`, time.Second)
	p.check("a record of changes that is not a list refused with a banner", `(async () => {
		const keep = getJSON, banners = [];
		getJSON = (path) => path === '/admin/changes' ? Promise.resolve({changes: null}) : keep(path);
		try { await refreshAdminChanges(banners); } finally { getJSON = keep; }
		return banners.length === 1 && banners[0][1].includes('form this page does not know'); })()`)

	// A render that throws: a banner says so, and the page keeps
	// refreshing, so the banner goes once it renders again.
	p.check("break a render", `(() => { window.keptRender = renderRestores;
		renderRestores = () => { throw new Error('render broke'); }; return true; })()`)
	p.waitUntil("the broken render's banner", `document.getElementById('banners').textContent.includes('(render broke)') &&
		document.getElementById('banners').textContent.includes('It keeps trying')`, 10*time.Second)
	p.check("mend the render", `(() => { renderRestores = window.keptRender; return true; })()`)
	p.waitUntil("the page refreshing again", `!document.getElementById('banners').textContent.includes('render broke')`, 10*time.Second)

	// Redis loses the sale's line while the origin's copy is held back: a
	// banner and the sale say it is being rebuilt until the copy comes
	// through and the line is restored; the sale then says when.
	linePath := "/v1/lines/" + sale
	proxy.Delay(linePath, time.Minute)
	loseLine(t, r, sale)
	p.waitUntil("the rebuild banner", `document.getElementById('banners').textContent.includes(
		'Redis lost the line of sale opsdash; rebuilding from the origin') &&
		document.getElementById('line').textContent.startsWith('REBUILDING') &&
		document.querySelector('#sales tbody tr').textContent.includes('REBUILDING')`, 10*time.Second)
	p.screenshot("dashboard-rebuilding.png")
	proxy.Delay(linePath, 0)
	p.waitUntil("the line rebuilt, with its time", `!document.getElementById('banners').textContent.includes('Redis lost the line') &&
		document.getElementById('line').textContent.startsWith("In Redis. Last rebuilt from the origin's copy at ") &&
		/origin's copy: \d+ .*restores that failed: [1-9]/.test(document.getElementById('restores').textContent)`, 15*time.Second)
	p.do("show the sale's line", chromedp.ScrollIntoView(chromedp.ID("line")))
	p.screenshot("dashboard-rebuilt.png")
	p.do("back to the top", chromedp.ScrollIntoView(chromedp.ID("banners")))

	// Redis gone: a banner; a change then is recorded, not in effect, and
	// says so until Redis is back and takes it.
	redisSrv.Stop()
	p.waitUntil("the Redis banner", `document.getElementById('banners').textContent.includes('Redis is unreachable')`, 20*time.Second)
	p.screenshot("dashboard-redis-down.png")
	p.do("ask for 9 a second", chromedp.SendKeys(chromedp.ID("rate"), "9"), chromedp.Click(chromedp.CSS("#rate-form button")))
	p.waitUntil("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	p.waitUntil("the not-yet-in-effect banner", `document.getElementById('banners').textContent.includes('Recorded, not yet in effect')`, 10*time.Second)
	p.screenshot("dashboard-not-in-effect.png")
	redisSrv.Start()
	inForce(t, 20*time.Second, []*edgetest.Node{a, b}, sale, "rate 9 once Redis is back", func(rate float64, _ bool) bool { return rate == 9 })
	p.waitUntil("the banners gone", `document.getElementById('banners').textContent === ''`, 20*time.Second)

	// The origin gone: a banner.
	o.Stop()
	p.waitUntil("the origin banner", `document.getElementById('banners').textContent.includes('origin does not answer')`, 20*time.Second)
	p.screenshot("dashboard-origin-down.png")
}

// inForce waits until every node's admission state satisfies ok, failing
// t after within.
func inForce(t *testing.T, within time.Duration, nodes []*edgetest.Node, sale, what string, ok func(rate float64, paused bool) bool) {
	t.Helper()
	start := time.Now()
	for i, n := range nodes {
		testenv.Eventually(t, within-time.Since(start), fmt.Sprintf("edge %d's admission with %s after the confirmation", i, what), func() bool {
			st, _ := n.App.Admission.State(sale)
			return ok(st.RatePerSecond, st.Paused)
		})
	}
	t.Logf("%s in force on every edge %v after the confirmation", what, time.Since(start))
}

// reserveThrough joins account to the sale's line on n, waits until it is
// admitted, and reserves a unit through n.
func reserveThrough(t *testing.T, n *edgetest.Node, sale, account string) {
	t.Helper()
	token := n.Admit(t, sale, account, 10*time.Second)
	res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: token,
		User: edgetest.Owner(t, token), Body: []byte(`{"sku": "sku-1", "idempotency_key": "` + account + `"}`)})
	if res.Status != fasthttp.StatusCreated {
		t.Fatalf("reserve of %s = %d %s, want 201", account, res.Status, res.Body)
	}
}

// loseLine deletes every key of the sale's line from Redis, as a restart
// without persistence would lose them.
func loseLine(t *testing.T, r *edgetest.Redis, sale string) {
	t.Helper()
	k := line.NewKeys(r.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client.Del(ctx, k.Pre(sale), k.Post(sale), k.Places(sale), k.Seed(sale), k.Cursor(sale), k.Steps(sale), k.Line(sale)).Err(); err != nil {
		t.Fatalf("delete the line of %s: %v", sale, err)
	}
}

// serveAdmin serves a node's admin listener on a real 127.0.0.1 port, for
// the browser, and returns its base URL.
func serveAdmin(t *testing.T, n *edgetest.Node) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	serveTCP(t, n, ln, n.App.API.Admin())
	return "http://" + ln.Addr().String()
}

// check runs the JavaScript js in the page, awaiting it when it is a
// promise, and fails the test unless it is true.
func (p *page) check(what, js string) {
	p.t.Helper()
	ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
	if err != nil || !ok {
		p.t.Fatalf("%s: %v %v\npage: %s", what, ok, err, p.state())
	}
}
