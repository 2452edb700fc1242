package sandboxgateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testAPIKey       = "sk_test_123"
	testControlToken = "ctl_test_0123456789abcdef"
)

// testSecrets are two webhook secrets, as during a rotation.
var testSecrets = []string{"whsec_new", "whsec_old"}

// fixture is a gateway served over real HTTP and a webhook receiver.
type fixture struct {
	gw    *Gateway
	url   string // the gateway's base URL
	hooks *receiver
}

// start serves a gateway whose webhooks go to a fresh receiver, with quick
// retries and a fixed seed; edit adjusts the config. Both stop in
// t.Cleanup, the gateway's deliveries first.
func start(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	hooks := newReceiver(t)
	cfg := Config{
		APIKey:          testAPIKey,
		ControlToken:    testControlToken,
		WebhookURL:      hooks.url,
		WebhookSecrets:  testSecrets,
		RetryBase:       time.Millisecond,
		RetryMax:        4 * time.Millisecond,
		DeliveryTimeout: 5 * time.Second,
		Seed:            1,
	}
	if edit != nil {
		edit(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(gw)
	if err := gw.SetPublicURL(srv.URL); err != nil {
		t.Fatalf("SetPublicURL(%q): %v", srv.URL, err)
	}
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := gw.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{gw: gw, url: srv.URL, hooks: hooks}
}

// send makes a request with body ("" for none) and the headers given as
// name, value pairs, and returns the status and body of the answer.
func send(t *testing.T, method, url, body string, headers ...string) (int, []byte) {
	t.Helper()
	status, _, b := sendFull(t, method, url, body, headers...)
	return status, b
}

// sendFull is send that also returns the answer's header.
func sendFull(t *testing.T, method, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer of %s %s: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// api calls a /v1 endpoint with the API key and, unless key is "", an
// Idempotency-Key.
func (f *fixture) api(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	h := []string{"Authorization", "Bearer " + testAPIKey}
	if key != "" {
		h = append(h, "Idempotency-Key", key)
	}
	return send(t, method, f.url+path, body, h...)
}

// control calls a /sandbox endpoint with the control token.
func (f *fixture) control(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	return send(t, method, f.url+path, body, "Authorization", "Bearer "+testControlToken)
}

// payKey is the pay key in an intent's pay_url.
func payKey(t *testing.T, in Intent) string {
	t.Helper()
	key, ok := in.PayKey()
	if !ok {
		t.Fatalf("pay_url %q has no #key=", in.PayURL)
	}
	return key
}

// create creates an intent for 1000 INR minor units of order orderID and
// returns it.
func (f *fixture) create(t *testing.T, orderID string) Intent {
	t.Helper()
	status, b := f.api(t, "POST", "/v1/intents", "create-"+orderID,
		`{"amount_minor": 1000, "currency": "INR", "metadata": {"order_id": "`+orderID+`"}}`)
	if status != http.StatusCreated {
		t.Fatalf("create intent for %s = %d %s, want 201", orderID, status, b)
	}
	return decode[Intent](t, b)
}

// pay pays intent id through the sandbox endpoint, with the control token.
func (f *fixture) pay(t *testing.T, id string) Intent {
	t.Helper()
	status, b := f.control(t, "POST", "/sandbox/intents/"+id+"/pay", "")
	if status != http.StatusOK {
		t.Fatalf("pay %s = %d %s, want 200", id, status, b)
	}
	return decode[Intent](t, b)
}

// decode unmarshals b into a T.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// errorCode returns the error code of an error body, failing the test when
// the body is not {"error": ..., "message": ...}.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	e := decode[map[string]string](t, b)
	if e["error"] == "" || e["message"] == "" {
		t.Fatalf("error body %s lacks error or message", b)
	}
	return e["error"]
}

// eventsOf returns the recorded events about intent id.
func (f *fixture) eventsOf(id string) []Event {
	var out []Event
	for _, e := range f.gw.Events() {
		if e.IntentID == id {
			out = append(out, e)
		}
	}
	return out
}

// received is one webhook request.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint that records what it gets.
type receiver struct {
	url string

	mu     sync.Mutex // guards got and answer
	got    []received
	answer func(n int) int // status for the nth request, from 1
}

// newReceiver serves a receiver that answers 200 until told otherwise.
func newReceiver(t *testing.T) *receiver {
	rc := &receiver{answer: func(int) int { return http.StatusOK }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: b})
		status := rc.answer(len(rc.got))
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hooks"
	return rc
}

// answerWith sets the status of the nth request.
func (rc *receiver) answerWith(f func(n int) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

// requests returns what the receiver got so far.
func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// verifySignature checks a Payment-Signature header the way a merchant
// would, without Sign: it returns t and reports whether a v1 entry matches
// the HMAC-SHA256 of "<t>.<body>" under secret.
func verifySignature(header string, body []byte, secret string) (time.Time, bool) {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	want := m.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return time.Unix(sec, 0), true
		}
	}
	return time.Unix(sec, 0), false
}
