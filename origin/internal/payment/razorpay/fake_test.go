package razorpay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

// fakeRazorpay is Razorpay's API as its documentation describes it (the
// pages named in testdata/README.md), for the endpoints the adapter uses:
// it checks each request's method, path, basic auth, fields and their
// types and limits, refuses what the pages say Razorpay refuses, and
// answers the documented examples with the request's values filled in.
type fakeRazorpay struct {
	t      *testing.T
	srv    *httptest.Server
	keyID  string
	secret string

	clk *clock.Fake // the fake's time and the provider's

	mu sync.Mutex
	// Everything below is guarded by mu.
	seq          int
	links        map[string]map[string]any // by id
	linkOrder    []string
	payments     map[string]map[string]any // by id
	paymentOrder []string
	refunds      map[string][]map[string]any // by payment id
	idem         map[string]idemRecord       // X-Refund-Idempotency → first request
	refundStatus string                      // what a new refund is: processed, pending or failed
	faults       []fault                     // answers to give next, in order
	requests     []recorded
}

type idemRecord struct {
	body   string
	refund map[string]any
}

// fault is one injected answer: status with description; lost means the
// request is carried out first and only its answer fails. A fault of
// status passThrough lets its request through.
type fault struct {
	status      int
	description string
	lost        bool
}

const passThrough = 0

type recorded struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

var fakeEpoch = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func newFake(t *testing.T) *fakeRazorpay {
	t.Helper()
	f := &fakeRazorpay{
		t: t, keyID: "rzp_test_1DP5mmOlF5G5ag", secret: "thisisasecret",
		clk:          clock.NewFake(fakeEpoch),
		links:        map[string]map[string]any{},
		payments:     map[string]map[string]any{},
		refunds:      map[string][]map[string]any{},
		idem:         map[string]idemRecord{},
		refundStatus: "processed",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payment_links", f.createLink)
	mux.HandleFunc("GET /v1/payment_links", f.listLinks)
	mux.HandleFunc("GET /v1/payment_links/{id}", f.fetchLink)
	mux.HandleFunc("POST /v1/payment_links/{id}/cancel", f.cancelLink)
	mux.HandleFunc("GET /v1/payments", f.listPayments)
	mux.HandleFunc("GET /v1/payments/{id}", f.fetchPayment)
	mux.HandleFunc("GET /v1/payments/{id}/refunds", f.listRefunds)
	mux.HandleFunc("POST /v1/payments/{id}/refund", f.createRefund)
	f.srv = httptest.NewServer(f.front(mux))
	t.Cleanup(f.srv.Close)
	f.passPauses(t)
	return f
}

// provider is a Provider of the fake, on its clock, with quick retries.
func (f *fakeRazorpay) provider(secrets ...[]byte) *Provider {
	return New(Config{
		KeyID: f.keyID, KeySecret: f.secret, BaseURL: f.srv.URL, WebhookSecrets: secrets,
		Attempts: 3, Backoff: time.Millisecond, Clock: f.clk,
	})
}

func (f *fakeRazorpay) clock() time.Time { return f.clk.Now() }

func (f *fakeRazorpay) advance(d time.Duration) { f.clk.Advance(d) }

// passPauses moves the clock through each pause a provider on it waits
// between attempts (its only timers), until the test ends.
func (f *fakeRazorpay) passPauses(t *testing.T) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			armed := f.clk.Armed()
			for f.clk.Waiting() > 0 {
				f.clk.Advance(time.Millisecond)
			}
			select {
			case <-done:
				return
			case <-armed:
			}
		}
	}()
}

// inject queues answers to give before any real one.
func (f *fakeRazorpay) inject(fs ...fault) {
	f.mu.Lock()
	f.faults = append(f.faults, fs...)
	f.mu.Unlock()
}

// calls counts the requests made with method to path.
func (f *fakeRazorpay) calls(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

func (f *fakeRazorpay) lastRequest(method, path string) recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if r := f.requests[i]; r.Method == method && r.Path == path {
			return r
		}
	}
	f.t.Fatalf("no %s %s was made", method, path)
	return recorded{}
}

// requestLines are the requests made so far, each as "METHOD path".
func (f *fakeRazorpay) requestLines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// forget drops the requests recorded so far.
func (f *fakeRazorpay) forget() {
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()
}

// front records each request, checks its basic auth (Razorpay answers a
// wrong key "The api key provided is invalid") and gives injected faults.
func (f *fakeRazorpay) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := readAll(r)
		f.mu.Lock()
		f.requests = append(f.requests, recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
		var ft *fault
		if len(f.faults) > 0 {
			if f.faults[0].status != passThrough {
				ft = &f.faults[0]
			}
			f.faults = f.faults[1:]
		}
		f.mu.Unlock()
		r.Body = readCloser(body)
		if id, secret, ok := r.BasicAuth(); !ok || id != f.keyID || secret != f.secret {
			apiError(w, http.StatusUnauthorized, "The api key provided is invalid", "")
			return
		}
		if r.Method == http.MethodPost && len(body) > 0 && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			apiError(w, http.StatusBadRequest, "content type must be application/json", "")
			return
		}
		if ft != nil && !ft.lost {
			apiError(w, ft.status, ft.description, "")
			return
		}
		if ft != nil {
			next.ServeHTTP(httptest.NewRecorder(), r)
			apiError(w, ft.status, ft.description, "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// apiError answers Razorpay's error shape (testdata/error_refund_amount.json).
func apiError(w http.ResponseWriter, status int, description, field string) {
	e := map[string]any{"code": "BAD_REQUEST_ERROR", "description": description, "source": "business",
		"step": "payment_initiation", "reason": "input_validation_failed", "metadata": map[string]any{}}
	if status >= 500 {
		e["code"] = "SERVER_ERROR"
	}
	if field != "" {
		e["field"] = field
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fields decodes a JSON object body, refusing a key not in allowed.
func fields(body []byte, allowed ...string) (map[string]json.RawMessage, string) {
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, "the request body is not a JSON object: " + err.Error()
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, k + " is/are not required and should not be sent"
		}
	}
	return m, ""
}

// integer reads a JSON integer field (present: true).
func integer(m map[string]json.RawMessage, k string) (int64, bool, string) {
	raw, ok := m[k]
	if !ok {
		return 0, false, ""
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, true, "The " + k + " must be an integer."
	}
	return n, true, ""
}

func str(m map[string]json.RawMessage, k string) (string, bool, string) {
	raw, ok := m[k]
	if !ok {
		return "", false, ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", true, "The " + k + " must be a string."
	}
	return s, true, ""
}

func boolean(m map[string]json.RawMessage, k string) (bool, bool, string) {
	raw, ok := m[k]
	if !ok {
		return false, false, ""
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, true, "The " + k + " must be a boolean."
	}
	return b, true, ""
}

// notesField reads notes: an object of at most 15 string values of at most
// 255 characters.
func notesField(m map[string]json.RawMessage) (map[string]any, string) {
	raw, ok := m["notes"]
	if !ok {
		return nil, ""
	}
	var n map[string]string
	if json.Unmarshal(raw, &n) != nil {
		return nil, "notes must be an object of strings"
	}
	if len(n) > 15 {
		return nil, "notes can have at most 15 key-value pairs"
	}
	out := map[string]any{}
	for k, v := range n {
		if len(v) > 255 {
			return nil, "value: the length must not be greater than 255."
		}
		out[k] = v
	}
	return out, ""
}

// fixture reads a testdata file as a JSON object.
func fixture(t testing.TB, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, name), &m); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return m
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fakeRazorpay) nextID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_Fake%010d", prefix, f.seq)
}

// createLink is Create a Standard (or UPI) Payment Link.
func (f *fakeRazorpay) createLink(w http.ResponseWriter, r *http.Request) {
	body, _ := readAll(r)
	m, bad := fields(body, "amount", "currency", "accept_partial", "first_min_partial_amount", "upi_link", "description",
		"reference_id", "customer", "expire_by", "notify", "notes", "callback_url", "callback_method", "reminder_enable")
	if bad != "" {
		apiError(w, http.StatusBadRequest, "wrong input fields sent. "+bad, "")
		return
	}
	amount, ok, bad := integer(m, "amount")
	if bad != "" || !ok || amount <= 0 {
		apiError(w, http.StatusBadRequest, "The amount is required and must be a positive integer.", "amount")
		return
	}
	currency, hasCurrency, bad := str(m, "currency")
	if bad != "" || (hasCurrency && (len(currency) != 3 || strings.ToUpper(currency) != currency)) {
		apiError(w, http.StatusBadRequest, "The currency must be a three-letter ISO code.", "currency")
		return
	}
	if !hasCurrency {
		currency = "INR"
	}
	ref, _, bad := str(m, "reference_id")
	if bad != "" || len(ref) > 40 {
		apiError(w, http.StatusBadRequest, "The reference id may not be greater than 40 characters.", "reference_id")
		return
	}
	description, _, bad := str(m, "description")
	if bad != "" || len(description) > 2048 {
		apiError(w, http.StatusBadRequest, "The description may not be greater than 2048 characters.", "description")
		return
	}
	f.mu.Lock()
	now := f.clk.Now()
	f.mu.Unlock()
	expireBy, hasExpiry, bad := integer(m, "expire_by")
	switch {
	case bad != "":
		apiError(w, http.StatusBadRequest, bad, "expire_by")
		return
	case hasExpiry && expireBy < now.Add(15*time.Minute).Unix():
		apiError(w, http.StatusBadRequest, "timestamp must be atleast 15 minutes in future", "expire_by")
		return
	case hasExpiry && expireBy > now.AddDate(0, 6, 0).Unix():
		apiError(w, http.StatusBadRequest, "the expire by date cannot exceed six months from the date of creation", "expire_by")
		return
	}
	notes, bad := notesField(m)
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "notes")
		return
	}
	callbackURL, hasCallback, bad := str(m, "callback_url")
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "callback_url")
		return
	}
	if hasCallback {
		if u, err := url.Parse(callbackURL); err != nil || u.Scheme == "" || u.Host == "" {
			apiError(w, http.StatusBadRequest, "The callback url must be a valid URL.", "callback_url")
			return
		}
	}
	callbackMethod, hasMethod, bad := str(m, "callback_method")
	if bad != "" || (hasCallback && (!hasMethod || callbackMethod != "get")) || (hasMethod && !hasCallback) {
		apiError(w, http.StatusBadRequest, "callback_method must be get, with callback_url", "callback_method")
		return
	}
	upi, _, bad := boolean(m, "upi_link")
	if bad == "" {
		_, _, bad = boolean(m, "reminder_enable")
	}
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "")
		return
	}
	partial, _, _ := boolean(m, "accept_partial")
	if upi && currency != "INR" {
		apiError(w, http.StatusBadRequest, "upi is currently supported only in indian currency", "")
		return
	}
	if upi && partial {
		apiError(w, http.StatusBadRequest, "partial payment not supported in upi link", "")
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if ref != "" {
		for _, l := range f.links {
			if l["reference_id"] == ref {
				apiError(w, http.StatusBadRequest, "payment link creation with reference ID already attempted", "reference_id")
				return
			}
		}
	}
	l := fixture(f.t, "link_upi_created.json")
	id := f.nextID("plink")
	l["id"], l["amount"], l["amount_paid"], l["currency"] = id, amount, 0, currency
	l["reference_id"], l["description"], l["upi_link"] = ref, description, upi
	l["customer"], l["payments"], l["status"] = []any{}, nil, linkCreated
	l["created_at"], l["updated_at"], l["cancelled_at"], l["expired_at"] = now.Unix(), now.Unix(), 0, 0
	l["expire_by"] = expireBy
	l["notes"] = nil
	if notes != nil {
		l["notes"] = notes
	}
	if hasCallback {
		l["callback_url"], l["callback_method"] = callbackURL, callbackMethod
	}
	l["short_url"] = "https://rzp.io/i/" + strings.TrimPrefix(id, "plink_")
	f.links[id] = l
	f.linkOrder = append(f.linkOrder, id)
	writeJSON(w, http.StatusOK, l)
}

// listLinks is Fetch All Payment Links, filtered by its two documented
// parameters.
func (f *fakeRazorpay) listLinks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "payment_id" && k != "reference_id" {
			apiError(w, http.StatusBadRequest, k+" is/are not required and should not be sent", "")
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []any{}
	for _, id := range f.linkOrder {
		l := f.links[id]
		if ref := q.Get("reference_id"); q.Has("reference_id") && l["reference_id"] != ref {
			continue
		}
		if pid := q.Get("payment_id"); q.Has("payment_id") && !linkHasPayment(l, pid) {
			continue
		}
		out = append(out, l)
	}
	writeJSON(w, http.StatusOK, map[string]any{"payment_links": out})
}

func linkHasPayment(l map[string]any, pid string) bool {
	ps, _ := l["payments"].([]any)
	for _, p := range ps {
		if pm, _ := p.(map[string]any); pm["payment_id"] == pid {
			return true
		}
	}
	return false
}

func (f *fakeRazorpay) fetchLink(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[r.PathValue("id")]
	if !ok {
		apiError(w, http.StatusBadRequest, "The id provided does not exist", "")
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (f *fakeRazorpay) cancelLink(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[r.PathValue("id")]
	switch {
	case !ok:
		apiError(w, http.StatusBadRequest, "The id provided does not exist", "")
	case l["status"] != linkCreated:
		// "You can cancel a Payment Link only if it is in the issued state."
		apiError(w, http.StatusBadRequest, fmt.Sprintf("a payment link in the %v state cannot be cancelled", l["status"]), "")
	default:
		l["status"], l["cancelled_at"], l["updated_at"] = linkCancelled, f.clk.Now().Unix(), f.clk.Now().Unix()
		writeJSON(w, http.StatusOK, l)
	}
}

// page reads from, to, count and skip as Fetch All Payments documents them.
func page(w http.ResponseWriter, q url.Values) (from, to int64, count, skip int, ok bool) {
	for k := range q {
		if k != "from" && k != "to" && k != "count" && k != "skip" {
			apiError(w, http.StatusBadRequest, k+" is/are not required and should not be sent", "")
			return 0, 0, 0, 0, false
		}
	}
	from, to, count = 0, 1<<62, 10
	num := func(k string, dst *int64) bool {
		if !q.Has(k) {
			return true
		}
		n, err := strconv.ParseInt(q.Get(k), 10, 64)
		if err != nil {
			apiError(w, http.StatusBadRequest, "The "+k+" must be an integer.", k)
			return false
		}
		*dst = n
		return true
	}
	var c, s int64 = 10, 0
	if !num("from", &from) || !num("to", &to) || !num("count", &c) || !num("skip", &s) {
		return 0, 0, 0, 0, false
	}
	if q.Has("from") && (from < 946684800 || from > 4765046400) {
		apiError(w, http.StatusBadRequest, "from must be between 946684800 and 4765046400", "from")
		return 0, 0, 0, 0, false
	}
	if c < 1 || c > 100 {
		apiError(w, http.StatusBadRequest, "The count may not be greater than 100.", "count")
		return 0, 0, 0, 0, false
	}
	return from, to, int(c), int(s), true
}

// listPayments is Fetch All Payments, newest first ("the last 10 records").
func (f *fakeRazorpay) listPayments(w http.ResponseWriter, r *http.Request) {
	from, to, count, skip, ok := page(w, r.URL.Query())
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []any
	for i := len(f.paymentOrder) - 1; i >= 0; i-- {
		p := f.payments[f.paymentOrder[i]]
		if at := num(p["created_at"]); at >= from && at <= to {
			all = append(all, p)
		}
	}
	items := window(all, skip, count)
	writeJSON(w, http.StatusOK, map[string]any{"entity": "collection", "count": len(items), "items": items})
}

// fetchPayment is Fetch a Payment With ID
// (https://razorpay.com/docs/api/payments/fetch-with-id): GET
// /v1/payments/:id, the payment's id its one (path) parameter, answers the
// payment entity as stored (its examples are captured payments by
// netbanking, UPI with vpa and upi.vpa, card, wallet and pay later); an id
// that is not a payment is 400 BAD_REQUEST_ERROR "The id provided does not
// exist". The page takes no query: expand[] belongs to the Fetch a Payment
// (With Expanded …) pages, which the adapter does not use.
func (f *fakeRazorpay) fetchPayment(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		apiError(w, http.StatusBadRequest, k+" is/are not required and should not be sent", "")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.payments[r.PathValue("id")]
	if !ok {
		apiError(w, http.StatusBadRequest, "The id provided does not exist", "")
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// listRefunds is Fetch Multiple Refunds for a Payment.
func (f *fakeRazorpay) listRefunds(w http.ResponseWriter, r *http.Request) {
	from, to, count, skip, ok := page(w, r.URL.Query())
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.payments[r.PathValue("id")]; !ok {
		apiError(w, http.StatusBadRequest, "The id provided does not exist", "")
		return
	}
	var all []any
	for _, rf := range f.refunds[r.PathValue("id")] {
		if at := num(rf["created_at"]); at >= from && at <= to {
			all = append(all, rf)
		}
	}
	items := window(all, skip, count)
	writeJSON(w, http.StatusOK, map[string]any{"entity": "collection", "count": len(items), "items": items})
}

func window(all []any, skip, count int) []any {
	if skip >= len(all) {
		return []any{}
	}
	return all[skip:min(len(all), skip+count)]
}

// createRefund is Create a Normal Refund, idempotent under
// X-Refund-Idempotency.
func (f *fakeRazorpay) createRefund(w http.ResponseWriter, r *http.Request) {
	body, _ := readAll(r)
	m, bad := fields(body, "amount", "speed", "notes", "receipt")
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "")
		return
	}
	amount, hasAmount, bad := integer(m, "amount")
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "amount")
		return
	}
	speed, hasSpeed, bad := str(m, "speed")
	if bad != "" || (hasSpeed && speed != "normal" && speed != "optimum") {
		apiError(w, http.StatusBadRequest, "The selected speed is invalid.", "speed")
		return
	}
	receipt, hasReceipt, bad := str(m, "receipt")
	if bad != "" {
		apiError(w, http.StatusBadRequest, bad, "receipt")
		return
	}
	if _, bad := notesField(m); bad != "" {
		apiError(w, http.StatusBadRequest, bad, "notes")
		return
	}
	key := r.Header.Get("X-Refund-Idempotency")
	if r.Header.Values("X-Refund-Idempotency") != nil {
		if len(key) < 10 {
			apiError(w, http.StatusBadRequest, "The idempotency key must be at least 10 characters long.", "")
			return
		}
		for _, c := range key {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				apiError(w, http.StatusBadRequest, "The idempotency key must only contain alphanumeric characters, underscores, and hyphens", "")
				return
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pid := r.PathValue("id")
	if key != "" {
		if rec, ok := f.idem[key]; ok {
			if rec.body != pid+" "+string(body) {
				apiError(w, http.StatusConflict, "Different request with the same idempotency key has already been processed.", "")
				return
			}
			writeJSON(w, http.StatusOK, rec.refund)
			return
		}
	}
	p, ok := f.payments[pid]
	if !ok {
		apiError(w, http.StatusBadRequest, pid+" is not a valid id", "")
		return
	}
	if p["status"] != paymentCaptured && p["status"] != paymentRefunded {
		apiError(w, http.StatusBadRequest, "Refunds can be made only on captured payments", "")
		return
	}
	paid, refunded := num(p["amount"]), num(p["amount_refunded"])
	if !hasAmount {
		amount = paid // "the entire payment amount will be refunded"
	}
	switch {
	case refunded >= paid:
		apiError(w, http.StatusBadRequest, "The payment has been fully refunded already.", "")
		return
	case amount < 100:
		apiError(w, http.StatusBadRequest, "The amount must be at least INR 1.00", "amount")
		return
	case amount > paid-refunded:
		apiError(w, http.StatusBadRequest, "The refund amount provided is greater than amount captured.", "amount")
		return
	}
	rf := fixture(f.t, "refund_create_idempotent.json")
	rf["id"], rf["amount"], rf["currency"], rf["payment_id"] = f.nextID("rfnd"), amount, p["currency"], pid
	rf["receipt"], rf["created_at"], rf["status"] = nil, f.clk.Now().Unix(), f.refundStatus
	if hasReceipt {
		rf["receipt"] = receipt
	}
	if !hasSpeed {
		speed = "normal"
	}
	rf["speed_requested"], rf["speed_processed"] = speed, "normal"
	f.refunds[pid] = append(f.refunds[pid], rf)
	if f.refundStatus != refundFailed {
		setRefunded(p, refunded+amount)
	}
	if key != "" {
		f.idem[key] = idemRecord{body: pid + " " + string(body), refund: rf}
	}
	writeJSON(w, http.StatusOK, rf)
}

// pay makes a captured payment of link id (method "upi" with vpa, or
// "card"), as the payment_link.paid payment entity documents it, and
// marks the link paid. It returns the payment's id.
func (f *fakeRazorpay) pay(id, method, vpa string) string {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[id]
	if !ok {
		f.t.Fatalf("pay: no link %s", id)
	}
	ev := fixture(f.t, "webhook_payment_link_paid_upi.json")
	p := ev["payload"].(map[string]any)["payment"].(map[string]any)["entity"].(map[string]any)
	pid := f.nextID("pay")
	amount := num(l["amount"])
	p["id"], p["amount"], p["base_amount"], p["currency"], p["method"] = pid, amount, amount, l["currency"], method
	p["order_id"], p["created_at"], p["notes"] = "order_"+strings.TrimPrefix(id, "plink_"), f.clk.Now().Unix(), l["notes"]
	p["status"], p["captured"], p["amount_refunded"], p["refund_status"] = paymentCaptured, true, 0, nil
	if method == "upi" {
		p["vpa"] = vpa
		p["upi"].(map[string]any)["vpa"] = vpa
	} else {
		p["vpa"], p["upi"], p["card_id"] = nil, nil, "card_"+strings.TrimPrefix(pid, "pay_")
	}
	f.payments[pid] = p
	f.paymentOrder = append(f.paymentOrder, pid)
	l["status"], l["amount_paid"], l["updated_at"] = linkPaid, amount, f.clk.Now().Unix()
	l["payments"] = []any{map[string]any{"amount": amount, "created_at": f.clk.Now().Unix(), "method": method,
		"payment_id": pid, "plink_id": id, "status": paymentCaptured, "updated_at": f.clk.Now().Unix()}}
	return pid
}

// failPayment records a failed payment made on no link.
func (f *fakeRazorpay) failPayment() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := fixture(f.t, "webhook_payment_failed_upi.json")
	p := ev["payload"].(map[string]any)["payment"].(map[string]any)["entity"].(map[string]any)
	p["id"], p["created_at"] = f.nextID("pay"), f.clk.Now().Unix()
	f.payments[p["id"].(string)] = p
	f.paymentOrder = append(f.paymentOrder, p["id"].(string))
	return p["id"].(string)
}

// seed stores a link, a payment and the payment's refunds as given.
func (f *fakeRazorpay) seed(l, p map[string]any, refunds ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l != nil {
		f.links[l["id"].(string)] = l
		f.linkOrder = append(f.linkOrder, l["id"].(string))
	}
	if p != nil {
		pid := p["id"].(string)
		f.payments[pid] = p
		f.paymentOrder = append(f.paymentOrder, pid)
		f.refunds[pid] = append(f.refunds[pid], refunds...)
	}
}

func (f *fakeRazorpay) setRefundStatus(s string) {
	f.mu.Lock()
	f.refundStatus = s
	f.mu.Unlock()
}

// settleRefunds processes every pending refund.
func (f *fakeRazorpay) settleRefunds() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rs := range f.refunds {
		for _, r := range rs {
			if r["status"] == refundPending {
				r["status"] = refundProcessed
			}
		}
	}
}

// failRefunds fails every pending refund. A failed refund gives nothing
// back, and its amount may be refunded again: the payment's
// amount_refunded no longer counts it (Razorpay's pages do not say so;
// it is the adapter's reading, without which no refund could follow a
// failed one).
func (f *fakeRazorpay) failRefunds() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for pid, rs := range f.refunds {
		for _, r := range rs {
			if r["status"] == refundPending {
				r["status"] = refundFailed
				p := f.payments[pid]
				setRefunded(p, num(p["amount_refunded"])-num(r["amount"]))
			}
		}
	}
}

// setRefunded sets a payment's amount_refunded, and its refund_status and
// status to match (refunded once all of it is).
func setRefunded(p map[string]any, amount int64) {
	p["amount_refunded"], p["refund_status"], p["status"] = amount, nil, paymentCaptured
	switch {
	case amount >= num(p["amount"]):
		p["refund_status"], p["status"] = "full", paymentRefunded
	case amount > 0:
		p["refund_status"] = "partial"
	}
}

func (f *fakeRazorpay) linkCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.links)
}

func (f *fakeRazorpay) refundCount(pid string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.refunds[pid])
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

func readAll(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	return io.ReadAll(r.Body)
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
