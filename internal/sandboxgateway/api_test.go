package sandboxgateway

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

var (
	intentIDRE = regexp.MustCompile(`^pi_[0-9a-f]{24}$`)
	refundIDRE = regexp.MustCompile(`^re_[0-9a-f]{24}$`)
	eventIDRE  = regexp.MustCompile(`^evt_[0-9a-f]{24}$`)
	payKeyRE   = regexp.MustCompile(`^pk_[0-9a-f]{32}$`)
)

func TestCreateIntent(t *testing.T) {
	f := start(t, nil)
	status, b := f.api(t, "POST", "/v1/intents", "k1",
		`{"amount_minor": 49900, "currency": "INR", "metadata": {"order_id": "ord_1", "sku": "tee"}, "return_url": "https://shop.example/orders/ord_1"}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/intents = %d %s, want 201", status, b)
	}
	in := decode[Intent](t, b)
	if !intentIDRE.MatchString(in.ID) {
		t.Errorf("intent_id = %q, want pi_ and 24 hex digits", in.ID)
	}
	if in.Status != StatusRequiresPayment || in.AmountMinor != 49900 || in.Currency != "INR" {
		t.Errorf("intent = %+v, want requires_payment 49900 INR", in)
	}
	if in.Metadata["order_id"] != "ord_1" || in.Metadata["sku"] != "tee" {
		t.Errorf("metadata = %v, want order_id ord_1 and sku tee", in.Metadata)
	}
	if want := f.url + "/pay/" + in.ID + "#key="; !strings.HasPrefix(in.PayURL, want) || !payKeyRE.MatchString(payKey(t, in)) {
		t.Errorf("pay_url = %q, want %s and a pay key pk_ with 32 hex digits", in.PayURL, want)
	}
	if in.ReturnURL != "https://shop.example/orders/ord_1" {
		t.Errorf("return_url = %q, want it as given", in.ReturnURL)
	}
	if in.CreatedAt.IsZero() || !in.CreatedAt.Equal(in.UpdatedAt) || in.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at, updated_at = %v, %v, want equal UTC times", in.CreatedAt, in.UpdatedAt)
	}
	if !strings.Contains(string(b), `"refunds":[]`) {
		t.Errorf("body %s lacks \"refunds\":[]", b)
	}

	status, b = f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	if got := decode[Intent](t, b); status != http.StatusOK || got.ID != in.ID || got.PayURL != in.PayURL {
		t.Errorf("GET /v1/intents/%s = %d %s, want 200 and the intent", in.ID, status, b)
	}
	status, b = f.api(t, "GET", "/v1/intents/pi_000000000000000000000000", "", "")
	if status != http.StatusNotFound || errorCode(t, b) != "unknown_intent" {
		t.Errorf("GET an unknown intent = %d %s, want 404 unknown_intent", status, b)
	}

	_, b = f.api(t, "POST", "/v1/intents", "k2", `{"amount_minor": 1, "currency": "INR"}`)
	if !strings.Contains(string(b), `"metadata":{}`) || !strings.Contains(string(b), `"return_url":""`) {
		t.Errorf("intent without metadata or return_url = %s, want \"metadata\":{} and \"return_url\":\"\"", b)
	}
}

func TestCreateIdempotency(t *testing.T) {
	f := start(t, nil)
	body := `{"amount_minor": 1000, "currency": "INR", "metadata": {"order_id": "ord_1"}}`
	status, b := f.api(t, "POST", "/v1/intents", "same-key", body)
	if status != http.StatusCreated {
		t.Fatalf("first create = %d %s, want 201", status, b)
	}
	first := decode[Intent](t, b)

	// The same request, spelled differently, is a replay.
	status, b = f.api(t, "POST", "/v1/intents", "same-key", `{"metadata":{"order_id":"ord_1"},"currency":"INR","amount_minor":1000}`)
	if got := decode[Intent](t, b); status != http.StatusOK || got.ID != first.ID {
		t.Errorf("replay = %d %s, want 200 and intent %s", status, b, first.ID)
	}

	for name, other := range map[string]string{
		"amount":   `{"amount_minor": 1001, "currency": "INR", "metadata": {"order_id": "ord_1"}}`,
		"metadata": `{"amount_minor": 1000, "currency": "INR", "metadata": {"order_id": "ord_2"}}`,
		"currency": `{"amount_minor": 1000, "currency": "USD", "metadata": {"order_id": "ord_1"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			status, b := f.api(t, "POST", "/v1/intents", "same-key", other)
			if status != http.StatusConflict || errorCode(t, b) != "idempotency_conflict" {
				t.Errorf("same key, other %s = %d %s, want 409 idempotency_conflict", name, status, b)
			}
		})
	}
	if n := len(f.gw.Intents()); n != 1 {
		t.Errorf("intents after one create and replays = %d, want 1", n)
	}

	// A replay answers the intent as it is now.
	f.pay(t, first.ID)
	_, b = f.api(t, "POST", "/v1/intents", "same-key", body)
	if got := decode[Intent](t, b); got.Status != StatusSucceeded {
		t.Errorf("replay after paying: status %s, want succeeded", got.Status)
	}

	status, _ = f.api(t, "POST", "/v1/intents", "other-key", body)
	if status != http.StatusCreated || len(f.gw.Intents()) != 2 {
		t.Errorf("another key = %d with %d intents, want 201 and 2 intents", status, len(f.gw.Intents()))
	}
}

func TestUnauthorized(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	calls := []struct{ method, path, body string }{
		{"POST", "/v1/intents", `{"amount_minor": 1, "currency": "INR"}`},
		{"GET", "/v1/intents", ""},
		{"GET", "/v1/intents/" + in.ID, ""},
		{"POST", "/v1/intents/" + in.ID + "/refunds", `{}`},
	}
	auths := map[string]string{
		"none":         "",
		"wrong key":    "Bearer sk_wrong",
		"no scheme":    testAPIKey,
		"basic scheme": "Basic " + testAPIKey,
	}
	for _, c := range calls {
		for name, auth := range auths {
			t.Run(c.method+" "+c.path+" "+name, func(t *testing.T) {
				h := []string{"Idempotency-Key", "k"}
				if auth != "" {
					h = append(h, "Authorization", auth)
				}
				status, b := send(t, c.method, f.url+c.path, c.body, h...)
				if status != http.StatusUnauthorized || errorCode(t, b) != "unauthorized" {
					t.Errorf("%s %s with %s auth = %d %s, want 401 unauthorized", c.method, c.path, name, status, b)
				}
			})
		}
	}
	if n := len(f.gw.Intents()); n != 1 {
		t.Errorf("intents = %d, want 1", n)
	}
}

func TestCreateBadRequests(t *testing.T) {
	f := start(t, nil)
	tests := []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"no idempotency key", "", `{"amount_minor": 1, "currency": "INR"}`, 400, "missing_idempotency_key"},
		{"long idempotency key", strings.Repeat("k", 256), `{"amount_minor": 1, "currency": "INR"}`, 400, "bad_request"},
		{"empty body", "k", ``, 400, "bad_request"},
		{"not JSON", "k", `amount=1`, 400, "bad_request"},
		{"array", "k", `[1]`, 400, "bad_request"},
		{"null", "k", `null`, 400, "bad_request"},
		{"trailing data", "k", `{"amount_minor": 1, "currency": "INR"} {}`, 400, "bad_request"},
		{"unknown field", "k", `{"amount_minor": 1, "currency": "INR", "amount": 1}`, 400, "bad_request"},
		{"no amount", "k", `{"currency": "INR"}`, 400, "bad_request"},
		{"zero amount", "k", `{"amount_minor": 0, "currency": "INR"}`, 400, "bad_request"},
		{"negative amount", "k", `{"amount_minor": -5, "currency": "INR"}`, 400, "bad_request"},
		{"fractional amount", "k", `{"amount_minor": 1.5, "currency": "INR"}`, 400, "bad_request"},
		{"string amount", "k", `{"amount_minor": "100", "currency": "INR"}`, 400, "bad_request"},
		{"huge amount", "k", `{"amount_minor": 99999999999999999999, "currency": "INR"}`, 400, "bad_request"},
		{"no currency", "k", `{"amount_minor": 1}`, 400, "bad_request"},
		{"lower-case currency", "k", `{"amount_minor": 1, "currency": "inr"}`, 400, "bad_request"},
		{"long currency", "k", `{"amount_minor": 1, "currency": "INRR"}`, 400, "bad_request"},
		{"numeric metadata", "k", `{"amount_minor": 1, "currency": "INR", "metadata": {"n": 1}}`, 400, "bad_request"},
		{"metadata array", "k", `{"amount_minor": 1, "currency": "INR", "metadata": ["a"]}`, 400, "bad_request"},
		{"empty metadata key", "k", `{"amount_minor": 1, "currency": "INR", "metadata": {"": "x"}}`, 400, "bad_request"},
		{"long metadata value", "k", `{"amount_minor": 1, "currency": "INR", "metadata": {"a": "` + strings.Repeat("x", 501) + `"}}`, 400, "bad_request"},
		{"javascript return_url", "k", `{"amount_minor": 1, "currency": "INR", "return_url": "javascript:alert(1)"}`, 400, "bad_request"},
		{"relative return_url", "k", `{"amount_minor": 1, "currency": "INR", "return_url": "/orders/1"}`, 400, "bad_request"},
		{"body over 64 KiB", "k", `{"amount_minor": 1, "currency": "INR", "metadata": {"a": "` + strings.Repeat("x", 70<<10) + `"}}`, 413, "body_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := f.api(t, "POST", "/v1/intents", tt.key, tt.body)
			if status != tt.status || errorCode(t, b) != tt.code {
				t.Errorf("POST /v1/intents %s = %d %s, want %d %s", tt.body[:min(len(tt.body), 80)], status, b, tt.status, tt.code)
			}
		})
	}
	if n := len(f.gw.Intents()); n != 0 {
		t.Errorf("intents after bad requests = %d, want 0", n)
	}
	// A rejected request does not use up its key.
	if status, b := f.api(t, "POST", "/v1/intents", "k", `{"amount_minor": 1, "currency": "INR"}`); status != http.StatusCreated {
		t.Errorf("create with a key that only bad requests used = %d %s, want 201", status, b)
	}
}

func TestList(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	f := start(t, func(c *Config) { c.Clock = clk })
	var ids []string
	for _, order := range []string{"ord_a", "ord_b", "ord_c"} {
		ids = append(ids, f.create(t, order).ID)
		clk.Advance(time.Minute)
	}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"all", "", ids},
		{"since the first", "?created_since=2026-03-01T10:00:00Z", ids},
		{"since the second", "?created_since=2026-03-01T10:01:00Z", ids[1:]},
		{"between", "?created_since=2026-03-01T10:01:30Z", ids[2:]},
		{"other zone", "?created_since=2026-03-01T15:31:00%2B05:30", ids[1:]},
		{"future", "?created_since=2026-03-02T00:00:00Z", nil},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/intents", "/sandbox/intents"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				var status int
				var b []byte
				if path == "/v1/intents" {
					status, b = f.api(t, "GET", path+tt.query, "", "")
				} else {
					status, b = f.control(t, "GET", path+tt.query, "")
				}
				if status != http.StatusOK {
					t.Fatalf("GET %s%s = %d %s, want 200", path, tt.query, status, b)
				}
				if !strings.HasPrefix(string(b), `{"intents":[`) {
					t.Errorf("GET %s%s = %s, want an intents array", path, tt.query, b)
				}
				var got []string
				for _, in := range decode[map[string][]Intent](t, b)["intents"] {
					got = append(got, in.ID)
				}
				if strings.Join(got, ",") != strings.Join(tt.want, ",") {
					t.Errorf("GET %s%s = %v, want %v", path, tt.query, got, tt.want)
				}
			})
		}
	}
	status, b := f.api(t, "GET", "/v1/intents?created_since=yesterday", "", "")
	if status != http.StatusBadRequest || errorCode(t, b) != "bad_request" {
		t.Errorf("GET /v1/intents?created_since=yesterday = %d %s, want 400 bad_request", status, b)
	}
}

func TestFailureRate(t *testing.T) {
	f := start(t, func(c *Config) { c.FailureRate = 1 })
	for i := range 5 {
		status, b := f.api(t, "POST", "/v1/intents", "k", `{"amount_minor": 1, "currency": "INR"}`)
		if status != http.StatusServiceUnavailable || errorCode(t, b) != "unavailable" {
			t.Fatalf("create %d with FailureRate 1 = %d %s, want 503 unavailable", i, status, b)
		}
	}
	// Failures come before authentication, as from a real outage.
	if status, _ := send(t, "GET", f.url+"/v1/intents", ""); status != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/intents without a key = %d, want 503", status)
	}
	if n := len(f.gw.Intents()); n != 0 {
		t.Errorf("intents = %d, want 0", n)
	}
	// The sandbox endpoints are not the API: they keep working.
	if status, b := f.control(t, "GET", "/sandbox/intents", ""); status != http.StatusOK {
		t.Errorf("GET /sandbox/intents = %d %s, want 200", status, b)
	}
}

func TestFailureRateIsSeeded(t *testing.T) {
	outcomes := func() string {
		f := start(t, func(c *Config) { c.FailureRate = 0.5; c.Seed = 42 })
		var s strings.Builder
		for range 32 {
			status, _ := f.api(t, "GET", "/v1/intents", "", "")
			s.WriteString(map[int]string{200: "o", 503: "x"}[status])
		}
		return s.String()
	}
	a, b := outcomes(), outcomes()
	if a != b {
		t.Errorf("outcomes with seed 42 = %s then %s, want the same", a, b)
	}
	if !strings.Contains(a, "o") || !strings.Contains(a, "x") {
		t.Errorf("outcomes with FailureRate 0.5 = %s, want both successes and failures", a)
	}
}

func TestLatency(t *testing.T) {
	f := start(t, func(c *Config) { c.Latency = 50 * time.Millisecond })
	began := time.Now()
	status, _ := f.api(t, "GET", "/v1/intents", "", "")
	if took := time.Since(began); status != http.StatusOK || took < 50*time.Millisecond {
		t.Errorf("GET /v1/intents = %d after %v, want 200 after at least 50ms", status, took)
	}
	began = time.Now()
	send(t, "GET", f.url+"/healthz", "")
	if took := time.Since(began); took >= 50*time.Millisecond {
		t.Errorf("GET /healthz took %v, want no latency outside /v1", took)
	}
}

func TestRoutes(t *testing.T) {
	f := start(t, nil)
	status, b := send(t, "GET", f.url+"/healthz", "")
	if status != http.StatusOK || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("GET /healthz = %d %s, want 200 {\"status\":\"ok\"}", status, b)
	}
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/nowhere", 404, "not_found"},
		{"GET", "/v2/intents", 404, "not_found"},
		{"DELETE", "/v1/intents", 405, "method_not_allowed"},
		{"GET", "/sandbox/intents/pi_x/pay", 405, "method_not_allowed"},
		{"GET", "/sandbox/nowhere", 404, "not_found"},
		{"POST", "/healthz", 405, "method_not_allowed"},
		{"POST", "/sandbox/intents/pi_000000000000000000000000/pay", 404, "unknown_intent"},
		{"POST", "/sandbox/intents/pi_000000000000000000000000/fail", 404, "unknown_intent"},
		{"GET", "/sandbox/refunds/re_x/process", 405, "method_not_allowed"},
		{"DELETE", "/sandbox/refunds", 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, b := f.control(t, tt.method, tt.path, "") // TestSandboxAuth covers requests without it
			if status != tt.status || errorCode(t, b) != tt.code {
				t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, status, b, tt.status, tt.code)
			}
		})
	}
}

func TestPayAndFail(t *testing.T) {
	type step struct {
		action string // "pay" or "fail"
		status int
		code   string // error code, or "" for the intent's status below
		intent Status
	}
	tests := []struct {
		name   string
		steps  []step
		events []string
	}{
		{"pay", []step{{"pay", 200, "", StatusSucceeded}}, []string{EventPaymentSucceeded}},
		{"pay twice", []step{{"pay", 200, "", StatusSucceeded}, {"pay", 200, "", StatusSucceeded}}, []string{EventPaymentSucceeded}},
		{"fail", []step{{"fail", 200, "", StatusFailed}}, []string{EventPaymentFailed}},
		{"fail twice", []step{{"fail", 200, "", StatusFailed}, {"fail", 200, "", StatusFailed}}, []string{EventPaymentFailed}},
		{"pay after fail", []step{{"fail", 200, "", StatusFailed}, {"pay", 409, "intent_failed", StatusFailed}}, []string{EventPaymentFailed}},
		{"fail after pay", []step{{"pay", 200, "", StatusSucceeded}, {"fail", 409, "intent_succeeded", StatusSucceeded}}, []string{EventPaymentSucceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, nil)
			in := f.create(t, "ord_1")
			for _, s := range tt.steps {
				status, b := f.control(t, "POST", "/sandbox/intents/"+in.ID+"/"+s.action, "")
				if status != s.status {
					t.Fatalf("%s = %d %s, want %d", s.action, status, b, s.status)
				}
				if s.code != "" {
					if code := errorCode(t, b); code != s.code {
						t.Errorf("%s: error %s, want %s", s.action, code, s.code)
					}
				} else if got := decode[Intent](t, b); got.Status != s.intent {
					t.Errorf("%s: status %s, want %s", s.action, got.Status, s.intent)
				}
				if got, _ := f.gw.Intent(in.ID); got.Status != s.intent {
					t.Errorf("after %s: stored status %s, want %s", s.action, got.Status, s.intent)
				}
			}
			var types []string
			for _, e := range f.eventsOf(in.ID) {
				types = append(types, e.Type)
			}
			if strings.Join(types, ",") != strings.Join(tt.events, ",") {
				t.Errorf("events = %v, want %v", types, tt.events)
			}
		})
	}
}

func TestGoMethods(t *testing.T) {
	f := start(t, nil)
	a, b := f.create(t, "ord_a"), f.create(t, "ord_b")
	if got, err := f.gw.Pay(a.ID); err != nil || got.Status != StatusSucceeded {
		t.Errorf("Pay(%s) = %s, %v, want succeeded", a.ID, got.Status, err)
	}
	if _, err := f.gw.Fail(a.ID); err != ErrIntentSucceeded {
		t.Errorf("Fail(paid) error = %v, want ErrIntentSucceeded", err)
	}
	if got, err := f.gw.Fail(b.ID); err != nil || got.Status != StatusFailed {
		t.Errorf("Fail(%s) = %s, %v, want failed", b.ID, got.Status, err)
	}
	if _, err := f.gw.Pay(b.ID); err != ErrIntentFailed {
		t.Errorf("Pay(failed) error = %v, want ErrIntentFailed", err)
	}
	if _, err := f.gw.Pay("pi_nope"); err != ErrUnknownIntent {
		t.Errorf("Pay(unknown) error = %v, want ErrUnknownIntent", err)
	}
	// What the Go methods return is a copy.
	in, _ := f.gw.Intent(a.ID)
	in.Metadata["order_id"] = "changed"
	if again, _ := f.gw.Intent(a.ID); again.Metadata["order_id"] != "ord_a" {
		t.Errorf("changing a returned intent changed the stored one: %v", again.Metadata)
	}
}

func TestRefunds(t *testing.T) {
	f := start(t, nil)
	refund := func(t *testing.T, id, key, body string) (int, []byte) {
		t.Helper()
		return f.api(t, "POST", "/v1/intents/"+id+"/refunds", key, body)
	}

	t.Run("full by default", func(t *testing.T) {
		in := f.create(t, "ord_full")
		f.pay(t, in.ID)
		status, b := refund(t, in.ID, "r1", "")
		if status != http.StatusCreated {
			t.Fatalf("refund = %d %s, want 201", status, b)
		}
		re := decode[Refund](t, b)
		if !refundIDRE.MatchString(re.ID) || re.IntentID != in.ID || re.AmountMinor != 1000 || re.Status != "succeeded" {
			t.Errorf("refund = %+v, want re_..., intent %s, 1000, succeeded", re, in.ID)
		}
		status, b = refund(t, in.ID, "r2", `{}`)
		if status != http.StatusConflict || errorCode(t, b) != "refund_exceeds_amount" {
			t.Errorf("refund of a fully refunded intent = %d %s, want 409 refund_exceeds_amount", status, b)
		}
		got, _ := f.gw.Intent(in.ID)
		if got.Status != StatusSucceeded || len(got.Refunds) != 1 || got.Refunds[0] != re {
			t.Errorf("intent after refund = %s with refunds %+v, want succeeded with %+v", got.Status, got.Refunds, re)
		}
	})

	t.Run("partial", func(t *testing.T) {
		in := f.create(t, "ord_partial")
		f.pay(t, in.ID)
		steps := []struct {
			key, body string
			status    int
			code      string
			amount    int64
		}{
			{"p1", `{"amount_minor": 300}`, 201, "", 300},
			{"p2", `{"amount_minor": 701}`, 409, "refund_exceeds_amount", 0},
			{"p3", `{"amount_minor": 0}`, 400, "bad_request", 0},
			{"p4", `{"amount_minor": -1}`, 400, "bad_request", 0},
			{"p5", `{"amount_minor": "1"}`, 400, "bad_request", 0},
			{"p6", `{"amount": 1}`, 400, "bad_request", 0},
			{"", `{"amount_minor": 1}`, 400, "missing_idempotency_key", 0},
			{"p1", `{"amount_minor": 300}`, 200, "", 300},                   // replay
			{"p1", `{"amount_minor": 301}`, 409, "idempotency_conflict", 0}, // same key, other amount
			{"p1", ``, 409, "idempotency_conflict", 0},                      // same key, the rest
			{"p7", ``, 201, "", 700},                                        // the rest
			{"p8", `{"amount_minor": 1}`, 409, "refund_exceeds_amount", 0},  // nothing left
			{"p7", ``, 200, "", 700},                                        // replay after all is refunded
		}
		ids := map[string]string{}
		for _, s := range steps {
			status, b := refund(t, in.ID, s.key, s.body)
			if status != s.status {
				t.Fatalf("refund key %q body %s = %d %s, want %d", s.key, s.body, status, b, s.status)
			}
			if s.code != "" {
				if code := errorCode(t, b); code != s.code {
					t.Errorf("refund key %q body %s: error %s, want %s", s.key, s.body, code, s.code)
				}
				continue
			}
			re := decode[Refund](t, b)
			if re.AmountMinor != s.amount {
				t.Errorf("refund key %q: amount %d, want %d", s.key, re.AmountMinor, s.amount)
			}
			if prev, ok := ids[s.key]; ok && prev != re.ID {
				t.Errorf("replay of key %q = refund %s, want %s", s.key, re.ID, prev)
			}
			ids[s.key] = re.ID
		}
		got, _ := f.gw.Intent(in.ID)
		if len(got.Refunds) != 2 {
			t.Errorf("refunds = %+v, want 2", got.Refunds)
		}
		var types []string
		for _, e := range f.eventsOf(in.ID) {
			types = append(types, e.Type)
		}
		if want := "payment_intent.succeeded,refund.succeeded,refund.succeeded"; strings.Join(types, ",") != want {
			t.Errorf("events = %v, want %s", types, want)
		}
	})

	t.Run("key used on another intent", func(t *testing.T) {
		a, b := f.create(t, "ord_k1"), f.create(t, "ord_k2")
		f.pay(t, a.ID)
		f.pay(t, b.ID)
		if status, body := refund(t, a.ID, "shared", ""); status != http.StatusCreated {
			t.Fatalf("refund a = %d %s, want 201", status, body)
		}
		status, body := refund(t, b.ID, "shared", "")
		if status != http.StatusConflict || errorCode(t, body) != "idempotency_conflict" {
			t.Errorf("refund b with a's key = %d %s, want 409 idempotency_conflict", status, body)
		}
	})

	t.Run("not succeeded", func(t *testing.T) {
		open := f.create(t, "ord_open")
		failed := f.create(t, "ord_failed")
		if _, err := f.gw.Fail(failed.ID); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{open.ID, failed.ID} {
			status, b := refund(t, id, "n-"+id, "")
			if status != http.StatusConflict || errorCode(t, b) != "intent_not_succeeded" {
				t.Errorf("refund %s = %d %s, want 409 intent_not_succeeded", id, status, b)
			}
		}
		status, b := refund(t, "pi_000000000000000000000000", "n-unknown", "")
		if status != http.StatusNotFound || errorCode(t, b) != "unknown_intent" {
			t.Errorf("refund an unknown intent = %d %s, want 404 unknown_intent", status, b)
		}
	})

	t.Run("webhook", func(t *testing.T) {
		in := f.create(t, "ord_hook")
		f.pay(t, in.ID)
		_, b := refund(t, in.ID, "w1", `{"amount_minor": 250}`)
		re := decode[Refund](t, b)
		testenv.Eventually(t, 5*time.Second, "the refund webhook", func() bool {
			for _, r := range f.hooks.requests() {
				if strings.Contains(string(r.body), re.ID) {
					return true
				}
			}
			return false
		})
		for _, r := range f.hooks.requests() {
			p := decode[WebhookPayload](t, r.body)
			if p.Type != EventRefundSucceeded || p.Data.Intent.ID != in.ID {
				continue
			}
			if p.Data.Refund == nil || *p.Data.Refund != re {
				t.Errorf("refund.succeeded data.refund = %+v, want %+v", p.Data.Refund, re)
			}
			if len(p.Data.Intent.Refunds) != 1 || p.Data.Intent.Refunds[0].ID != re.ID {
				t.Errorf("refund.succeeded data.intent.refunds = %+v, want the refund", p.Data.Intent.Refunds)
			}
			if strings.Contains(string(r.body), `"refund":null`) {
				t.Errorf("body %s has a null refund", r.body)
			}
			return
		}
		t.Errorf("no refund.succeeded webhook for %s", in.ID)
	})
}

func TestJSONShapes(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	_, b := f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"intent_id", "status", "amount_minor", "currency", "metadata", "pay_url", "return_url", "created_at", "updated_at", "refunds"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("intent %s lacks %q", b, k)
		}
	}
	if len(fields) != 10 {
		t.Errorf("intent %s has %d fields, want 10", b, len(fields))
	}
	// A paid intent adds its payer.
	f.pay(t, in.ID)
	_, b = f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	var paid map[string]json.RawMessage
	if err := json.Unmarshal(b, &paid); err != nil {
		t.Fatal(err)
	}
	if _, ok := paid["payer"]; !ok || len(paid) != 11 {
		t.Errorf("paid intent %s has %d fields, want 11 with payer", b, len(paid))
	}
	var created string
	_ = json.Unmarshal(fields["created_at"], &created)
	if _, err := time.Parse(time.RFC3339Nano, created); err != nil || !strings.HasSuffix(created, "Z") {
		t.Errorf("created_at = %q, want an RFC 3339 UTC time", created)
	}
}

// Every JSON answer, errors and 401s included, says nosniff.
func TestJSONNosniff(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	calls := []struct {
		name, method, path string
		headers            []string
	}{
		{"healthz", "GET", "/healthz", nil},
		{"API", "GET", "/v1/intents/" + in.ID, []string{"Authorization", "Bearer " + testAPIKey}},
		{"API 401", "GET", "/v1/intents", nil},
		{"sandbox", "GET", "/sandbox/intents", []string{"Authorization", "Bearer " + testControlToken}},
		{"sandbox 401", "GET", "/sandbox/intents", nil},
		{"pay with the pay key", "POST", "/sandbox/intents/" + in.ID + "/pay", []string{"Authorization", "Bearer " + payKey(t, in)}},
		{"404", "GET", "/nowhere", nil},
	}
	for _, c := range calls {
		status, h, b := sendFull(t, c.method, f.url+c.path, "", c.headers...)
		if h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %s %s = %d %s with Content-Type %q, X-Content-Type-Options %q; want application/json, nosniff",
				c.name, c.method, c.path, status, b, h.Get("Content-Type"), h.Get("X-Content-Type-Options"))
		}
	}
}
