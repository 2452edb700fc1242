package sandboxgateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestSign(t *testing.T) {
	at := time.Unix(1767225600, 0)
	body := []byte(`{"id":"evt_1"}`)
	got := Sign([]string{"s1", "s2"}, at, body)
	parts := strings.Split(got, ",")
	if len(parts) != 3 || parts[0] != "t=1767225600" || !strings.HasPrefix(parts[1], "v1=") || !strings.HasPrefix(parts[2], "v1=") {
		t.Fatalf("Sign = %q, want t=1767225600,v1=...,v1=...", got)
	}
	for _, secret := range []string{"s1", "s2"} {
		if ts, ok := verifySignature(got, body, secret); !ok || !ts.Equal(at) {
			t.Errorf("Sign = %q does not verify under %q at %v", got, secret, at)
		}
	}
	if _, ok := verifySignature(got, []byte(`{"id":"evt_2"}`), "s1"); ok {
		t.Errorf("Sign = %q verifies another body", got)
	}
	if _, ok := verifySignature(got, body, "s3"); ok {
		t.Errorf("Sign = %q verifies under a secret it was not made with", got)
	}
	if one := Sign([]string{"s1"}, at, body); one != parts[0]+","+parts[1] {
		t.Errorf("Sign with s1 alone = %q, want %q", one, parts[0]+","+parts[1])
	}
}

func TestPayWebhook(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	f := start(t, func(c *Config) { c.Clock = clk })
	in := f.create(t, "ord_1")
	clk.Advance(time.Minute)
	paid := f.pay(t, in.ID)

	testenv.Eventually(t, 5*time.Second, "the webhook", func() bool { return len(f.hooks.requests()) == 1 })
	r := f.hooks.requests()[0]
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	sig := r.header.Get("Payment-Signature")
	if n := strings.Count(sig, "v1="); n != len(testSecrets) {
		t.Errorf("Payment-Signature %q has %d v1 entries, want %d", sig, n, len(testSecrets))
	}
	for _, secret := range testSecrets {
		ts, ok := verifySignature(sig, r.body, secret)
		if !ok {
			t.Errorf("Payment-Signature %q does not verify under %q", sig, secret)
		}
		if !ts.Equal(clk.Now().Truncate(time.Second)) {
			t.Errorf("signature t = %v, want the gateway clock %v", ts, clk.Now())
		}
	}

	p := decode[WebhookPayload](t, r.body)
	if !eventIDRE.MatchString(p.ID) || p.Type != EventPaymentSucceeded || !p.CreatedAt.Equal(paid.UpdatedAt) {
		t.Errorf("payload id, type, created_at = %s, %s, %v, want evt_..., %s, %v", p.ID, p.Type, p.CreatedAt, EventPaymentSucceeded, paid.UpdatedAt)
	}
	if p.Data.Intent.ID != in.ID || p.Data.Intent.Status != StatusSucceeded || p.Data.Intent.Metadata["order_id"] != "ord_1" || p.Data.Refund != nil {
		t.Errorf("payload data = %+v, want the succeeded intent and no refund", p.Data)
	}
	if strings.Contains(string(r.body), `"refund"`) {
		t.Errorf("payment payload %s mentions a refund", r.body)
	}

	testenv.Eventually(t, 5*time.Second, "the delivery record", func() bool { return f.eventsOf(in.ID)[0].Delivered })
	e := f.eventsOf(in.ID)[0]
	if e.ID != p.ID || e.Type != p.Type || len(e.Deliveries) != 1 || e.Deliveries[0].StatusCode != 200 ||
		e.Deliveries[0].Error != "" || e.Suppressed || string(e.Payload) != string(r.body) {
		t.Errorf("event = %+v, want %s delivered once with the body sent", e, p.ID)
	}
	status, b := f.control(t, "GET", "/sandbox/events", "")
	if status != http.StatusOK || !strings.Contains(string(b), `"event_id":"`+p.ID+`"`) || !strings.Contains(string(b), `"delivered":true`) {
		t.Errorf("GET /sandbox/events = %d %s, want the delivered event", status, b)
	}
}

func TestFailWebhook(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	if _, err := f.gw.Fail(in.ID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the webhook", func() bool { return len(f.hooks.requests()) == 1 })
	p := decode[WebhookPayload](t, f.hooks.requests()[0].body)
	if p.Type != EventPaymentFailed || p.Data.Intent.Status != StatusFailed {
		t.Errorf("webhook = %s with status %s, want %s with failed", p.Type, p.Data.Intent.Status, EventPaymentFailed)
	}
}

func TestWebhookRetries(t *testing.T) {
	f := start(t, nil)
	f.hooks.answerWith(func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	testenv.Eventually(t, 5*time.Second, "delivery", func() bool { return f.eventsOf(in.ID)[0].Delivered })
	closeGateway(t, f) // waits for every delivery, so the counts are final

	e := f.eventsOf(in.ID)[0]
	var codes []int
	for i, d := range e.Deliveries {
		codes = append(codes, d.StatusCode)
		if d.Attempt != i+1 || d.Duplicate {
			t.Errorf("delivery %d = %+v, want attempt %d, not a duplicate", i, d, i+1)
		}
		if (d.StatusCode == 500) != (d.Error != "") {
			t.Errorf("delivery %d = %+v, want an error exactly for the 500s", i, d)
		}
	}
	if len(codes) != 3 || codes[0] != 500 || codes[1] != 500 || codes[2] != 200 {
		t.Errorf("delivery statuses = %v, want [500 500 200]", codes)
	}
	got := f.hooks.requests()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	for i, r := range got {
		if string(r.body) != string(got[0].body) {
			t.Errorf("retry %d body differs from the first", i)
		}
		if _, ok := verifySignature(r.header.Get("Payment-Signature"), r.body, testSecrets[0]); !ok {
			t.Errorf("retry %d signature does not verify", i)
		}
	}
}

func TestWebhookGivesUp(t *testing.T) {
	f := start(t, func(c *Config) { c.MaxAttempts = 3 })
	f.hooks.answerWith(func(int) int { return http.StatusServiceUnavailable })
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	testenv.Eventually(t, 5*time.Second, "three attempts", func() bool { return len(f.eventsOf(in.ID)[0].Deliveries) == 3 })
	closeGateway(t, f)
	e := f.eventsOf(in.ID)[0]
	if len(e.Deliveries) != 3 || e.Delivered {
		t.Errorf("event after MaxAttempts 3 of 503s = %d deliveries, delivered %v, want 3, false", len(e.Deliveries), e.Delivered)
	}
	if n := len(f.hooks.requests()); n != 3 {
		t.Errorf("receiver got %d requests, want 3", n)
	}
}

func TestWebhookTransportError(t *testing.T) {
	f := start(t, func(c *Config) {
		c.WebhookURL = "http://127.0.0.1:1/hooks" // nothing listens on port 1
		c.MaxAttempts = 2
	})
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	testenv.Eventually(t, 5*time.Second, "two attempts", func() bool { return len(f.eventsOf(in.ID)[0].Deliveries) == 2 })
	for _, d := range f.eventsOf(in.ID)[0].Deliveries {
		if d.StatusCode != 0 || d.Error == "" {
			t.Errorf("delivery to a closed port = %+v, want status 0 and an error", d)
		}
	}
}

func TestWebhookDuplicates(t *testing.T) {
	f := start(t, func(c *Config) { c.DuplicateRate = 1 })
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	testenv.Eventually(t, 5*time.Second, "two deliveries", func() bool { return len(f.hooks.requests()) == 2 })
	closeGateway(t, f)

	got := f.hooks.requests()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(got))
	}
	first, second := decode[WebhookPayload](t, got[0].body), decode[WebhookPayload](t, got[1].body)
	if first.ID != second.ID || string(got[0].body) != string(got[1].body) {
		t.Errorf("duplicate = %s %s, want the same event and body as %s", second.ID, got[1].body, first.ID)
	}
	for i, r := range got {
		if _, ok := verifySignature(r.header.Get("Payment-Signature"), r.body, testSecrets[1]); !ok {
			t.Errorf("delivery %d signature does not verify", i)
		}
	}
	e := f.eventsOf(in.ID)
	if len(e) != 1 || len(e[0].Deliveries) != 2 || !e[0].Deliveries[1].Duplicate || !e[0].Delivered {
		t.Errorf("events = %+v, want one delivered event with a duplicate second delivery", e)
	}
}

func TestWebhooksDisabled(t *testing.T) {
	f := start(t, nil)
	put := func(body string) (int, []byte) { return f.control(t, "PUT", "/sandbox/webhooks", body) }
	if status, b := put(`{"enabled": false}`); status != http.StatusOK || !strings.Contains(string(b), `"enabled":false`) {
		t.Fatalf("PUT /sandbox/webhooks off = %d %s, want 200 {\"enabled\":false}", status, b)
	}
	if status, b := f.control(t, "GET", "/sandbox/webhooks", ""); status != http.StatusOK || !strings.Contains(string(b), `"enabled":false`) {
		t.Errorf("GET /sandbox/webhooks = %d %s, want enabled false", status, b)
	}
	lost := f.create(t, "ord_lost")
	f.pay(t, lost.ID)
	e := f.eventsOf(lost.ID)
	if len(e) != 1 || !e[0].Suppressed || len(e[0].Deliveries) != 0 || e[0].Delivered {
		t.Errorf("event while webhooks are off = %+v, want recorded, suppressed, no deliveries", e)
	}

	if status, b := put(`{"enabled": true}`); status != http.StatusOK || !strings.Contains(string(b), `"enabled":true`) {
		t.Fatalf("PUT /sandbox/webhooks on = %d %s", status, b)
	}
	sent := f.create(t, "ord_sent")
	f.pay(t, sent.ID)
	testenv.Eventually(t, 5*time.Second, "the webhook after switching on", func() bool { return len(f.hooks.requests()) >= 1 })
	closeGateway(t, f)
	got := f.hooks.requests()
	if len(got) != 1 || decode[WebhookPayload](t, got[0].body).Data.Intent.ID != sent.ID {
		t.Errorf("receiver got %d requests, want only the event of %s (not the lost one resent)", len(got), sent.ID)
	}

	for _, body := range []string{``, `{}`, `{"enabled": "yes"}`, `{"on": true}`} {
		if status, b := put(body); status != http.StatusBadRequest || errorCode(t, b) != "bad_request" {
			t.Errorf("PUT /sandbox/webhooks %s = %d %s, want 400 bad_request", body, status, b)
		}
	}
}

func TestWebhooksDisabledStopsRetries(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	f := start(t, func(c *Config) { c.RetryBase, c.RetryMax, c.Clock = 20*time.Millisecond, 20*time.Millisecond, clk })
	f.hooks.answerWith(func(int) int { return http.StatusInternalServerError })
	armed := clk.Armed()
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	select { // the first attempt failed and the retry waits
	case <-armed:
	case <-time.After(5 * time.Second):
		t.Fatal("no retry armed after the first attempt")
	}
	f.gw.SetWebhooksEnabled(false)
	before := len(f.hooks.requests())
	clk.Advance(100 * time.Millisecond) // several RetryMax
	done := make(chan struct{})
	go func() { f.gw.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("delivery still going on after webhooks were switched off")
	}
	if n := len(f.hooks.requests()); n != before {
		t.Errorf("receiver got %d requests after webhooks were switched off with %d, want no more", n, before)
	}
}

func TestNoWebhookURL(t *testing.T) {
	f := start(t, func(c *Config) { c.WebhookURL = "" })
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	if e := f.eventsOf(in.ID); len(e) != 1 || !e[0].Suppressed {
		t.Errorf("event without a webhook URL = %+v, want recorded and suppressed", e)
	}
	if err := f.gw.SetWebhookURL(f.hooks.url); err != nil {
		t.Fatal(err)
	}
	other := f.create(t, "ord_2")
	f.pay(t, other.ID)
	testenv.Eventually(t, 5*time.Second, "the webhook", func() bool { return len(f.hooks.requests()) == 1 })
	if err := f.gw.SetWebhookURL("ftp://x"); err == nil {
		t.Error("SetWebhookURL(ftp://x) = nil, want an error")
	}
}

func TestClose(t *testing.T) {
	f := start(t, func(c *Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour })
	f.hooks.answerWith(func(int) int { return http.StatusBadGateway })
	in := f.create(t, "ord_1")
	f.pay(t, in.ID)
	testenv.Eventually(t, 5*time.Second, "the first attempt", func() bool { return len(f.eventsOf(in.ID)[0].Deliveries) == 1 })

	began := time.Now()
	closeGateway(t, f) // the delivery waits an hour to retry; Close must cut it short
	if took := time.Since(began); took > time.Second {
		t.Errorf("Close took %v with a retry pending, want it cut short", took)
	}
	// The API still answers after Close; its events are recorded, not sent.
	after := f.create(t, "ord_2")
	f.pay(t, after.ID)
	if e := f.eventsOf(after.ID); len(e) != 1 || !e[0].Suppressed {
		t.Errorf("event after Close = %+v, want recorded and suppressed", e)
	}
}

func TestBackoff(t *testing.T) {
	g, err := New(Config{APIKey: "k", ControlToken: testControlToken, WebhookSecrets: []string{"s"}, RetryBase: 100 * time.Millisecond, RetryMax: time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	tests := []struct {
		attempt  int
		low, top time.Duration
	}{
		{1, 80 * time.Millisecond, 120 * time.Millisecond},
		{2, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 320 * time.Millisecond, 480 * time.Millisecond},
		{4, 640 * time.Millisecond, 960 * time.Millisecond},
		{5, 800 * time.Millisecond, time.Second},
		{60, 800 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			if d := g.backoff(tt.attempt); d < tt.low || d > tt.top {
				t.Errorf("backoff(%d) = %v, want within [%v, %v]", tt.attempt, d, tt.low, tt.top)
			}
		}
	}
}

// closeGateway closes f's gateway, waiting for its deliveries.
func closeGateway(t *testing.T, f *fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.gw.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
