package sandboxgateway

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestPayPage(t *testing.T) {
	f := start(t, nil)
	status, b := f.api(t, "POST", "/v1/intents", "k1",
		`{"amount_minor": 123450, "currency": "INR", "metadata": {"order_id": "<b>ord</b>\"'&"}, "return_url": "https://shop.example/orders?id=1&x=\"2\""}`)
	if status != http.StatusCreated {
		t.Fatalf("create = %d %s", status, b)
	}
	in := decode[Intent](t, b)

	req, _ := http.NewRequest("GET", in.PayURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s = %d %s, want 200 text/html; charset=utf-8", in.PayURL, resp.StatusCode, ct)
	}

	status, b = send(t, "GET", in.PayURL, "")
	page := string(b)
	for _, want := range []string{
		"<title>Sandbox UPI payment</title>",
		`<label for="payer">UPI ID</label>`, `<input id="payer" type="text"`,
		`JSON.stringify({ payer: "upi:" + upi })`,
		`id="pay-button"`, ">Pay</button>",
		`id="fail-button"`, ">Fail</button>",
		`id="pay-result"`,
		"INR 1234.50",
		"&lt;b&gt;ord&lt;/b&gt;&#34;&#39;&amp;", // the order id, escaped
		in.ID,
		`id="return-link" href="https://shop.example/orders?id=1&amp;x=%222%22"`,
		`"/sandbox/intents/" + encodeURIComponent("` + in.ID + `")`,
		`new URLSearchParams(location.hash.slice(1)).get("key")`,
		`Authorization: "Bearer " + key`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("pay page lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>ord</b>") {
		t.Error("pay page holds the order id unescaped")
	}
	// Anyone may load the page by the intent's id: it must not hand out
	// the key that pays it.
	if key := payKey(t, in); strings.Contains(page, key) {
		t.Errorf("pay page holds the intent's pay key %s", key)
	}
	for _, external := range []string{"src=\"http", "href=\"http://", "<link", "@import"} {
		if strings.Contains(page, external) {
			t.Errorf("pay page refers to an external asset (%s)", external)
		}
	}
	if strings.Contains(page, " disabled") {
		t.Error("buttons of an unpaid intent are disabled")
	}

	// No return_url, no link; a settled intent shows its outcome and
	// disables the buttons.
	_, b = f.api(t, "POST", "/v1/intents", "k2", `{"amount_minor": 500, "currency": "JPY"}`)
	plain := decode[Intent](t, b)
	if _, err := f.gw.Fail(plain.ID); err != nil {
		t.Fatal(err)
	}
	_, b = send(t, "GET", plain.PayURL, "")
	page = string(b)
	for _, want := range []string{"JPY 500", "Payment failed.", `id="pay-button" type="button" disabled`, `spellcheck="false" disabled>`} {
		if !strings.Contains(page, want) {
			t.Errorf("pay page of a failed intent lacks %s", want)
		}
	}
	if strings.Contains(page, `id="return-link"`) {
		t.Error("pay page of an intent without return_url has a return link")
	}

	status, b = send(t, "GET", f.url+"/pay/pi_000000000000000000000000", "")
	if status != http.StatusNotFound || !strings.Contains(string(b), "<html") {
		t.Errorf("pay page of an unknown intent = %d %s, want 404 HTML", status, b)
	}
}

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		minor    int64
		currency string
		want     string
	}{
		{123450, "INR", "INR 1234.50"},
		{5, "INR", "INR 0.05"},
		{50, "USD", "USD 0.50"},
		{100, "INR", "INR 1.00"},
		{0, "INR", "INR 0.00"},
		{500, "JPY", "JPY 500"},
		{1234, "KWD", "KWD 1.234"},
		{7, "BHD", "BHD 0.007"},
		{-250, "INR", "INR -2.50"},
	}
	for _, tt := range tests {
		if got := formatAmount(tt.minor, tt.currency); got != tt.want {
			t.Errorf("formatAmount(%d, %s) = %q, want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}

// TestPayPageHeaders: every HTML answer, the pay page of an open or a
// settled intent and the page of an unknown one, may not be framed, sends
// no Referer and is not sniffed, and its policy runs nothing but the page's
// own inline style and script, by a nonce fresh for every answer.
func TestPayPageHeaders(t *testing.T) {
	f := start(t, nil)
	open := f.create(t, "ord-open")
	settled := f.pay(t, f.create(t, "ord-paid").ID)
	tests := []struct {
		name   string
		url    string
		status int
		inline bool // the answer has the page's style and script
	}{
		{"open intent", open.PayURL, http.StatusOK, true},
		{"settled intent", settled.PayURL, http.StatusOK, true},
		{"unknown intent", f.url + "/pay/pi_000000000000000000000000", http.StatusNotFound, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nonces []string
			where := strings.Split(tt.url, "#")[0] // no pay key in the log
			for range 2 {
				status, h, b := sendFull(t, "GET", tt.url, "")
				if status != tt.status || h.Get("Content-Type") != "text/html; charset=utf-8" {
					t.Fatalf("GET %s = %d %s, want %d text/html; charset=utf-8", where, status, h.Get("Content-Type"), tt.status)
				}
				for name, want := range map[string]string{
					"X-Frame-Options":        "DENY",
					"Referrer-Policy":        "no-referrer",
					"X-Content-Type-Options": "nosniff",
					"Cache-Control":          "no-store",
				} {
					if got := h.Get(name); got != want {
						t.Errorf("GET %s %s = %q, want %q", where, name, got, want)
					}
				}
				csp := cspDirectives(h.Get("Content-Security-Policy"))
				nonce := strings.TrimSuffix(strings.TrimPrefix(csp["script-src"], "'nonce-"), "'")
				if len(nonce) < 22 { // 128 bits at least
					t.Fatalf("GET %s Content-Security-Policy %q, want script-src 'nonce-<128 random bits>'", where, h.Get("Content-Security-Policy"))
				}
				for dir, want := range map[string]string{
					"default-src":     "'none'",
					"script-src":      "'nonce-" + nonce + "'",
					"style-src":       "'nonce-" + nonce + "'",
					"connect-src":     "'self'",
					"base-uri":        "'none'",
					"form-action":     "'none'",
					"frame-ancestors": "'none'",
				} {
					if got := csp[dir]; got != want {
						t.Errorf("GET %s Content-Security-Policy %s = %q, want %q", where, dir, got, want)
					}
				}
				if len(csp) != 7 {
					t.Errorf("GET %s Content-Security-Policy = %q, want only the 7 directives above", where, h.Get("Content-Security-Policy"))
				}
				page := string(b)
				for _, tag := range []string{"<style", "<script"} {
					want := tag + ` nonce="` + nonce + `">`
					if n := strings.Count(page, tag); tt.inline && (n != 1 || !strings.Contains(page, want)) {
						t.Errorf("GET %s has %d %s, want one, %s", where, n, tag, want)
					} else if !tt.inline && n != 0 {
						t.Errorf("GET %s has %d %s, want none", where, n, tag)
					}
				}
				if attr := inlineAttr.FindString(page); attr != "" {
					t.Errorf("GET %s has the attribute %s, which the policy blocks", where, attr)
				}
				nonces = append(nonces, nonce)
			}
			if nonces[0] == nonces[1] {
				t.Errorf("two answers of GET %s share the nonce %s, want a fresh one each", where, nonces[0])
			}
		})
	}
}

// inlineAttr finds a style or event handler attribute in a page.
var inlineAttr = regexp.MustCompile(`\s(style|on[a-z]+)=`)

// cspDirectives splits a Content-Security-Policy into its directives, each
// name mapped to its sources as written.
func cspDirectives(policy string) map[string]string {
	out := map[string]string{}
	for d := range strings.SplitSeq(policy, ";") {
		name, sources, _ := strings.Cut(strings.TrimSpace(d), " ")
		if name != "" {
			out[name] = strings.TrimSpace(sources)
		}
	}
	return out
}
