package stripepay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v82"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// What stripe-mock v0.203.0 answers whatever is asked (its fixtures).
const (
	mockSessionID = "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY"
	mockPIID      = "pi_1PgafyB7WZ01zgkWSjxsAJo3"
	mockPayer     = "card:AOB934RVNwzk6xtn"
	mockRefundID  = "re_1Pgc72B7WZ01zgkWqPvrRrPE"
	mockChargeID  = "ch_1PgafuB7WZ01zgkWXYmPNZs8"
)

var testNow = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// newMocked returns a Provider of stripe-mock, through a recorder, with
// cfg's other settings.
func newMocked(t *testing.T, cfg Config) (*Provider, *recorder) {
	t.Helper()
	rec := record(t, stripeMock(t))
	cfg.SecretKey, cfg.BaseURL = testKey, rec.URL
	if cfg.Clock == nil {
		cfg.Clock = clock.NewFake(testNow)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

// only checks that exactly the wanted calls were made, each taken by
// stripe-mock (200), and returns them.
func only(t *testing.T, rec *recorder, want ...string) []sent {
	t.Helper()
	got := rec.requests()
	var calls []string
	for _, s := range got {
		calls = append(calls, s.Method+" "+s.Path)
		if s.Status != http.StatusOK {
			t.Errorf("stripe-mock answered %s %s with %d, want 200", s.Method, s.Path, s.Status)
		}
	}
	if !reflect.DeepEqual(calls, want) && !(len(calls) == 0 && len(want) == 0) {
		t.Fatalf("calls = %q, want %q", calls, want)
	}
	return got
}

func checkForm(t *testing.T, s sent, want map[string]string, absent ...string) {
	t.Helper()
	for k, v := range want {
		if got := s.Form.Get(k); got != v {
			t.Errorf("%s %s: %s = %q, want %q", s.Method, s.Path, k, got, v)
		}
	}
	for _, k := range absent {
		if s.Form.Has(k) {
			t.Errorf("%s %s: %s = %q, want none", s.Method, s.Path, k, s.Form.Get(k))
		}
	}
}

func TestCreateIntent(t *testing.T) {
	p, rec := newMocked(t, Config{})
	holdEnd := testNow.Add(5 * time.Minute)
	req := payment.NewIntent{
		AmountMinor: 4999900,
		Currency:    "INR",
		Metadata:    map[string]string{"order_id": "o-1", "reservation_id": "r-1", "sale_id": "s-1"},
		ReturnURL:   "https://shop.example/return?sale=s-1&order=o-1",
		ExpiresAt:   holdEnd,
	}
	in, err := p.CreateIntent(context.Background(), req, "order-o-1-intent")
	if err != nil {
		t.Fatalf("CreateIntent: %v", err)
	}
	want := payment.Intent{
		ID: in.ID, Status: payment.IntentRequiresPayment, AmountMinor: 4999900, Currency: "INR",
		Metadata: req.Metadata, PayURL: in.PayURL, ReturnURL: req.ReturnURL, CreatedAt: in.CreatedAt, UpdatedAt: in.CreatedAt,
	}
	if !strings.HasPrefix(in.ID, "cs_") || !strings.HasPrefix(in.PayURL, "https://checkout.stripe.com/") || in.CreatedAt.IsZero() ||
		!reflect.DeepEqual(in, want) {
		t.Errorf("CreateIntent = %+v, want %+v with a cs_ id, a checkout.stripe.com URL and a time", in, want)
	}
	s := only(t, rec, "POST /v1/checkout/sessions")[0]
	checkForm(t, s, map[string]string{
		"mode":                                          "payment",
		"line_items[0][price_data][currency]":           "inr",
		"line_items[0][price_data][unit_amount]":        "4999900",
		"line_items[0][price_data][product_data][name]": "Order o-1",
		"line_items[0][quantity]":                       "1",
		"metadata[order_id]":                            "o-1",
		"metadata[reservation_id]":                      "r-1",
		"metadata[sale_id]":                             "s-1",
		"payment_intent_data[metadata][order_id]":       "o-1",
		"payment_intent_data[metadata][sale_id]":        "s-1",
		"client_reference_id":                           "o-1",
		"success_url":                                   req.ReturnURL,
		"cancel_url":                                    req.ReturnURL,
		"expires_at":                                    strconv.FormatInt(holdEnd.Add(31*time.Minute).Unix(), 10),
		"adaptive_pricing[enabled]":                     "false",
	})
	if got := s.Header.Get("Idempotency-Key"); got != "order-o-1-intent" {
		t.Errorf("Idempotency-Key = %q, want order-o-1-intent", got)
	}
	if got := s.Header.Get("Stripe-Version"); got != stripe.APIVersion {
		t.Errorf("Stripe-Version = %q, want %q", got, stripe.APIVersion)
	}

	t.Run("without a return URL or an expiry", func(t *testing.T) {
		req := payment.NewIntent{AmountMinor: 100, Currency: "USD", Metadata: map[string]string{"order_id": "o-2"}}
		if _, err := p.CreateIntent(context.Background(), req, "order-o-2-intent"); err != nil {
			t.Fatalf("CreateIntent: %v", err)
		}
		s := only(t, rec, "POST /v1/checkout/sessions")[0]
		checkForm(t, s, map[string]string{"line_items[0][price_data][currency]": "usd"}, "success_url", "cancel_url", "expires_at")
	})
	t.Run("Config.ReturnURL", func(t *testing.T) {
		p, rec := newMocked(t, Config{ReturnURL: "https://shop.example/orders"})
		req := payment.NewIntent{AmountMinor: 100, Currency: "USD", Metadata: map[string]string{"order_id": "o-3"}}
		if _, err := p.CreateIntent(context.Background(), req, ""); err != nil {
			t.Fatalf("CreateIntent: %v", err)
		}
		s := only(t, rec, "POST /v1/checkout/sessions")[0]
		checkForm(t, s, map[string]string{"success_url": "https://shop.example/orders", "cancel_url": "https://shop.example/orders"})
	})
}

func TestSessionExpiry(t *testing.T) {
	p := &Provider{cfg: Config{Clock: clock.NewFake(testNow)}}
	for _, c := range []struct {
		name          string
		holdEnd, want time.Time
	}{
		{"a hold of minutes: 31 min after it", testNow.Add(3 * time.Minute), testNow.Add(34 * time.Minute)},
		{"a hold of an hour: 31 min after it", testNow.Add(time.Hour), testNow.Add(time.Hour + 31*time.Minute)},
		{"a hold already over: 31 min from now", testNow.Add(-time.Minute), testNow.Add(31 * time.Minute)},
		{"a hold of days: Stripe's 24 h", testNow.Add(48 * time.Hour), testNow.Add(24*time.Hour - time.Minute)},
	} {
		if got := p.sessionExpiry(c.holdEnd); !got.Equal(c.want) {
			t.Errorf("%s: sessionExpiry(%s) = %s, want %s", c.name, c.holdEnd, got, c.want)
		}
	}
}

func TestExpire(t *testing.T) {
	p, rec := newMocked(t, Config{})
	if err := p.Expire(context.Background(), "cs_test_held"); err != nil {
		t.Fatalf("Expire: %v", err)
	}
	only(t, rec, "POST /v1/checkout/sessions/cs_test_held/expire")
}

func TestRefund(t *testing.T) {
	p, rec := newMocked(t, Config{})
	for _, c := range []struct {
		name   string
		amount int64
		want   string // the amount sent; "" for none
	}{
		{"all that is left", 0, ""},
		{"part", 2500, "2500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := p.Refund(context.Background(), "cs_test_paid", c.amount, "order-o-1-refund")
			if err != nil {
				t.Fatalf("Refund: %v", err)
			}
			wantAmount := c.amount
			if wantAmount == 0 {
				wantAmount = 100 // stripe-mock's refund fixture
			}
			if !strings.HasPrefix(r.ID, "re_") || r.IntentID != "cs_test_paid" || r.AmountMinor != wantAmount ||
				r.Status != payment.RefundSucceeded || r.CreatedAt.IsZero() {
				t.Errorf("Refund = %+v, want a re_ refund of cs_test_paid of %d, succeeded", r, wantAmount)
			}
			got := only(t, rec, "GET /v1/checkout/sessions/cs_test_paid", "POST /v1/refunds")
			checkForm(t, got[1], map[string]string{
				"payment_intent":             mockPIID, // the session's, in stripe-mock's fixture
				"metadata[checkout_session]": "cs_test_paid",
				"amount":                     c.want,
			})
			if c.want == "" {
				checkForm(t, got[1], nil, "amount")
			}
			if k := got[1].Header.Get("Idempotency-Key"); k != "order-o-1-refund" {
				t.Errorf("Idempotency-Key = %q, want order-o-1-refund", k)
			}
		})
	}
}

func TestIntents(t *testing.T) {
	p, rec := newMocked(t, Config{})
	since := testNow.Add(-time.Hour)
	ins, err := p.Intents(context.Background(), since)
	if err != nil {
		t.Fatalf("Intents: %v", err)
	}
	// stripe-mock lists its one fixture: an open session whose payment
	// intent's latest charge is a card's, with one succeeded refund.
	want := []payment.Intent{{
		ID: mockSessionID, Status: payment.IntentRequiresPayment, Metadata: map[string]string{},
		PayURL:    "https://checkout.stripe.com/pay/c/" + mockSessionID,
		ReturnURL: "https://example.com/success",
		CreatedAt: unix(1234567890), UpdatedAt: unix(1234567890),
		Payer:   mockPayer,
		Refunds: []payment.Refund{{ID: mockRefundID, IntentID: mockSessionID, AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1234567890)}},
	}}
	if !reflect.DeepEqual(ins, want) {
		t.Errorf("Intents =\n%+v\nwant\n%+v", ins, want)
	}
	s := only(t, rec, "GET /v1/checkout/sessions")[0]
	checkForm(t, s, map[string]string{
		"created[gte]": strconv.FormatInt(since.Unix(), 10),
		"limit":        "100",
		"expand[0]":    "data.payment_intent.latest_charge.refunds",
	})

	t.Run("since the beginning", func(t *testing.T) {
		if _, err := p.Intents(context.Background(), time.Time{}); err != nil {
			t.Fatalf("Intents: %v", err)
		}
		checkForm(t, only(t, rec, "GET /v1/checkout/sessions")[0], nil, "created[gte]")
	})
	t.Run("refunds not in the charge", func(t *testing.T) {
		s := &stripe.CheckoutSession{ID: "cs_test_x", Status: stripe.CheckoutSessionStatusComplete, PaymentStatus: stripe.CheckoutSessionPaymentStatusPaid,
			PaymentIntent: &stripe.PaymentIntent{ID: "pi_x", LatestCharge: &stripe.Charge{ID: "ch_x", AmountRefunded: 100}}}
		in, err := p.intentOf(context.Background(), s)
		if err != nil {
			t.Fatalf("intentOf: %v", err)
		}
		want := []payment.Refund{{ID: mockRefundID, IntentID: "cs_test_x", AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1234567890)}}
		if in.Status != payment.IntentSucceeded || !reflect.DeepEqual(in.Refunds, want) {
			t.Errorf("intentOf = %+v, want succeeded with refunds %+v", in, want)
		}
		checkForm(t, only(t, rec, "GET /v1/refunds")[0], map[string]string{"charge": "ch_x"})
	})
}

// Intent reads one session with its payment expanded as the listing
// expands it; stripe-mock answers its fixture session (a card's charge
// with one succeeded refund) under the id asked for.
func TestIntent(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, rec := newMocked(t, Config{Registerer: reg})
	in, err := p.Intent(context.Background(), "cs_test_paid")
	if err != nil {
		t.Fatalf("Intent: %v", err)
	}
	want := payment.Intent{
		ID: "cs_test_paid", Status: payment.IntentRequiresPayment, Metadata: map[string]string{},
		PayURL:    "https://checkout.stripe.com/pay/c/" + mockSessionID,
		ReturnURL: "https://example.com/success",
		CreatedAt: unix(1234567890), UpdatedAt: unix(1234567890),
		Payer:   mockPayer,
		Refunds: []payment.Refund{{ID: mockRefundID, IntentID: "cs_test_paid", AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1234567890)}},
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("Intent =\n%+v\nwant\n%+v", in, want)
	}
	s := only(t, rec, "GET /v1/checkout/sessions/cs_test_paid")[0]
	checkForm(t, s, map[string]string{"expand[0]": "payment_intent.latest_charge.refunds"})
	if len(s.Form) != 1 {
		t.Errorf("Intent sent %v, want only the expand", s.Form)
	}
	if n := sampleCount(t, reg, "get_intent", "ok"); n != 1 {
		t.Errorf("get_intent/ok observed %d times, want 1", n)
	}
}

// sampleCount is how many calls reg's histogram observed under call and
// outcome.
func sampleCount(t *testing.T, reg *prometheus.Registry, call, outcome string) uint64 {
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

// A paid session's refunds in every status Stripe gives one, as Intent
// reads them (stripe-mock's fixture has one succeeded refund only): all
// kept, oldest first, failed and canceled ones failed, pending and
// requires_action ones pending; only the latter two and the succeeded one
// count in Refunded. When the charge's page of refunds has more, they are
// all listed by the charge.
func TestIntentRefundStatuses(t *testing.T) {
	const refunds = `{"id":"re_failed","object":"refund","amount":4999900,"status":"failed","failure_reason":"expired_or_canceled_card","created":1765000100},
		{"id":"re_canceled","object":"refund","amount":500,"status":"canceled","created":1765000200},
		{"id":"re_ok","object":"refund","amount":1000,"status":"succeeded","created":1765000300},
		{"id":"re_pending","object":"refund","amount":2000,"status":"pending","created":1765000400},
		{"id":"re_action","object":"refund","amount":3000,"status":"requires_action","created":1765000500}`
	session := func(chargeRefunds string) string {
		return `{"id":"cs_test_1","object":"checkout.session","mode":"payment","status":"complete","payment_status":"paid",
			"amount_total":4999900,"currency":"inr","metadata":{"order_id":"o-1"},"created":1765000000,
			"success_url":"https://shop.example/return","url":null,
			"payment_intent":{"id":"pi_1","object":"payment_intent","status":"succeeded",
				"latest_charge":{"id":"ch_1","object":"charge","created":1765000050,"amount_refunded":6000,
					"payment_method_details":{"type":"card","card":{"fingerprint":"fp1"}}` + chargeRefunds + `}}}`
	}
	wantRefunds := []payment.Refund{
		{ID: "re_failed", IntentID: "cs_test_1", AmountMinor: 4999900, Status: payment.RefundFailed, CreatedAt: unix(1765000100)},
		{ID: "re_canceled", IntentID: "cs_test_1", AmountMinor: 500, Status: payment.RefundFailed, CreatedAt: unix(1765000200)},
		{ID: "re_ok", IntentID: "cs_test_1", AmountMinor: 1000, Status: payment.RefundSucceeded, CreatedAt: unix(1765000300)},
		{ID: "re_pending", IntentID: "cs_test_1", AmountMinor: 2000, Status: payment.RefundPending, CreatedAt: unix(1765000400)},
		{ID: "re_action", IntentID: "cs_test_1", AmountMinor: 3000, Status: payment.RefundPending, CreatedAt: unix(1765000500)},
	}
	for _, c := range []struct {
		name    string
		answers map[string]func() (int, string)
	}{
		{"all in the charge", map[string]func() (int, string){
			"GET /v1/checkout/sessions/cs_test_1": answer(200, session(`,"refunds":{"object":"list","url":"/v1/charges/ch_1/refunds","has_more":false,"data":[`+refunds+`]}`)),
		}},
		{"more than the charge's page", map[string]func() (int, string){
			"GET /v1/checkout/sessions/cs_test_1": answer(200, session(`,"refunds":{"object":"list","url":"/v1/charges/ch_1/refunds","has_more":true,
				"data":[{"id":"re_ok","object":"refund","amount":1000,"status":"succeeded","created":1765000300}]}`)),
			"GET /v1/refunds": answer(200, `{"object":"list","url":"/v1/refunds","has_more":false,"data":[`+refunds+`]}`),
		}},
		{"not expanded", map[string]func() (int, string){
			"GET /v1/checkout/sessions/cs_test_1": answer(200, session(``)),
			"GET /v1/refunds":                     answer(200, `{"object":"list","url":"/v1/refunds","has_more":false,"data":[`+refunds+`]}`),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := stripeFake(t, c.answers).Intent(context.Background(), "cs_test_1")
			if err != nil {
				t.Fatalf("Intent: %v", err)
			}
			if in.ID != "cs_test_1" || in.Status != payment.IntentSucceeded || in.AmountMinor != 4999900 || in.Currency != "INR" ||
				in.OrderID() != "o-1" || in.Payer != "card:fp1" || !in.UpdatedAt.Equal(unix(1765000050)) {
				t.Errorf("Intent = %+v", in)
			}
			if !reflect.DeepEqual(in.Refunds, wantRefunds) {
				t.Errorf("Intent refunds =\n%+v\nwant\n%+v", in.Refunds, wantRefunds)
			}
			if n := in.Refunded(); n != 6000 {
				t.Errorf("Refunded = %d, want 6000 (all but the failed and canceled)", n)
			}
		})
	}

	// Failed refunds gave nothing back, so the charge's amount_refunded is
	// 0; a page that has more is listed all the same.
	allFailed := strings.Replace(session(`,"refunds":{"object":"list","url":"/v1/charges/ch_1/refunds","has_more":true,"data":[`+
		`{"id":"re_failed","object":"refund","amount":4999900,"status":"failed","created":1765000100}]}`), `"amount_refunded":6000`, `"amount_refunded":0`, 1)
	in, err := stripeFake(t, map[string]func() (int, string){
		"GET /v1/checkout/sessions/cs_test_1": answer(200, allFailed),
		"GET /v1/refunds": answer(200, `{"object":"list","url":"/v1/refunds","has_more":false,"data":[`+
			`{"id":"re_failed","object":"refund","amount":4999900,"status":"failed","created":1765000100},`+
			`{"id":"re_canceled","object":"refund","amount":500,"status":"canceled","created":1765000200}]}`),
	}).Intent(context.Background(), "cs_test_1")
	if err != nil || !reflect.DeepEqual(in.Refunds, wantRefunds[:2]) || in.Refunded() != 0 {
		t.Errorf("Intent(only failed refunds, more than a page) = %+v, %v; want refunds %+v", in.Refunds, err, wantRefunds[:2])
	}

	// Not expanded, and nothing refunded: no refund to list.
	noneRefunded := strings.Replace(session(``), `"amount_refunded":6000`, `"amount_refunded":0`, 1)
	in, err = stripeFake(t, map[string]func() (int, string){"GET /v1/checkout/sessions/cs_test_1": answer(200, noneRefunded)}).
		Intent(context.Background(), "cs_test_1")
	if err != nil || len(in.Refunds) != 0 || in.Status != payment.IntentSucceeded {
		t.Errorf("Intent(nothing refunded) = %+v, %v; want succeeded without refunds", in, err)
	}
}

// A session Stripe does not know is its refusal, naming the session;
// Stripe failing is a plain error; both are timed as get_intent.
func TestIntentFails(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  func() (int, string)
		refusal bool
		outcome string
	}{
		{"unknown session", answer(404, stripeError("invalid_request_error", "resource_missing", "No such checkout.session: 'cs_test_1'")), true, "refused"},
		{"Stripe failing", answer(500, stripeError("api_error", "", "Something went wrong")), false, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			p := stripeFakeWith(t, Config{Registerer: reg}, map[string]func() (int, string){"GET /v1/checkout/sessions/cs_test_1": c.answer})
			_, err := p.Intent(context.Background(), "cs_test_1")
			if err == nil || payment.IsRefusal(err) != c.refusal || !strings.Contains(err.Error(), "cs_test_1") {
				t.Errorf("Intent = %v, want an error naming cs_test_1, refusal %v", err, c.refusal)
			}
			if n := sampleCount(t, reg, "get_intent", c.outcome); n != 1 {
				t.Errorf("get_intent/%s observed %d times, want 1", c.outcome, n)
			}
		})
	}
}

// refundOf maps each Stripe refund status: succeeded gave the money back;
// failed and canceled gave nothing; pending, requires_action and any
// status Stripe adds are on their way.
func TestRefundOf(t *testing.T) {
	for status, want := range map[stripe.RefundStatus]string{
		stripe.RefundStatusSucceeded:      payment.RefundSucceeded,
		stripe.RefundStatusFailed:         payment.RefundFailed,
		stripe.RefundStatusCanceled:       payment.RefundFailed,
		stripe.RefundStatusPending:        payment.RefundPending,
		stripe.RefundStatusRequiresAction: payment.RefundPending,
		"a_status_stripe_adds":            payment.RefundPending,
		"":                                payment.RefundPending,
	} {
		r := &stripe.Refund{ID: "re_1", Amount: 2500, Status: status, Created: 1765000000}
		wantRefund := payment.Refund{ID: "re_1", IntentID: "cs_test_1", AmountMinor: 2500, Status: want, CreatedAt: unix(1765000000)}
		if got := refundOf(r, "cs_test_1"); got != wantRefund {
			t.Errorf("refundOf(status %q) = %+v, want %+v", status, got, wantRefund)
		}
	}
}

// stripe-mock refuses a request its OpenAPI description does not allow:
// the adapter's requests above passed a real check, and a refusal is
// payment.IsRefusal.
func TestStripeMockRefusesBadParameters(t *testing.T) {
	p, rec := newMocked(t, Config{})
	params := &stripe.CheckoutSessionCreateParams{Mode: stripe.String("payment")}
	params.AddExtra("no_such_parameter", "1")
	_, err := p.sc.V1CheckoutSessions.Create(context.Background(), params)
	err = apiError(err)
	var ae *payment.APIError
	if !payment.IsRefusal(err) || !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Fatalf("create with an unknown parameter: %v, want a 400 refusal", err)
	}
	if got := rec.requests(); len(got) != 1 || got[0].Status != http.StatusBadRequest {
		t.Errorf("requests = %+v, want one answered 400", got)
	}
}

// stripeFake answers each "METHOD /path" with a status and a body; what
// stripe-mock cannot do (it never refuses a valid request, and has no
// state).
func stripeFake(t *testing.T, answers map[string]func() (int, string)) *Provider {
	t.Helper()
	return stripeFakeWith(t, Config{}, answers)
}

// stripeFakeWith is stripeFake with cfg's other settings.
func stripeFakeWith(t *testing.T, cfg Config, answers map[string]func() (int, string)) *Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		status, body := answer()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_fake")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	cfg.SecretKey, cfg.BaseURL, cfg.Attempts = testKey, srv.URL, 1
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func stripeError(typ, code, msg string) string {
	return fmt.Sprintf(`{"error":{"type":%q,"code":%q,"message":%q}}`, typ, code, msg)
}

func answer(status int, body string) func() (int, string) {
	return func() (int, string) { return status, body }
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   int
		body     string
		refusal  bool
		wantCode string
	}{
		{"a declined card", 402, stripeError("card_error", "card_declined", "Your card was declined."), true, "card_declined"},
		{"an invalid request", 400, stripeError("invalid_request_error", "parameter_invalid_integer", "Invalid integer"), true, "parameter_invalid_integer"},
		{"a refusal without a code", 400, stripeError("invalid_request_error", "", "No such thing"), true, "invalid_request_error"},
		{"a bad key", 401, stripeError("invalid_request_error", "", "Invalid API Key provided"), true, "invalid_request_error"},
		{"an idempotency key of other parameters", 400, stripeError("idempotency_error", "", "Keys for idempotent requests can only be used with the same parameters"), true, "idempotency_error"},
		{"an idempotency key in use", 409, stripeError("idempotency_error", "idempotency_key_in_use", "in use"), false, ""},
		{"too many requests", 429, stripeError("invalid_request_error", "rate_limit", "Too many requests"), false, ""},
		{"Stripe failing", 500, stripeError("api_error", "", "Something went wrong"), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := stripeFake(t, map[string]func() (int, string){"POST /v1/checkout/sessions": answer(c.status, c.body)})
			_, err := p.CreateIntent(context.Background(), payment.NewIntent{AmountMinor: 100, Currency: "USD"}, "k")
			if err == nil {
				t.Fatal("CreateIntent succeeded")
			}
			if payment.IsRefusal(err) != c.refusal {
				t.Fatalf("IsRefusal(%v) = %v, want %v", err, !c.refusal, c.refusal)
			}
			var ae *payment.APIError
			if c.refusal && (!errors.As(err, &ae) || ae.Status != c.status || ae.Code != c.wantCode || !strings.Contains(ae.Message, "req_fake")) {
				t.Errorf("error = %#v, want status %d code %s with the request id", ae, c.status, c.wantCode)
			}
		})
	}
	t.Run("Stripe unreachable", func(t *testing.T) {
		p, err := New(Config{SecretKey: testKey, BaseURL: "http://127.0.0.1:1", Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Intents(context.Background(), time.Time{}); err == nil || payment.IsRefusal(err) {
			t.Errorf("Intents of an unreachable Stripe = %v, want a plain error", err)
		}
	})
}

func TestExpireFinished(t *testing.T) {
	notOpen := answer(400, stripeError("invalid_request_error", "", "Only Checkout Sessions with a status in [\"open\"] can be expired."))
	session := func(status string) func() (int, string) {
		return answer(200, fmt.Sprintf(`{"id":"cs_test_1","object":"checkout.session","mode":"payment","status":%q}`, status))
	}
	for _, c := range []struct {
		name                string
		expire, get         func() (int, string)
		wantNil, isComplete bool
		refusal             bool
	}{
		{"expired before", notOpen, session("expired"), true, false, false},
		{"paid before", notOpen, session("complete"), false, true, false},
		{"unknown session", answer(404, stripeError("invalid_request_error", "resource_missing", "No such checkout.session")),
			answer(404, stripeError("invalid_request_error", "resource_missing", "No such checkout.session")), false, false, true},
		{"Stripe failing", answer(500, stripeError("api_error", "", "boom")), nil, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := map[string]func() (int, string){"POST /v1/checkout/sessions/cs_test_1/expire": c.expire}
			if c.get != nil {
				answers["GET /v1/checkout/sessions/cs_test_1"] = c.get
			}
			p := stripeFake(t, answers)
			err := p.Expire(context.Background(), "cs_test_1")
			// ClosePage says the same in the order flow's terms.
			if closeErr := p.ClosePage(context.Background(), "cs_test_1"); (closeErr == nil) != (err == nil) ||
				errors.Is(closeErr, payment.ErrPaymentStarted) != c.isComplete {
				t.Errorf("ClosePage = %v, want nil %v, payment.ErrPaymentStarted %v", closeErr, err == nil, c.isComplete)
			}
			switch {
			case c.wantNil && err != nil:
				t.Errorf("Expire = %v, want nil", err)
			case !c.wantNil && err == nil:
				t.Error("Expire = nil, want an error")
			case errors.Is(err, ErrSessionComplete) != c.isComplete:
				t.Errorf("Expire = %v, want ErrSessionComplete: %v", err, c.isComplete)
			case payment.IsRefusal(err) != c.refusal:
				t.Errorf("Expire = %v, want IsRefusal %v", err, c.refusal)
			}
		})
	}
}

func TestRefundWithoutPayment(t *testing.T) {
	p := stripeFake(t, map[string]func() (int, string){
		"GET /v1/checkout/sessions/cs_test_1": answer(200, `{"id":"cs_test_1","object":"checkout.session","mode":"payment","status":"open","payment_intent":null}`),
	})
	_, err := p.Refund(context.Background(), "cs_test_1", 0, "k")
	var ae *payment.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "intent_not_succeeded" {
		t.Errorf("Refund of an unpaid session = %v, want a 409 intent_not_succeeded refusal", err)
	}
}

func TestRefundPendingReadAgain(t *testing.T) {
	p := stripeFake(t, map[string]func() (int, string){
		"GET /v1/checkout/sessions/cs_test_1": answer(200, `{"id":"cs_test_1","object":"checkout.session","mode":"payment","status":"complete","payment_intent":"pi_1"}`),
		"POST /v1/refunds":                    answer(200, `{"id":"re_1","object":"refund","amount":100,"status":"pending","payment_intent":"pi_1","created":1765000000}`),
		"GET /v1/refunds/re_1":                answer(200, `{"id":"re_1","object":"refund","amount":100,"status":"succeeded","payment_intent":"pi_1","created":1765000000}`),
	})
	r, err := p.Refund(context.Background(), "cs_test_1", 0, "k")
	want := payment.Refund{ID: "re_1", IntentID: "cs_test_1", AmountMinor: 100, Status: payment.RefundSucceeded, CreatedAt: unix(1765000000)}
	if err != nil || r != want {
		t.Errorf("Refund = %+v, %v, want %+v", r, err, want)
	}
}

func TestSessionStatus(t *testing.T) {
	pi := func(s stripe.PaymentIntentStatus) *stripe.PaymentIntent {
		return &stripe.PaymentIntent{ID: "pi_1", Status: s}
	}
	for _, c := range []struct {
		status  stripe.CheckoutSessionStatus
		payment stripe.CheckoutSessionPaymentStatus
		pi      *stripe.PaymentIntent
		want    string
	}{
		{stripe.CheckoutSessionStatusOpen, stripe.CheckoutSessionPaymentStatusUnpaid, nil, payment.IntentRequiresPayment},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusPaid, pi(stripe.PaymentIntentStatusSucceeded), payment.IntentSucceeded},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusPaid, nil, payment.IntentSucceeded},
		{stripe.CheckoutSessionStatusExpired, stripe.CheckoutSessionPaymentStatusUnpaid, nil, payment.IntentFailed},
		// A delayed payment method:
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusUnpaid, pi(stripe.PaymentIntentStatusProcessing), payment.IntentRequiresPayment},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusUnpaid, &stripe.PaymentIntent{ID: "pi_1"}, payment.IntentRequiresPayment},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusUnpaid, pi(stripe.PaymentIntentStatusSucceeded), payment.IntentSucceeded},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusUnpaid, pi(stripe.PaymentIntentStatusRequiresPaymentMethod), payment.IntentFailed},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusUnpaid, pi(stripe.PaymentIntentStatusCanceled), payment.IntentFailed},
		{stripe.CheckoutSessionStatusComplete, stripe.CheckoutSessionPaymentStatusNoPaymentRequired, nil, payment.IntentRequiresPayment},
	} {
		s := &stripe.CheckoutSession{Status: c.status, PaymentStatus: c.payment, PaymentIntent: c.pi}
		piStatus := "none"
		if c.pi != nil {
			piStatus = string(c.pi.Status)
		}
		if got := sessionStatus(s); got != c.want {
			t.Errorf("sessionStatus(%s, %s, payment intent %s) = %s, want %s", c.status, c.payment, piStatus, got, c.want)
		}
	}
}

func TestPayerOf(t *testing.T) {
	for _, c := range []struct {
		name string
		d    *stripe.ChargePaymentMethodDetails
		want string
	}{
		{"none", nil, ""},
		{"card", &stripe.ChargePaymentMethodDetails{Type: "card", Card: &stripe.ChargePaymentMethodDetailsCard{Fingerprint: "fp1"}}, "card:fp1"},
		{"card present", &stripe.ChargePaymentMethodDetails{Type: "card_present", CardPresent: &stripe.ChargePaymentMethodDetailsCardPresent{Fingerprint: "fp1"}}, "card:fp1"},
		{"card without a fingerprint", &stripe.ChargePaymentMethodDetails{Type: "card", Card: &stripe.ChargePaymentMethodDetailsCard{}}, ""},
		{"SEPA debit", &stripe.ChargePaymentMethodDetails{Type: "sepa_debit", SEPADebit: &stripe.ChargePaymentMethodDetailsSEPADebit{Fingerprint: "fp2"}}, "sepa_debit:fp2"},
		{"US bank account", &stripe.ChargePaymentMethodDetails{Type: "us_bank_account", USBankAccount: &stripe.ChargePaymentMethodDetailsUSBankAccount{Fingerprint: "fp3"}}, "us_bank_account:fp3"},
		{"PayPal", &stripe.ChargePaymentMethodDetails{Type: "paypal", Paypal: &stripe.ChargePaymentMethodDetailsPaypal{PayerID: "P1"}}, "paypal:P1"},
		{"Cash App", &stripe.ChargePaymentMethodDetails{Type: "cashapp", CashApp: &stripe.ChargePaymentMethodDetailsCashApp{BuyerID: "B1"}}, "cashapp:B1"},
		{"Link", &stripe.ChargePaymentMethodDetails{Type: "link", Link: &stripe.ChargePaymentMethodDetailsLink{}}, ""},
		{"iDEAL", &stripe.ChargePaymentMethodDetails{Type: "ideal", IDEAL: &stripe.ChargePaymentMethodDetailsIDEAL{}}, ""},
	} {
		if got := payerOf(c.d); got != c.want {
			t.Errorf("%s: payerOf = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestConfig(t *testing.T) {
	cfg := Config{SecretKey: "sk_live_secretkey", WebhookSecrets: []string{"whsec_one", "whsec_two"}, BaseURL: "http://127.0.0.1:1"}
	type holder struct{ Stripe Config }
	for _, s := range []string{
		fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%s", cfg),
		fmt.Sprintf("%v", holder{cfg}), fmt.Sprintf("%+v", &holder{cfg}),
	} {
		if strings.Contains(s, "secretkey") || strings.Contains(s, "whsec_") {
			t.Errorf("a Config prints its secrets: %s", s)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a secret key succeeded")
	}
	if _, err := New(Config{SecretKey: "sk_test_1", WebhookSecrets: []string{""}}); err == nil {
		t.Error("New with an empty webhook secret succeeded")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, _ := newMocked(t, Config{Registerer: reg})
	if _, err := p.Intents(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "flashgate_origin_gateway_seconds" || len(mfs[0].GetMetric()) != int(callCount)*3 {
		t.Fatalf("gathered %v, want flashgate_origin_gateway_seconds with %d series", mfs, int(callCount)*3)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			wantCount := uint64(0)
			if labels["call"] == "list_intents" && labels["outcome"] == "ok" {
				wantCount = 1
			}
			if got := m.GetHistogram().GetSampleCount(); got != wantCount {
				t.Errorf("%v: %d samples, want %d", labels, got, wantCount)
			}
		}
	}
}
