package pagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// stack is a real origin (its own Redis prefix and Postgres schema) and one
// edge node in front of it, whose public handler listens on a real
// 127.0.0.1 TCP port so that a browser can load the page from it.
type stack struct {
	Origin *origintest.Origin
	Node   *edgetest.Node
	// Payments is the sandbox gateway the origin takes payments through.
	Payments *origintest.Payments
	// BaseURL is the edge's public listener, http://127.0.0.1:<port>.
	BaseURL string
}

// startStack starts the origin, a TCP proxy in front of its in-memory
// listener (the edge dials real TCP), and an edge node that admits 1000
// shoppers a second; everything stops in t.Cleanup. The origin takes
// payments through the sandbox gateway's own protocol.
func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackAs(t, sandboxgateway.PersonalityFlashgate)
}

// startStackAs is startStack with the sandbox gateway playing the payment
// provider personality names (sandboxgateway.Personalities), which the origin is
// set up to take payments through.
func startStackAs(t *testing.T, personality string) *stack {
	t.Helper()
	// The edge's public port first: the gateway's pay page links back to it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	base := "http://" + ln.Addr().String()
	// The sandbox gateway posts its webhooks to the edge over real TCP,
	// which passes them to origin untouched.
	pay := origintest.StartPayments(t, func(c *sandboxgateway.Config) { c.WebhookDial, c.WebhookURL = nil, "" }, origintest.Personality(personality))
	pay.ReturnURL = base + "/"
	// Orders wait a short time for their payment link, as in production, so
	// a slow gateway (Payments.SlowIntents) sends the page to read the order.
	pay.IntentWait = 200 * time.Millisecond
	o := origintest.StartOrigin(t, origintest.NewEnv(t), pay.Configure)
	proxy := edgetest.NewCountingProxy(t, o.PublicLn.Dial)
	cfg := edgetest.Config(edgetest.NewRedis(t), proxy.URL)
	cfg.DefaultRatePerSecond = 1000
	n := edgetest.StartNode(t, cfg)
	if err := pay.Gateway.SetWebhookURL(base + "/v1/payments/webhook"); err != nil {
		t.Fatal(err)
	}

	serveTCP(t, n, ln, n.App.API.Public())
	return &stack{Origin: o, Node: n, Payments: pay, BaseURL: base}
}

// serveTCP serves one of n's handlers on ln, a real TCP listener a browser
// can reach, until the test ends. Registered after StartNode, its cleanup
// runs first: the listener drains before the node's loops and Redis
// client stop.
func serveTCP(t *testing.T, n *edgetest.Node, ln net.Listener, h fasthttp.RequestHandler) {
	t.Helper()
	srv := n.App.Server(h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shut down the edge's TCP listener: %v", err)
		}
		<-served
	})
}

// openSale creates a sale that started a minute ago with stock units of
// "sku-1" and waits until the edge serves it.
func (s *stack) openSale(t *testing.T, id string, stock int) origintest.Sale {
	t.Helper()
	sale := origintest.OpenSale(id, stock, 600)
	s.Origin.MustCreateSale(t, sale)
	s.Node.WaitSale(t, id)
	return sale
}

// waitEdgeSoldOut waits until the edge's snapshot of sale says sold out.
func (s *stack) waitEdgeSoldOut(t *testing.T, sale string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "edge snapshot of "+sale+" with sold_out true", func() bool {
		res := s.Node.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
		var snap struct {
			SoldOut bool `json:"sold_out"`
		}
		return res.Status == fasthttp.StatusOK && json.Unmarshal(res.Body, &snap) == nil && snap.SoldOut
	})
}

// accountReservation is one reservation row of an account, from Postgres.
type accountReservation struct {
	ID, SKU, Status string
}

// reservationsOf reads the account's reservations in sale from the origin's
// Postgres schema.
func (s *stack) reservationsOf(t *testing.T, sale, account string) []accountReservation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.Origin.Env.DB.Query(ctx,
		`SELECT reservation_id, sku, status FROM reservations WHERE sale_id = $1 AND account_id = $2 ORDER BY created_at`,
		sale, account)
	if err != nil {
		t.Fatalf("read the reservations of %s in %s: %v", account, sale, err)
	}
	defer rows.Close()
	var out []accountReservation
	for rows.Next() {
		var r accountReservation
		if err := rows.Scan(&r.ID, &r.SKU, &r.Status); err != nil {
			t.Fatalf("read the reservations of %s in %s: %v", account, sale, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the reservations of %s in %s: %v", account, sale, err)
	}
	return out
}

// chromiumNames are the browser commands looked up in PATH, in this order.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromiumPath finds Chromium in PATH. A missing browser fails the test:
// it is a dependency of the suite like Redis and Postgres, never a reason
// to skip.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("this test drives the shopper page in headless Chromium and found none of %s in PATH (%s); "+
		"install it (Debian: apt-get install chromium; `make test` does that when it runs as root)",
		strings.Join(chromiumNames, ", "), os.Getenv("PATH"))
	return ""
}

// startBrowser starts headless Chromium, with a fresh user data directory
// that chromedp makes and removes, bound to ctx; extra options (flags) go
// after the suite's own. The browser is closed, and its process waited for,
// in t.Cleanup.
func startBrowser(t *testing.T, ctx context.Context, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(900, 1400),
	)
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for the process to exit and its directory to go
	})
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start headless Chromium (%s): %v", path, err)
	}
	return browserCtx
}

// page is one browser tab on the shopper page.
type page struct {
	t   *testing.T
	ctx context.Context
}

// newPage opens a new tab of the browser (its own sessionStorage, so no
// sign-in or queue place carries over) and collects what the page writes to
// the console, failed requests included, for the test log.
func newPage(t *testing.T, browserCtx context.Context) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	var (
		mu    sync.Mutex // guards lines
		lines []string
	)
	messages := chromedp.Console(ctx) // opens the tab and subscribes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s %s", m.Type, m))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			t.Logf("page console: %s", l)
		}
	})
	return &page{t: t, ctx: ctx}
}

// do runs actions in the tab and fails the test with the page's state when
// one fails.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\npage: %s", what, err, p.state())
	}
}

// waitUntil waits until the JavaScript condition cond holds in the page
// (one that throws does not yet), and fails the test with the page's state
// after within. The page polls it itself, every pollInPage (chromedp.Poll):
// asked over DevTools every 10 ms by the test instead, the conditions kept
// Chromium's browser process busier than the pages it ran. A navigation
// meanwhile (a link followed, a redirect) ends one poll; the wait goes on
// in the new document.
func (p *page) waitUntil(what, cond string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	js := "(() => { try { return !!(" + cond + "); } catch (e) { return false; } })()"
	for {
		left := time.Until(deadline)
		if left <= 0 {
			p.t.Fatalf("wait for %s: still not so after %v\npage: %s", what, within, p.state())
		}
		// The page's own timeout ends the poll; this one, a little later,
		// a renderer that no longer answers.
		ctx, cancel := context.WithTimeout(p.ctx, left+2*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(pollInPage), chromedp.WithPollingTimeout(left)))
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, chromedp.ErrPollingTimeout):
			p.t.Fatalf("wait for %s: still not so after %v\npage: %s", what, within, p.state())
		case !navigatedAway(err):
			p.t.Fatalf("wait for %s: %v\npage: %s", what, err, p.state())
		}
		// Navigated away: poll again once the next document is there.
		select {
		case <-time.After(pollInPage):
		case <-p.ctx.Done():
		}
	}
}

// pollInPage is how often the page evaluates a waitUntil condition.
const pollInPage = 20 * time.Millisecond

// navigatedAway reports the errors of an evaluation whose document went
// away under it.
func navigatedAway(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed")
}

// text is the text content of the element with that id ("" when missing).
func (p *page) text(id string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(document.getElementById(%q) || {}).textContent || ""`, id)))
	if err != nil {
		p.t.Fatalf("read #%s: %v\npage: %s", id, err, p.state())
	}
	return s
}

// visible reports whether the element with that id exists and is rendered.
func (p *page) visible(id string) bool {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](
		fmt.Sprintf(`(() => { const e = document.getElementById(%q); return !!e && e.getClientRects().length > 0; })()`, id)))
	if err != nil {
		p.t.Fatalf("read #%s: %v\npage: %s", id, err, p.state())
	}
	return v
}

// requested lists the paths of the requests the page has made that have
// ended (the Resource Timing entries), in order.
func (p *page) requested() []string {
	p.t.Helper()
	paths, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)`))
	if err != nil {
		p.t.Fatalf("read the page's requests: %v\npage: %s", err, p.state())
	}
	return paths
}

// stateJS describes the page's visible state in one line, for failures.
const stateJS = `(() => {
  const ids = ['sale-name', 'sale-status', 'notice', 'who', 'handover', 'join-button', 'queue-state', 'position',
    'now-serving', 'eta', 'buy', 'reservation', 'res-countdown', 'res-id', 'res-status', 'order', 'order-status', 'order-note'];
  return ids.map((id) => {
    const e = document.getElementById(id);
    if (!e) return '#' + id + ' missing';
    const flags = (e.hidden ? ' hidden' : '') + (e.disabled ? ' disabled' : '') + (e.open ? ' open' : '') +
      (e.dataset && e.dataset.state ? ' data-state=' + e.dataset.state : '') +
      (e.dataset && e.dataset.status ? ' data-status=' + e.dataset.status : '');
    return '#' + id + flags + ' ' + JSON.stringify(e.textContent.replace(/\s+/g, ' ').trim());
  }).join('; ') + '; url ' + location.href;
})()`

// state is the page's state for a failure message, read with a fresh
// budget so that it works after a timed-out wait.
func (p *page) state() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](stateJS))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// screenshot captures the viewport as PNG and writes it to the test's
// temporary directory and, when FLASHGATE_SCREENSHOT_DIR is set, there too.
func (p *page) screenshot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("capture a screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		p.t.Fatalf("screenshot is %d bytes and not a PNG", len(png))
	}
	dirs := []string{p.t.TempDir()}
	if d := os.Getenv("FLASHGATE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			p.t.Fatalf("FLASHGATE_SCREENSHOT_DIR: %v", err)
		}
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			p.t.Fatalf("write the screenshot: %v", err)
		}
		p.t.Logf("screenshot (%d bytes): %s", len(png), path)
	}
}
