package pagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestPayPageInBrowser clicks the sandbox gateway's pay page buttons in
// headless Chromium, the gateway alone: no origin, no edge.
func TestPayPageInBrowser(t *testing.T) {
	t.Parallel()
	// Webhooks are only recorded: nothing here receives them.
	pay := origintest.StartPayments(t, func(c *sandboxgateway.Config) { c.WebhookDial, c.WebhookURL = nil, "" })
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	create := func(t *testing.T, key, returnURL string) sandboxgateway.Intent {
		t.Helper()
		return createIntent(t, pay, key,
			`{"amount_minor": 49900, "currency": "INR", "metadata": {"order_id": "`+key+`"}, "return_url": "`+returnURL+`"}`)
	}

	noKey := func(_ *testing.T, in sandboxgateway.Intent) string { return strings.Split(in.PayURL, "#")[0] }
	otherKey := func(t *testing.T, in sandboxgateway.Intent) string {
		return noKey(t, in) + "#key=" + payKey(t, create(t, "other-"+in.ID, ""))
	}
	tests := []struct {
		name      string
		returnURL string
		url       func(*testing.T, sandboxgateway.Intent) string // the page's address; nil: pay_url
		before    func(id string)                                // runs after the page loaded, before the click
		upi       string                                         // typed into the UPI ID field first; "" types nothing
		button    string
		want      string // in #pay-result
		status    sandboxgateway.Status
		payer     string // the intent's payer afterwards; "default" means DefaultPayer
	}{
		{"pay", "https://shop.example/orders/1", nil, nil, "", "pay-button", "succeeded", sandboxgateway.StatusSucceeded, "default"},
		{"pay with a UPI ID", "", nil, nil, " Alice@OKBank ", "pay-button", "succeeded", sandboxgateway.StatusSucceeded, "upi:alice@okbank"},
		{"fail", "", nil, nil, "", "fail-button", "failed", sandboxgateway.StatusFailed, ""},
		{"fail with a UPI ID", "", nil, nil, "alice@okbank", "fail-button", "failed", sandboxgateway.StatusFailed, ""},
		{"pay after it failed elsewhere", "https://shop.example/orders/3", nil,
			func(id string) { _, _ = pay.Gateway.Fail(id) }, "", "pay-button", "failed", sandboxgateway.StatusFailed, ""},
		// A UPI ID the gateway refuses pays nothing, and says why.
		{"pay with a bad UPI ID", "", nil, nil, "alice smith@okbank", "pay-button", "payer must be", sandboxgateway.StatusRequiresPayment, ""},
		// A link without its key, or with another intent's, pays nothing.
		{"pay without the key", "", noKey, nil, "", "pay-button", "incomplete", sandboxgateway.StatusRequiresPayment, ""},
		{"fail with another intent's key", "", otherKey, nil, "", "fail-button", "incomplete", sandboxgateway.StatusRequiresPayment, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := create(t, strings.ReplaceAll(tt.name, " ", "-"), tt.returnURL)
			addr := in.PayURL
			if tt.url != nil {
				addr = tt.url(t, in)
			}
			p := newPage(t, browser)
			p.do("open the pay page", chromedp.Navigate(addr))
			if title := evalIn[string](p, `document.title`); title != "Sandbox UPI payment" {
				t.Errorf("title = %q, want Sandbox UPI payment", title)
			}
			// Its own style applies under its Content-Security-Policy (the script running is shown by the click).
			if width := evalIn[string](p, `getComputedStyle(document.querySelector("main")).maxWidth`); width != "416px" {
				t.Errorf("main max-width = %q, want 416px (26rem) from the page's style: the policy blocked it", width)
			}
			if tt.before != nil {
				tt.before(in.ID)
			}
			if tt.upi != "" {
				p.do("type the UPI ID", chromedp.SendKeys(chromedp.ID("payer"), tt.upi))
			}
			p.do("click #"+tt.button, chromedp.Click(chromedp.ID(tt.button)))
			waitPayResult(p, tt.want)

			got, _ := pay.Gateway.Intent(in.ID)
			if got.Status != tt.status {
				t.Errorf("intent status after the click = %s, want %s", got.Status, tt.status)
			}
			wantPayer := tt.payer
			if wantPayer == "default" {
				wantPayer = sandboxgateway.DefaultPayer(in.ID)
			}
			if got.Payer != wantPayer {
				t.Errorf("intent payer after the click = %q, want %q", got.Payer, wantPayer)
			}
			if tt.status == sandboxgateway.StatusRequiresPayment {
				if enabled := evalIn[bool](p, `!document.getElementById("pay-button").disabled && !document.getElementById("payer").disabled`); !enabled {
					t.Error("buttons or the UPI ID field disabled after a refused click, want them usable again")
				}
				return
			}
			if disabled := evalIn[bool](p, `document.getElementById("pay-button").disabled && document.getElementById("fail-button").disabled && document.getElementById("payer").disabled`); !disabled {
				t.Error("buttons or the UPI ID field still enabled after the outcome")
			}
			hasLink := evalIn[bool](p, `!!document.getElementById("return-link")`)
			if hasLink != (tt.returnURL != "") {
				t.Fatalf("#return-link present = %v, want %v", hasLink, tt.returnURL != "")
			}
			if hasLink {
				visible := evalIn[bool](p, `(() => { const a = document.getElementById("return-link"); return !a.hidden && a.getClientRects().length > 0; })()`)
				href := evalIn[string](p, `document.getElementById("return-link").href`)
				if !visible || href != tt.returnURL {
					t.Errorf("#return-link visible %v href %q, want visible %q", visible, href, tt.returnURL)
				}
			}
		})
	}
}

// createIntent creates an intent over the gateway's API, body as given and
// key as its Idempotency-Key, as a merchant would.
func createIntent(t *testing.T, pay *origintest.Payments, key, body string) sandboxgateway.Intent {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, pay.URL+"/v1/intents", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+pay.APIKey)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create intent %s: %v", key, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to create intent %s: %v", key, err)
	}
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create intent %s = %d %s, want 201", key, resp.StatusCode, b)
	}
	var in sandboxgateway.Intent
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("decode the intent from %s: %v", b, err)
	}
	return in
}

// payKey is the pay key in an intent's pay_url.
func payKey(t *testing.T, in sandboxgateway.Intent) string {
	t.Helper()
	key, ok := in.PayKey()
	if !ok {
		t.Fatalf("pay_url %q has no #key=", in.PayURL)
	}
	return key
}

// evalIn evaluates a JavaScript expression in p: the harness reads text
// and visibility only, the pay page checks also want styles and flags.
func evalIn[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitPayResult waits up to 5s for #pay-result to include want, logging
// what it says instead when it never does: the harness's page state
// describes the shopper page, not this one.
func waitPayResult(p *page, want string) {
	p.t.Helper()
	waited := false
	defer func() {
		if waited {
			return
		}
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		defer cancel()
		result, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("pay-result") || {}).textContent || ""`))
		if err != nil {
			p.t.Logf("#pay-result unreadable: %v", err)
			return
		}
		p.t.Logf("#pay-result says %q", result)
	}()
	p.waitUntil("the outcome", fmt.Sprintf(`document.getElementById("pay-result").textContent.includes(%q)`, want), 5*time.Second)
	waited = true
}
