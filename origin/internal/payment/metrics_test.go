package payment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Each call is timed once under its call and outcome, whatever its
// attempts: an intent made (ok), a refund refused (a 4xx), a listing that
// failed (5xx on every attempt).
func TestClientTimesEachCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/refunds"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"not_refundable","message":"no"}`))
		case r.Method == http.MethodPost:
			_, _ = w.Write([]byte(`{"id":"pi_1","status":"requires_payment","pay_url":"http://gw/pay/pi_1"}`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c := NewClient(srv.URL, "sk_test", ClientOptions{Attempts: 2, Backoff: time.Millisecond, Registerer: reg})
	ctx := context.Background()
	if _, err := c.CreateIntent(ctx, NewIntent{AmountMinor: 100, Currency: "INR"}, "k"); err != nil {
		t.Fatalf("CreateIntent: %v", err)
	}
	if _, err := c.Refund(ctx, "pi_1", 0, "r"); !IsRefusal(err) {
		t.Fatalf("Refund = %v, want a refusal", err)
	}
	if _, err := c.Intents(ctx, time.Time{}); err == nil {
		t.Fatal("Intents against a gateway answering 503 succeeded")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "flashgate_origin_gateway_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var call, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "call":
					call = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if n := m.GetHistogram().GetSampleCount(); n > 0 {
				got[call+"/"+outcome] = n
			}
		}
	}
	want := map[string]uint64{"create_intent/ok": 1, "refund/refused": 1, "list_intents/error": 1}
	if len(got) != len(want) {
		t.Errorf("flashgate_origin_gateway_seconds observed %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("flashgate_origin_gateway_seconds{%s} count = %d, want %d", k, got[k], n)
		}
	}
}
