package sandboxgateway

import (
	"net/http"
	"strings"
	"testing"
)

// Every /sandbox/ path, unknown ones included, answers 401 without the
// control token and changes nothing; an intent's pay key opens only that
// intent's pay and fail (TestPayKey).
func TestSandboxAuth(t *testing.T) {
	f := start(t, nil)
	in, other := f.create(t, "ord_1"), f.create(t, "ord_2")
	calls := []struct {
		method, path, body string
		want               int // with the control token
	}{
		{"GET", "/sandbox/intents", "", 200},
		{"GET", "/sandbox/intents?created_since=2026-01-01T00:00:00Z", "", 200},
		{"POST", "/sandbox/intents/" + in.ID + "/pay", "", 200},
		{"POST", "/sandbox/intents/" + in.ID + "/fail", "", 409}, // paid just before
		{"GET", "/sandbox/events", "", 200},
		{"GET", "/sandbox/webhooks", "", 200},
		{"PUT", "/sandbox/webhooks", `{"enabled": false}`, 200},
		{"GET", "/sandbox/refunds", "", 200},
		{"PUT", "/sandbox/refunds", `{"hold": true}`, 200},
		{"POST", "/sandbox/refunds/" + unknownRefund + "/process", "", 404},
		{"POST", "/sandbox/refunds/" + unknownRefund + "/fail", "", 404},
		{"GET", "/sandbox/intents/" + in.ID + "/pay", "", 405},
		{"DELETE", "/sandbox/webhooks", "", 405},
		{"GET", "/sandbox/nowhere", "", 404},
	}
	auths := map[string]string{
		"none":                     "",
		"wrong token":              "Bearer ctl_wrong_0123456789abcdef",
		"the API key":              "Bearer " + testAPIKey,
		"no scheme":                testControlToken,
		"basic scheme":             "Basic " + testControlToken,
		"token with a suffix":      "Bearer " + testControlToken + "x",
		"another intent's pay key": "Bearer " + payKey(t, other),
		"empty bearer":             "Bearer ",
	}
	for _, c := range calls {
		for name, auth := range auths {
			t.Run(c.method+" "+c.path+" "+name, func(t *testing.T) {
				var h []string
				if auth != "" {
					h = []string{"Authorization", auth}
				}
				status, header, b := sendFull(t, c.method, f.url+c.path, c.body, h...)
				if status != http.StatusUnauthorized || errorCode(t, b) != "unauthorized" {
					t.Errorf("%s %s with %s = %d %s, want 401 unauthorized", c.method, c.path, name, status, b)
				}
				if got := header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
					t.Errorf("%s %s with %s: WWW-Authenticate = %q, want a Bearer challenge", c.method, c.path, name, got)
				}
			})
		}
	}
	// The pay key of the intent itself opens nothing but its pay and fail.
	for _, c := range calls {
		if strings.HasPrefix(c.path, "/sandbox/intents/"+in.ID+"/") {
			continue
		}
		status, b := send(t, c.method, f.url+c.path, c.body, "Authorization", "Bearer "+payKey(t, in))
		if status != http.StatusUnauthorized {
			t.Errorf("%s %s with the intent's pay key = %d %s, want 401", c.method, c.path, status, b)
		}
	}
	if got, _ := f.gw.Intent(in.ID); got.Status != StatusRequiresPayment || len(f.gw.Events()) != 0 || !f.gw.WebhooksEnabled() || f.gw.RefundsHeld() {
		t.Fatalf("after unauthorized calls: status %s, %d events, webhooks on %v, refunds held %v; want requires_payment, 0, true, false",
			got.Status, len(f.gw.Events()), f.gw.WebhooksEnabled(), f.gw.RefundsHeld())
	}

	for _, c := range calls {
		status, b := f.control(t, c.method, c.path, c.body)
		if status != c.want {
			t.Errorf("%s %s with the control token = %d %s, want %d", c.method, c.path, status, b, c.want)
		}
	}
	if got, _ := f.gw.Intent(in.ID); got.Status != StatusSucceeded || f.gw.WebhooksEnabled() || !f.gw.RefundsHeld() {
		t.Errorf("after the control token's calls: status %s, webhooks on %v, refunds held %v; want succeeded, false, true",
			got.Status, f.gw.WebhooksEnabled(), f.gw.RefundsHeld())
	}
}

// An intent's pay key, from its pay_url, pays or fails that intent and no
// other; an unknown intent answers 401 to a key, as a wrong key does.
func TestPayKey(t *testing.T) {
	f := start(t, nil)
	a, b := f.create(t, "ord_a"), f.create(t, "ord_b")
	keyA, keyB := payKey(t, a), payKey(t, b)
	if keyA == keyB {
		t.Fatalf("two intents share the pay key %s", keyA)
	}
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	steps := []struct {
		name, path, key string
		status          int
		code            string // error code, "" for 200
	}{
		{"b's key on a's pay", "/sandbox/intents/" + a.ID + "/pay", keyB, 401, "unauthorized"},
		{"a's key on b's fail", "/sandbox/intents/" + b.ID + "/fail", keyA, 401, "unauthorized"},
		{"a's key on an unknown intent", "/sandbox/intents/pi_000000000000000000000000/pay", keyA, 401, "unauthorized"},
		{"a's key without the prefix", "/sandbox/intents/" + a.ID + "/pay", strings.TrimPrefix(keyA, "pk_"), 401, "unauthorized"},
		{"a's key on a's pay", "/sandbox/intents/" + a.ID + "/pay", keyA, 200, ""},
		{"a's key on a's pay again", "/sandbox/intents/" + a.ID + "/pay", keyA, 200, ""},
		{"a's key on a's fail, once paid", "/sandbox/intents/" + a.ID + "/fail", keyA, 409, "intent_succeeded"},
		{"b's key on b's fail", "/sandbox/intents/" + b.ID + "/fail", keyB, 200, ""},
	}
	for _, s := range steps {
		status, body := send(t, "POST", f.url+s.path, "", as(s.key)...)
		if status != s.status || (s.code != "" && errorCode(t, body) != s.code) {
			t.Errorf("%s = %d %s, want %d %s", s.name, status, body, s.status, s.code)
		}
	}
	if got, _ := f.gw.Intent(a.ID); got.Status != StatusSucceeded {
		t.Errorf("a = %s, want succeeded", got.Status)
	}
	if got, _ := f.gw.Intent(b.ID); got.Status != StatusFailed {
		t.Errorf("b = %s, want failed", got.Status)
	}

	// The merchant, and a replayed create, see the same pay_url.
	_, body := f.api(t, "GET", "/v1/intents/"+a.ID, "", "")
	if got := decode[Intent](t, body); got.PayURL != a.PayURL {
		t.Errorf("GET /v1/intents/%s pay_url = %q, want %q", a.ID, got.PayURL, a.PayURL)
	}
	_, body = f.api(t, "POST", "/v1/intents", "create-ord_b",
		`{"amount_minor": 1000, "currency": "INR", "metadata": {"order_id": "ord_b"}}`)
	if got := decode[Intent](t, body); got.PayURL != b.PayURL {
		t.Errorf("replayed create pay_url = %q, want %q", got.PayURL, b.PayURL)
	}
}

func TestConfigControlToken(t *testing.T) {
	tests := []struct {
		name, token string
		want        string // in the error
	}{
		{"missing", "", "ControlToken is required"},
		{"short", "ctl_short", "at least 16 bytes"},
		{"the API key", "sk_test_0123456789abcdef", "differ from APIKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{APIKey: "sk_test_0123456789abcdef", ControlToken: tt.token, WebhookSecrets: testSecrets})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New with control token %q = %v, want an error with %q", tt.token, err, tt.want)
			}
		})
	}
}
