package gateway

import (
	"net/http"
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
	for _, want := range []string{"JPY 500", "Payment failed.", `id="pay-button" type="button" disabled`} {
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
