package razorpay

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/prometheus/client_golang/prometheus"
)

// Razorpay unreachable, 5xx or 429 is tried again with backoff; a 4xx is
// its refusal, given at once (payment.IsRefusal) and not retried.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		faults   []fault
		ok       bool
		refusal  bool
		requests int
	}{
		{"503 then created", []fault{{status: 503}}, true, false, 2},
		{"429 twice then created", []fault{{status: 429}, {status: 429}}, true, false, 3},
		{"500 on every attempt", []fault{{status: 500}, {status: 500}, {status: 500}}, false, false, 3},
		{"a 4xx", []fault{{status: 400, description: "The amount must be at least INR 1.00"}}, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.inject(tc.faults...)
			in, err := f.provider().CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
			if tc.ok != (err == nil) || payment.IsRefusal(err) != tc.refusal {
				t.Fatalf("CreateIntent = %+v, %v; want ok %v, refusal %v", in, err, tc.ok, tc.refusal)
			}
			if n := f.calls("POST", "/v1/payment_links"); n != tc.requests {
				t.Errorf("%d create requests, want %d", n, tc.requests)
			}
		})
	}

	// A wrong key is refused, never retried.
	f := newFake(t)
	p := f.provider()
	p.cfg.KeySecret = "wrong"
	if _, err := p.Intents(ctx, time.Time{}); !payment.IsRefusal(err) {
		t.Errorf("Intents with a wrong key = %v, want a refusal", err)
	}
	if n := f.calls("GET", "/v1/payments"); n != 1 {
		t.Errorf("%d listing requests with a wrong key, want 1", n)
	}

	// Unreachable: a failure, not a refusal.
	gone := httptest.NewServer(nil)
	gone.Close()
	down := New(Config{KeyID: "rzp_test_1", KeySecret: "s", BaseURL: gone.URL, Attempts: 2, Backoff: time.Millisecond})
	if _, err := down.Refund(ctx, "plink_1", 0, "order-o_1-refund"); err == nil || payment.IsRefusal(err) {
		t.Errorf("Refund against nothing = %v, want a failure that is not a refusal", err)
	}
}

// Each operation is timed once under its call and outcome, its retries
// included.
func TestProviderTimesEachCall(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	reg := prometheus.NewRegistry()
	p := New(Config{KeyID: f.keyID, KeySecret: f.secret, BaseURL: f.srv.URL, Backoff: time.Millisecond, Clock: f.clk, Registerer: reg})
	f.inject(fault{status: 503})
	in, err := p.CreateIntent(ctx, newIntent(testOrder, 100), "k-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refund(ctx, in.ID, 0, "order-o_1-refund"); err == nil {
		t.Fatal("Refund of an unpaid link succeeded")
	}
	f.inject(fault{status: 400, description: "The api key provided is invalid"})
	if _, err := p.Intents(ctx, time.Time{}); !payment.IsRefusal(err) {
		t.Fatalf("Intents = %v, want a refusal", err)
	}
	// Intent's look-ups (link, payment, refunds) are one get_intent.
	f.pay(in.ID, "upi", "shopper@okbank")
	if _, err := p.Intent(ctx, in.ID); err != nil {
		t.Fatalf("Intent: %v", err)
	}
	if _, err := p.Intent(ctx, "plink_Nope0000000000"); !payment.IsRefusal(err) {
		t.Fatalf("Intent(unknown) = %v, want a refusal", err)
	}
	var observed int
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "flashgate_origin_gateway_seconds" && m.GetHistogram().GetSampleCount() > 0 {
				observed++
			}
		}
	}
	if observed != 5 {
		t.Errorf("%d series observed, want 5", observed)
	}
	for _, c := range []struct{ call, outcome string }{
		{"create_intent", "ok"}, {"refund", "error"}, {"list_intents", "refused"}, {"get_intent", "ok"}, {"get_intent", "refused"},
	} {
		if got := histogramCount(t, reg, c.call, c.outcome); got != 1 {
			t.Errorf("%s/%s observed %d times, want 1", c.call, c.outcome, got)
		}
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, call, outcome string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["call"] == call && labels["outcome"] == outcome {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg Config
		ok  bool
	}{
		"keys":                    {Config{KeyID: "rzp_test_1", KeySecret: "s"}, true},
		"keys and base URL":       {Config{KeyID: "rzp_test_1", KeySecret: "s", BaseURL: "http://127.0.0.1:9300"}, true},
		"no key secret":           {Config{KeyID: "rzp_test_1"}, false},
		"no key id":               {Config{KeySecret: "s"}, false},
		"a base URL path":         {Config{KeyID: "rzp_test_1", KeySecret: "s", BaseURL: "api.razorpay.com"}, false},
		"webhook secrets":         {Config{KeyID: "rzp_test_1", KeySecret: "s", WebhookSecrets: [][]byte{[]byte("a"), []byte("b")}}, true},
		"an empty webhook secret": {Config{KeyID: "rzp_test_1", KeySecret: "s", WebhookSecrets: [][]byte{[]byte("a"), nil}}, false},
		"negative attempts":       {Config{KeyID: "rzp_test_1", KeySecret: "s", Attempts: -1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", name, err, tc.ok)
		}
	}
}

// A Config printed any way shows no secret.
func TestConfigStringRedactsSecrets(t *testing.T) {
	cfg := Config{KeyID: "rzp_test_visible", KeySecret: "key-secret-value", WebhookSecrets: [][]byte{[]byte("whsec-value")}}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		got := fmt.Sprintf(format, cfg)
		wrapped := fmt.Sprintf(format, struct{ C Config }{cfg})
		for _, out := range []string{got, wrapped} {
			if strings.Contains(out, "key-secret-value") || strings.Contains(out, "whsec-value") || !strings.Contains(out, "rzp_test_visible") {
				t.Errorf("Sprintf(%q) = %s, want the key id and no secret", format, out)
			}
		}
	}
}
