package sandboxgateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashgate/flashgate/internal/testenv"
)

// startStripe serves a gateway playing Stripe, edit adjusting its config,
// and returns it with a stripe-go client of its API (no retries).
func startStripe(t *testing.T, edit func(*Config)) (*fixture, *stripe.Client) {
	t.Helper()
	f := start(t, func(c *Config) {
		c.Personality = PersonalityStripe
		if edit != nil {
			edit(c)
		}
	})
	return f, stripeClient(f.url, testAPIKey, 0)
}

// stripeClient is a stripe-go client of the API at base with key, making
// attempts retries.
func stripeClient(base, key string, retries int64) *stripe.Client {
	bc := &stripe.BackendConfig{
		URL:               stripe.String(base),
		MaxNetworkRetries: stripe.Int64(retries),
		EnableTelemetry:   stripe.Bool(false),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	return stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))
}

// sessionParams are the parameters the origin's Stripe adapter sends for
// an order: one line item, metadata on the session and its PaymentIntent,
// the order as client_reference_id, return URLs and an expiry.
func sessionParams(orderID string, amount int64, expiresAt time.Time, key string) *stripe.CheckoutSessionCreateParams {
	md := map[string]string{"order_id": orderID}
	p := &stripe.CheckoutSessionCreateParams{
		Mode: stripe.String(string(stripe.CheckoutSessionModePayment)),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String("inr"),
				UnitAmount:  stripe.Int64(amount),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String("Order " + orderID)},
			},
			Quantity: stripe.Int64(1),
		}},
		Metadata:          md,
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: md},
		AdaptivePricing:   &stripe.CheckoutSessionCreateAdaptivePricingParams{Enabled: stripe.Bool(false)},
		ClientReferenceID: stripe.String(orderID),
		SuccessURL:        stripe.String("https://shop.example/orders/" + orderID),
		CancelURL:         stripe.String("https://shop.example/orders/" + orderID),
		ExpiresAt:         stripe.Int64(expiresAt.Unix()),
	}
	p.SetIdempotencyKey(key)
	return p
}

// stripeErr is err as a *stripe.Error, failing the test otherwise.
func stripeErr(t *testing.T, what string, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: err = %v, want a *stripe.Error", what, err)
	}
	return se
}

// stripeEvent waits for the webhook of type typ and returns it, checked
// as stripe-go's webhook package checks it, under each of the secrets.
func stripeEvent(t *testing.T, f *fixture, typ string) (stripe.Event, received) {
	t.Helper()
	var got received
	testenv.Eventually(t, 5*time.Second, typ+" webhook", func() bool {
		for _, r := range f.hooks.requests() {
			var e struct{ Type string }
			if json.Unmarshal(r.body, &e) == nil && e.Type == typ {
				got = r
				return true
			}
		}
		return false
	})
	return verifyStripeEvent(t, typ, got), got
}

// verifyStripeEvent checks webhook got of type typ as stripe-go's webhook
// package checks it, under each of the secrets, and returns its event.
func verifyStripeEvent(t *testing.T, typ string, got received) stripe.Event {
	t.Helper()
	sig := got.header.Get(StripeSignatureHeader)
	var ev stripe.Event
	for _, secret := range testSecrets {
		var err error
		ev, err = webhook.ConstructEventWithOptions(got.body, sig, secret, webhook.ConstructEventOptions{})
		if err != nil {
			t.Fatalf("%s webhook under secret %q: ConstructEventWithOptions = %v", typ, secret, err)
		}
	}
	if _, err := webhook.ConstructEventWithOptions(got.body, sig, "whsec_someone_else", webhook.ConstructEventOptions{}); err == nil {
		t.Errorf("%s webhook verifies under another secret", typ)
	}
	if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s webhook Content-Type = %q, want application/json", typ, ct)
	}
	if ev.Type != stripe.EventType(typ) {
		t.Errorf("webhook type = %s, want %s", ev.Type, typ)
	}
	return ev
}

// The whole Stripe journey through stripe-go: a Checkout Session made (and
// replayed) as the origin's adapter makes it, paid on the sandbox, its
// checkout.session.completed verified by stripe-go, its PaymentIntent and
// charge read back with the payer's card fingerprint, refunded once under
// an idempotency key, refund.created verified, and the reconciler's
// listing with everything expanded.
func TestStripeCheckoutJourney(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	ctx := context.Background()
	expires := time.Now().Add(40 * time.Minute)

	s, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-1", 4999900, expires, "create-ord-1"))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	if !strings.HasPrefix(s.ID, "cs_test_") || s.Status != stripe.CheckoutSessionStatusOpen ||
		s.PaymentStatus != stripe.CheckoutSessionPaymentStatusUnpaid || s.AmountTotal != 4999900 || s.Currency != "inr" ||
		s.Mode != stripe.CheckoutSessionModePayment || s.ExpiresAt != expires.Unix() || s.Metadata["order_id"] != "ord-1" ||
		s.ClientReferenceID != "ord-1" || s.SuccessURL != "https://shop.example/orders/ord-1" || s.PaymentIntent != nil {
		t.Errorf("created session = %+v, want an open, unpaid cs_test_ session of 4999900 inr for ord-1", s)
	}
	if !strings.HasPrefix(s.URL, f.url+"/pay/"+s.ID+"#key=pk_") {
		t.Errorf("session url = %q, want the sandbox pay page %s/pay/%s#key=...", s.URL, f.url, s.ID)
	}
	if in, err := f.gw.Intent(s.ID); err != nil || in.AmountMinor != 4999900 || in.Currency != "INR" || in.PayURL != s.URL {
		t.Errorf("core intent of %s = %+v, %v", s.ID, in, err)
	}
	again, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-1", 4999900, expires, "create-ord-1"))
	if err != nil || again.ID != s.ID {
		t.Errorf("replayed create = %v, %v; want session %s", again, err, s.ID)
	}
	_, err = sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-1", 100, expires, "create-ord-1"))
	if se := stripeErr(t, "create with a used key and another amount", err); se.Type != stripe.ErrorTypeIdempotency || se.HTTPStatusCode != 400 {
		t.Errorf("create with a used key and another amount = %d %s, want 400 idempotency_error", se.HTTPStatusCode, se.Type)
	}

	// The shopper pays on the hosted page, with its pay key.
	key := payKey(t, Intent{PayURL: s.URL})
	if status, b := send(t, "POST", f.url+"/sandbox/intents/"+s.ID+"/pay", `{"payer":"upi:alice@okbank"}`, "Authorization", "Bearer "+key); status != 200 {
		t.Fatalf("pay = %d %s", status, b)
	}
	ev, _ := stripeEvent(t, f, "checkout.session.completed")
	var done stripe.CheckoutSession
	if err := json.Unmarshal(ev.Data.Raw, &done); err != nil {
		t.Fatal(err)
	}
	if ev.APIVersion != stripe.APIVersion || !strings.HasPrefix(ev.ID, "evt_") || done.ID != s.ID ||
		done.Status != stripe.CheckoutSessionStatusComplete || done.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid ||
		done.PaymentIntent == nil || !strings.HasPrefix(done.PaymentIntent.ID, "pi_") || done.URL != "" {
		t.Errorf("checkout.session.completed = %+v, session %+v; want complete and paid with a payment intent", ev, done)
	}

	params := &stripe.PaymentIntentRetrieveParams{}
	params.AddExpand("latest_charge.refunds")
	pi, err := sc.V1PaymentIntents.Retrieve(ctx, done.PaymentIntent.ID, params)
	if err != nil {
		t.Fatalf("retrieve payment intent: %v", err)
	}
	ch := pi.LatestCharge
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.Amount != 4999900 || pi.Metadata["order_id"] != "ord-1" ||
		ch == nil || !strings.HasPrefix(ch.ID, "ch_") || ch.PaymentMethodDetails == nil || ch.PaymentMethodDetails.Card == nil ||
		ch.PaymentMethodDetails.Card.Fingerprint != StripeFingerprint("upi:alice@okbank") || ch.Refunds == nil || len(ch.Refunds.Data) != 0 {
		t.Fatalf("payment intent = %+v, charge %+v; want succeeded, its charge paid by alice's card, no refunds", pi, ch)
	}

	// A refund, replayed, then refused once all is refunded.
	rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Metadata: map[string]string{"order_id": "ord-1"}}
	rp.SetIdempotencyKey("refund-ord-1")
	re, err := sc.V1Refunds.Create(ctx, rp)
	if err != nil || re.Status != stripe.RefundStatusSucceeded || re.Amount != 4999900 || re.PaymentIntent.ID != pi.ID ||
		re.Charge.ID != ch.ID || re.Metadata["order_id"] != "ord-1" {
		t.Fatalf("refund = %+v, %v; want 4999900 succeeded", re, err)
	}
	if again, err := sc.V1Refunds.Create(ctx, rp); err != nil || again.ID != re.ID {
		t.Errorf("replayed refund = %+v, %v; want %s", again, err, re.ID)
	}
	rp2 := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
	rp2.SetIdempotencyKey("refund-ord-1-twice")
	_, err = sc.V1Refunds.Create(ctx, rp2)
	if se := stripeErr(t, "second refund", err); se.Code != stripe.ErrorCodeChargeAlreadyRefunded || se.HTTPStatusCode != 400 {
		t.Errorf("second refund = %d %s, want 400 charge_already_refunded", se.HTTPStatusCode, se.Code)
	}
	ev, _ = stripeEvent(t, f, "refund.created")
	var r stripe.Refund
	if err := json.Unmarshal(ev.Data.Raw, &r); err != nil || r.ID != re.ID || r.Status != stripe.RefundStatusSucceeded || r.PaymentIntent.ID != pi.ID {
		t.Errorf("refund.created carries %+v, %v; want refund %s succeeded", r, err, re.ID)
	}

	// The reconciler's listing, paged by stripe-go, newest first.
	for i := range 3 {
		if _, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-x", 100, expires, "x-"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	lp := &stripe.CheckoutSessionListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: time.Now().Add(-time.Hour).Unix()}}
	lp.Limit = stripe.Int64(2)
	lp.AddExpand("data.payment_intent.latest_charge.refunds")
	var listed []*stripe.CheckoutSession
	for got, err := range sc.V1CheckoutSessions.List(ctx, lp) {
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		listed = append(listed, got)
	}
	if len(listed) != 4 || listed[3].ID != s.ID {
		t.Fatalf("listed %d sessions, want 4 with %s last (the oldest)", len(listed), s.ID)
	}
	paid := listed[3].PaymentIntent
	if paid == nil || paid.LatestCharge == nil || paid.LatestCharge.AmountRefunded != 4999900 || paid.LatestCharge.Refunds == nil ||
		len(paid.LatestCharge.Refunds.Data) != 1 || paid.LatestCharge.Refunds.Data[0].ID != re.ID {
		t.Errorf("listed paid session's payment = %+v, want its charge with refund %s expanded", paid, re.ID)
	}
	one := &stripe.CheckoutSessionListParams{PaymentIntent: stripe.String(pi.ID)}
	one.Limit = stripe.Int64(1)
	one.Single = true
	n := 0
	for got, err := range sc.V1CheckoutSessions.List(ctx, one) {
		if err != nil || got.ID != s.ID {
			t.Errorf("session of payment intent %s = %v, %v; want %s", pi.ID, got, err, s.ID)
		}
		n++
	}
	if n != 1 {
		t.Errorf("sessions of payment intent %s = %d, want 1", pi.ID, n)
	}
	refunds := 0
	for got, err := range sc.V1Refunds.List(ctx, &stripe.RefundListParams{Charge: stripe.String(ch.ID)}) {
		if err != nil || got.ID != re.ID {
			t.Errorf("refunds of %s: %v, %v; want %s", ch.ID, got, err, re.ID)
		}
		refunds++
	}
	if refunds != 1 {
		t.Errorf("refunds of %s = %d, want 1", ch.ID, refunds)
	}
}

// One payer is one card: two sessions paid by the same payer have charges
// of the same fingerprint, and one paid without a payer another.
func TestStripeFingerprintFollowsThePayer(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	ctx := context.Background()
	fingerprint := func(order, payer string) string {
		t.Helper()
		s, err := sc.V1CheckoutSessions.Create(ctx, sessionParams(order, 500, time.Now().Add(time.Hour), order))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.gw.PayAs(s.ID, payer); err != nil {
			t.Fatal(err)
		}
		ch, err := sc.V1Charges.Retrieve(ctx, "ch_"+strings.TrimPrefix(s.ID, "cs_test_"), nil)
		if err != nil {
			t.Fatalf("retrieve charge: %v", err)
		}
		return ch.PaymentMethodDetails.Card.Fingerprint
	}
	a, b, c := fingerprint("o1", "upi:bob@okbank"), fingerprint("o2", "upi:bob@okbank"), fingerprint("o3", "")
	if a != b || a == c || len(a) != 16 {
		t.Errorf("fingerprints = %q, %q (same payer), %q (another); want the first two equal, 16 characters, the third apart", a, b, c)
	}
}

// A session ends unpaid by the sandbox's fail or by Stripe's expire, each
// sending checkout.session.expired; expire refuses a session no longer
// open, and an expired session cannot be paid.
func TestStripeSessionExpires(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	ctx := context.Background()
	s, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-e", 700, time.Now().Add(time.Hour), "e"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.V1CheckoutSessions.Expire(ctx, s.ID, nil)
	if err != nil || got.Status != stripe.CheckoutSessionStatusExpired || got.URL != "" || got.PaymentStatus != stripe.CheckoutSessionPaymentStatusUnpaid {
		t.Fatalf("expire = %+v, %v; want expired, unpaid, without url", got, err)
	}
	ev, _ := stripeEvent(t, f, "checkout.session.expired")
	var es stripe.CheckoutSession
	if err := json.Unmarshal(ev.Data.Raw, &es); err != nil || es.ID != s.ID || es.Status != stripe.CheckoutSessionStatusExpired {
		t.Errorf("checkout.session.expired carries %+v, %v", es, err)
	}
	_, err = sc.V1CheckoutSessions.Expire(ctx, s.ID, nil)
	if se := stripeErr(t, "expire again", err); se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeInvalidRequest {
		t.Errorf("expire again = %d %s, want 400 invalid_request_error", se.HTTPStatusCode, se.Type)
	}
	if status, b := f.control(t, "POST", "/sandbox/intents/"+s.ID+"/pay", ""); status != http.StatusConflict || errorCode(t, b) != "intent_failed" {
		t.Errorf("pay an expired session = %d %s, want 409 intent_failed", status, b)
	}

	paid, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-p", 700, time.Now().Add(time.Hour), "p"))
	if err != nil {
		t.Fatal(err)
	}
	f.pay(t, paid.ID)
	_, err = sc.V1CheckoutSessions.Expire(ctx, paid.ID, nil)
	if se := stripeErr(t, "expire a paid session", err); se.HTTPStatusCode != 400 {
		t.Errorf("expire a paid session = %d, want 400", se.HTTPStatusCode)
	}
	if got, err := sc.V1CheckoutSessions.Retrieve(ctx, paid.ID, nil); err != nil || got.Status != stripe.CheckoutSessionStatusComplete {
		t.Errorf("paid session after expire = %+v, %v; want complete", got, err)
	}

	failed, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-f", 700, time.Now().Add(time.Hour), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if status, b := f.control(t, "POST", "/sandbox/intents/"+failed.ID+"/fail", ""); status != 200 {
		t.Fatalf("fail = %d %s", status, b)
	}
	testenv.Eventually(t, 5*time.Second, "a second checkout.session.expired", func() bool {
		n := 0
		for _, e := range f.gw.Events() {
			if e.Type == "checkout.session.expired" && e.Kind == EventPaymentFailed && e.Delivered {
				n++
			}
		}
		return n == 2
	})
}

// Refusals come in Stripe's shape, with the codes stripe-go and the
// adapter read.
func TestStripeRefusals(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	ctx := context.Background()
	open, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-r", 700, time.Now().Add(time.Hour), "r"))
	if err != nil {
		t.Fatal(err)
	}
	hex := strings.TrimPrefix(open.ID, "cs_test_")

	tests := []struct {
		name   string
		call   func() error
		status int
		typ    stripe.ErrorType
		code   stripe.ErrorCode
	}{
		{"wrong key", func() error {
			_, err := stripeClient(f.url, "sk_test_wrong", 0).V1CheckoutSessions.Retrieve(ctx, open.ID, nil)
			return err
		}, 401, stripe.ErrorTypeInvalidRequest, ""},
		{"unknown session", func() error {
			_, err := sc.V1CheckoutSessions.Retrieve(ctx, "cs_test_000000000000000000000000", nil)
			return err
		}, 404, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing},
		{"payment intent of an unpaid session", func() error {
			_, err := sc.V1PaymentIntents.Retrieve(ctx, "pi_"+hex, nil)
			return err
		}, 404, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing},
		{"refund of an unpaid session", func() error {
			_, err := sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String("pi_" + hex)})
			return err
		}, 404, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing},
		{"expires_at too soon", func() error {
			_, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ord-s", 700, time.Now().Add(10*time.Minute), "s"))
			return err
		}, 400, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeParameterInvalidInteger},
		{"expansion of nothing", func() error {
			p := &stripe.CheckoutSessionRetrieveParams{}
			p.AddExpand("customer_details")
			_, err := sc.V1CheckoutSessions.Retrieve(ctx, open.ID, p)
			return err
		}, 400, stripe.ErrorTypeInvalidRequest, ""},
		{"list limit over 100", func() error {
			p := &stripe.CheckoutSessionListParams{}
			p.Limit = stripe.Int64(101)
			for _, err := range sc.V1CheckoutSessions.List(ctx, p) {
				return err
			}
			return nil
		}, 400, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeParameterInvalidInteger},
	}
	for _, tt := range tests {
		se := stripeErr(t, tt.name, tt.call())
		if se.HTTPStatusCode != tt.status || se.Type != tt.typ || se.Code != tt.code || se.Msg == "" || se.RequestID == "" {
			t.Errorf("%s = %d %s %q %q (request %q), want %d %s %q with a message and a request id",
				tt.name, se.HTTPStatusCode, se.Type, se.Code, se.Msg, se.RequestID, tt.status, tt.typ, tt.code)
		}
	}

	// The key as a Basic user, as curl -u sends it.
	req, _ := http.NewRequest("GET", f.url+"/v1/checkout/sessions/"+open.ID, nil)
	req.SetBasicAuth(testAPIKey, "")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("retrieve with the key as a Basic user = %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// What stripe-go cannot send, by hand.
	raw := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown parameter", "POST", "/v1/checkout/sessions", "mode=payment&line_items[0][price_data][currency]=inr&line_items[0][price_data][unit_amount]=5&line_items[0][price_data][product_data][name]=x&line_items[0][quantity]=1&colour=red", 400, "parameter_unknown"},
		{"no mode", "POST", "/v1/checkout/sessions", "line_items[0][quantity]=1", 400, "parameter_missing"},
		{"unknown path", "GET", "/v1/customers", "", 404, ""},
		{"the flashgate protocol", "GET", "/v1/intents", "", 404, ""},
	}
	for _, tt := range raw {
		status, b := send(t, tt.method, f.url+tt.path, "", "Authorization", "Bearer "+testAPIKey)
		if tt.body != "" {
			status, b = sendForm(t, f.url+tt.path, tt.body)
		}
		var e struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal(b, &e); err != nil || status != tt.status || e.Error.Code != tt.code || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Errorf("%s = %d %s, want %d invalid_request_error %q", tt.name, status, b, tt.status, tt.code)
		}
	}
}

// sendForm POSTs a form body with the API key.
func sendForm(t *testing.T, u, body string) (int, []byte) {
	t.Helper()
	if _, err := url.ParseQuery(body); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The chaos suite's failure modes play out in Stripe's terms: an injected
// outage is a 503 api_error, which stripe-go retries with the same
// idempotency key; a webhook answered 500 is delivered again, freshly
// signed, under the same event id; a duplicate delivery repeats the id.
func TestStripeFailureModes(t *testing.T) {
	t.Parallel()
	t.Run("outage", func(t *testing.T) {
		f, sc := startStripe(t, func(c *Config) { c.FailureRate = 1 })
		_, err := sc.V1CheckoutSessions.Create(context.Background(), sessionParams("o", 100, time.Now().Add(time.Hour), "k"))
		if se := stripeErr(t, "create during an outage", err); se.HTTPStatusCode != 503 || se.Type != stripe.ErrorTypeAPI {
			t.Errorf("create during an outage = %d %s, want 503 api_error", se.HTTPStatusCode, se.Type)
		}
		if n := len(f.gw.Intents()); n != 0 {
			t.Errorf("%d sessions made during an outage, want 0", n)
		}
	})
	t.Run("retries and duplicates", func(t *testing.T) {
		f, sc := startStripe(t, func(c *Config) { c.DuplicateRate = 1 })
		f.hooks.answerWith(func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		s, err := sc.V1CheckoutSessions.Create(context.Background(), sessionParams("o", 100, time.Now().Add(time.Hour), "k"))
		if err != nil {
			t.Fatal(err)
		}
		f.pay(t, s.ID)
		testenv.Eventually(t, 5*time.Second, "three deliveries", func() bool { return len(f.hooks.requests()) == 3 })
		var ids []string
		for _, r := range f.hooks.requests() {
			ev, err := webhook.ConstructEventWithOptions(r.body, r.header.Get(StripeSignatureHeader), testSecrets[1], webhook.ConstructEventOptions{})
			if err != nil {
				t.Fatalf("delivery: %v", err)
			}
			ids = append(ids, ev.ID)
		}
		if ids[0] != ids[1] || ids[1] != ids[2] {
			t.Errorf("event ids of the deliveries = %v, want one id", ids)
		}
	})
}

// Config.Personality takes the personalities there are, "" meaning
// flashgate's; a flashgate gateway knows no Stripe path.
func TestPersonalities(t *testing.T) {
	t.Parallel()
	base := Config{APIKey: testAPIKey, ControlToken: testControlToken, WebhookSecrets: testSecrets}
	for _, name := range []string{"", PersonalityFlashgate, PersonalityStripe} {
		c := base
		c.Personality = name
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(Personality %q) = %v, want nil", name, err)
		}
	}
	c := base
	c.Personality = "paypal"
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "Personality") {
		t.Errorf("New(Personality paypal) = %v, want an error naming Personality", err)
	}
	f := start(t, nil)
	if status, b := f.api(t, "GET", "/v1/checkout/sessions", "", ""); status != http.StatusNotFound || errorCode(t, b) != "not_found" {
		t.Errorf("flashgate GET /v1/checkout/sessions = %d %s, want 404 not_found", status, b)
	}
}

// Lists page as Stripe's do: newest first, limit at a time, after
// starting_after or before ending_before, has_more saying whether more lie
// that way; expand[] in either notation.
func TestStripeListPages(t *testing.T) {
	t.Parallel()
	f, sc := startStripe(t, nil)
	var ids []string // oldest first
	for i := range 5 {
		s, err := sc.V1CheckoutSessions.Create(context.Background(), sessionParams("o", 100, time.Now().Add(time.Hour), "k"+string(rune('0'+i))))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	type list struct {
		Object  string `json:"object"`
		URL     string `json:"url"`
		HasMore bool   `json:"has_more"`
		Data    []struct {
			ID            string `json:"id"`
			PaymentIntent any    `json:"payment_intent"`
		} `json:"data"`
	}
	page := func(query string) list {
		t.Helper()
		status, b := send(t, "GET", f.url+"/v1/checkout/sessions?"+query, "", "Authorization", "Bearer "+testAPIKey)
		if status != 200 {
			t.Fatalf("list ?%s = %d %s", query, status, b)
		}
		return decode[list](t, b)
	}
	idsOf := func(l list) string {
		var out []string
		for _, d := range l.Data {
			out = append(out, d.ID[len(d.ID)-4:])
		}
		return strings.Join(out, ",")
	}
	short := func(i ...int) string {
		var out []string
		for _, j := range i {
			out = append(out, ids[j][len(ids[j])-4:])
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		query string
		want  string
		more  bool
	}{
		{"limit=2", short(4, 3), true},
		{"limit=2&starting_after=" + ids[3], short(2, 1), true},
		{"limit=2&starting_after=" + ids[1], short(0), false},
		{"limit=2&ending_before=" + ids[0], short(2, 1), true},
		{"limit=2&ending_before=" + ids[2], short(4, 3), false},
		{"", short(4, 3, 2, 1, 0), false},
	}
	for _, tt := range tests {
		l := page(tt.query)
		if l.Object != "list" || l.URL != "/v1/checkout/sessions" || idsOf(l) != tt.want || l.HasMore != tt.more {
			t.Errorf("list ?%s = %s %s [%s] more %v, want list /v1/checkout/sessions [%s] more %v",
				tt.query, l.Object, l.URL, idsOf(l), l.HasMore, tt.want, tt.more)
		}
	}
	f.pay(t, ids[4])
	for _, q := range []string{"limit=1&expand[]=data.payment_intent", "limit=1&expand[0]=data.payment_intent"} {
		if pi, ok := page(q).Data[0].PaymentIntent.(map[string]any); !ok || pi["object"] != "payment_intent" {
			t.Errorf("list ?%s: payment_intent = %v, want it expanded", q, page(q).Data[0].PaymentIntent)
		}
	}
	if pi := page("limit=1").Data[0].PaymentIntent; pi != "pi_"+strings.TrimPrefix(ids[4], "cs_test_") {
		t.Errorf("payment_intent unexpanded = %v, want the id", pi)
	}
}
