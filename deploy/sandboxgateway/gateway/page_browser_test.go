package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPayPageInBrowser clicks the pay page's buttons in headless Chromium.
func TestPayPageInBrowser(t *testing.T) {
	f := start(t, nil)
	browser := startBrowser(t)
	create := func(t *testing.T, key, returnURL string) Intent {
		t.Helper()
		status, b := f.api(t, "POST", "/v1/intents", key,
			`{"amount_minor": 49900, "currency": "INR", "metadata": {"order_id": "`+key+`"}, "return_url": "`+returnURL+`"}`)
		if status != 201 {
			t.Fatalf("create = %d %s", status, b)
		}
		return decode[Intent](t, b)
	}

	noKey := func(_ *testing.T, in Intent) string { return strings.Split(in.PayURL, "#")[0] }
	otherKey := func(t *testing.T, in Intent) string {
		return noKey(t, in) + "#key=" + payKey(t, create(t, "other-"+in.ID, ""))
	}
	tests := []struct {
		name      string
		returnURL string
		url       func(*testing.T, Intent) string // the page's address; nil: pay_url
		before    func(id string)                 // runs after the page loaded, before the click
		upi       string                          // typed into the UPI ID field first; "" types nothing
		button    string
		want      string // in #pay-result
		status    Status
		payer     string // the intent's payer afterwards; "default" means DefaultPayer
	}{
		{"pay", "https://shop.example/orders/1", nil, nil, "", "pay-button", "succeeded", StatusSucceeded, "default"},
		{"pay with a UPI ID", "", nil, nil, " Alice@OKBank ", "pay-button", "succeeded", StatusSucceeded, "upi:alice@okbank"},
		{"fail", "", nil, nil, "", "fail-button", "failed", StatusFailed, ""},
		{"fail with a UPI ID", "", nil, nil, "alice@okbank", "fail-button", "failed", StatusFailed, ""},
		{"pay after it failed elsewhere", "https://shop.example/orders/3", nil,
			func(id string) { _, _ = f.gw.Fail(id) }, "", "pay-button", "failed", StatusFailed, ""},
		// A UPI ID the gateway refuses pays nothing, and says why.
		{"pay with a bad UPI ID", "", nil, nil, "alice smith@okbank", "pay-button", "payer must be", StatusRequiresPayment, ""},
		// A link without its key, or with another intent's, pays nothing.
		{"pay without the key", "", noKey, nil, "", "pay-button", "incomplete", StatusRequiresPayment, ""},
		{"fail with another intent's key", "", otherKey, nil, "", "fail-button", "incomplete", StatusRequiresPayment, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := create(t, strings.ReplaceAll(tt.name, " ", "-"), tt.returnURL)
			addr := in.PayURL
			if tt.url != nil {
				addr = tt.url(t, in)
			}
			tab := newTab(t, browser)
			run(t, tab, "open the pay page", chromedp.Navigate(addr))
			if title := eval[string](t, tab, `document.title`); title != "Sandbox UPI payment" {
				t.Errorf("title = %q, want Sandbox UPI payment", title)
			}
			// Its own style applies under its Content-Security-Policy (the script running is shown by the click).
			if width := eval[string](t, tab, `getComputedStyle(document.querySelector("main")).maxWidth`); width != "416px" {
				t.Errorf("main max-width = %q, want 416px (26rem) from the page's style: the policy blocked it", width)
			}
			if tt.before != nil {
				tt.before(in.ID)
			}
			if tt.upi != "" {
				run(t, tab, "type the UPI ID", chromedp.SendKeys(chromedp.ID("payer"), tt.upi))
			}
			run(t, tab, "click #"+tt.button, chromedp.Click(chromedp.ID(tt.button)))
			waitPage(t, tab, "the outcome", fmt.Sprintf(`document.getElementById("pay-result").textContent.includes(%q)`, tt.want))

			got, _ := f.gw.Intent(in.ID)
			if got.Status != tt.status {
				t.Errorf("intent status after the click = %s, want %s", got.Status, tt.status)
			}
			wantPayer := tt.payer
			if wantPayer == "default" {
				wantPayer = DefaultPayer(in.ID)
			}
			if got.Payer != wantPayer {
				t.Errorf("intent payer after the click = %q, want %q", got.Payer, wantPayer)
			}
			if tt.status == StatusRequiresPayment {
				if enabled := eval[bool](t, tab, `!document.getElementById("pay-button").disabled && !document.getElementById("payer").disabled`); !enabled {
					t.Error("buttons or the UPI ID field disabled after a refused click, want them usable again")
				}
				return
			}
			if disabled := eval[bool](t, tab, `document.getElementById("pay-button").disabled && document.getElementById("fail-button").disabled && document.getElementById("payer").disabled`); !disabled {
				t.Error("buttons or the UPI ID field still enabled after the outcome")
			}
			hasLink := eval[bool](t, tab, `!!document.getElementById("return-link")`)
			if hasLink != (tt.returnURL != "") {
				t.Fatalf("#return-link present = %v, want %v", hasLink, tt.returnURL != "")
			}
			if hasLink {
				visible := eval[bool](t, tab, `(() => { const a = document.getElementById("return-link"); return !a.hidden && a.getClientRects().length > 0; })()`)
				href := eval[string](t, tab, `document.getElementById("return-link").href`)
				if !visible || href != tt.returnURL {
					t.Errorf("#return-link visible %v href %q, want visible %q", visible, href, tt.returnURL)
				}
			}
		})
	}
}

// chromiumNames are the browser commands looked up in PATH, in order.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// startBrowser starts headless Chromium, closed in t.Cleanup. A missing
// browser fails the test: like the edge's page tests, this suite needs it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatalf("this test drives the pay page in headless Chromium and found none of %s in PATH (%s); "+
			"install it (Debian: apt-get install chromium)", strings.Join(chromiumNames, ", "), os.Getenv("PATH"))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start headless Chromium (%s): %v", path, err)
	}
	return browserCtx
}

// newTab opens a tab, closed in t.Cleanup, whose actions time out after 20s.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tab, cancelTimeout := context.WithTimeout(tab, 20*time.Second)
	t.Cleanup(cancelTimeout)
	return tab
}

// run runs actions in tab, failing the test when one fails.
func run(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitPage polls the JavaScript condition cond until it holds, failing the
// test with the result text after 5 seconds.
func waitPage(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	_, err := chromedp.Run(tab, chromedp.Poll[bool]("!!("+cond+")",
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)))
	if err != nil {
		if errors.Is(err, chromedp.ErrPollingTimeout) {
			err = errors.New("not within 5s")
		}
		result := eval[string](t, tab, `document.getElementById("pay-result").textContent`)
		t.Fatalf("wait for %s: %v; #pay-result says %q", what, err, result)
	}
}
