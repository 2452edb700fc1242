package sandboxgateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The Stripe personality (PersonalityStripe) answers the calls of a Stripe
// integration that takes payments with Checkout, as Stripe's API does:
//
//	POST /v1/checkout/sessions               mode=payment, line_items[i][price_data][...], line_items[i][quantity],
//	                                         metadata[k], payment_intent_data[metadata][k], client_reference_id,
//	                                         success_url, cancel_url, expires_at, adaptive_pricing[enabled]
//	GET  /v1/checkout/sessions               created[gt|gte|lt|lte], payment_intent, status, limit, starting_after, ending_before
//	GET  /v1/checkout/sessions/{id}
//	POST /v1/checkout/sessions/{id}/expire
//	GET  /v1/payment_intents/{id}
//	GET  /v1/charges/{id}
//	POST /v1/refunds                         payment_intent or charge, amount, metadata[k], reason
//	GET  /v1/refunds                         charge, payment_intent, created[...], limit, starting_after, ending_before
//	GET  /v1/refunds/{id}
//
// Bodies are form-encoded with Stripe's bracket notation (arrays as [] or
// [0], [1], ...), a GET's parameters are its query, and every call carries
// the secret key (APIKey) as "Authorization: Bearer <key>" or as a Basic
// user without a password. Every call takes expand[] (list calls as
// "data.<path>"), up to four levels: a session's payment_intent, a
// PaymentIntent's latest_charge, a charge's refunds (a list) and
// payment_intent, a refund's charge and payment_intent. An unknown
// parameter is refused (400 parameter_unknown), as Stripe does.
//
// A POST may carry an Idempotency-Key: its repeat with the same parameters
// gets the same object back (as it is now, with Idempotent-Replayed:
// true), with other parameters 400 idempotency_error. Lists are
// {object: "list", data, has_more, url}, newest first, at most limit (1 to
// 100, default 10) after starting_after or before ending_before. Errors are
// {"error": {"type", "code", "message", "param"}}; every answer carries a
// Request-Id and Stripe-Version.
//
// The core maps onto Stripe's objects: an intent is a Checkout Session
// (cs_test_…, its id; url is the sandbox's pay page while it is open),
// open while it requires payment, complete and paid once paid, expired once
// failed (by the /fail control endpoint, or by POST …/expire, which expires
// only an open one). A paid session has a PaymentIntent (pi_…) with its
// Charge (ch_…), whose payment_method_details.card.fingerprint is derived
// from the sandbox payer (stripeFingerprint), so one payer is one card. A
// refund is a Refund (re_…), succeeded at once; while refunds are held
// (Gateway.HoldRefunds) it is pending (pending_reason processing) until
// the sandbox processes it (succeeded) or fails it (failed, failure_reason
// expired_or_canceled_card, with a failure_balance_transaction). A
// charge's amount_refunded, and refunded, count its pending and succeeded
// refunds, not failed ones, so a failed refund's amount may be refunded
// again; every listing shows every refund in its current status. The ids
// of one intent share its 24 hex digits. Events are Stripe Events (see
// encode): the session's checkout.session.completed and
// checkout.session.expired, the refund's refund.created, refund.updated
// and refund.failed, signed in Stripe-Signature.
//
// Not played: sessions in setup or subscription mode, prices by id,
// customers, delayed payment methods (checkout.session.async_payment_*),
// refunds that require action or are canceled, a session expiring by
// itself at expires_at (only fail and expire end one), events other than
// the five above (payment_intent.*, charge.*, charge.refund.updated), an
// idempotent replay of an error answer, one key shared across endpoints,
// rate limits (429) and the request's id and idempotency key in an event's
// request.
type stripeFace struct{ g *Gateway }

// StripeAPIVersion is the Stripe API version the personality answers in
// and renders its events in: stripe-go v82's.
const StripeAPIVersion = "2025-08-27.basil"

// StripeSignatureHeader carries Stripe's webhook signature (see Sign).
const StripeSignatureHeader = "Stripe-Signature"

// Stripe id prefixes. A session's id is stripeSessionPrefix and its
// intent's hex digits; its PaymentIntent, Charge and PaymentMethod share
// them.
const (
	stripeSessionPrefix = "cs_test_"
	stripePIPrefix      = "pi_"
	stripeChargePrefix  = "ch_"
)

func (*stripeFace) intentPrefix() string { return stripeSessionPrefix }

// stripeEndpoint is a Stripe API endpoint: its errors are answered as
// Stripe's.
type stripeEndpoint handler

func (h stripeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Stripe also takes the secret key as a Basic user without a password
	// (curl -u sk_test_...:); api checks it as a bearer.
	if user, pass, ok := r.BasicAuth(); ok && pass == "" {
		r.Header.Set("Authorization", bearerPrefix+user)
	}
	w.Header().Set("Request-Id", "req_"+randomHex(7))
	w.Header().Set("Stripe-Version", StripeAPIVersion)
	if err := h(w, r); err != nil {
		writeStripeError(w, err)
	}
}

func (s *stripeFace) routes(mux *http.ServeMux) {
	api := func(h handler) http.Handler { return stripeEndpoint(s.g.api(h)) }
	mux.Handle("POST /v1/checkout/sessions", api(s.createSession))
	mux.Handle("GET /v1/checkout/sessions", api(s.listSessions))
	mux.Handle("GET /v1/checkout/sessions/{id}", api(s.getSession))
	mux.Handle("POST /v1/checkout/sessions/{id}/expire", api(s.expireSession))
	mux.Handle("GET /v1/payment_intents/{id}", api(s.getPaymentIntent))
	mux.Handle("GET /v1/charges/{id}", api(s.getCharge))
	mux.Handle("POST /v1/refunds", api(s.createRefund))
	mux.Handle("GET /v1/refunds", api(s.listRefunds))
	mux.Handle("GET /v1/refunds/{id}", api(s.getRefund))
	mux.Handle("/v1/", api(func(_ http.ResponseWriter, r *http.Request) error {
		return &stripeError{status: http.StatusNotFound, typ: stripeInvalidRequest,
			message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)}
	}))
}

// stripeError is an error answer in Stripe's shape.
type stripeError struct {
	status  int
	typ     string // invalid_request_error, idempotency_error, api_error
	code    string // "" for none
	param   string // "" for none
	message string
}

func (e *stripeError) Error() string { return e.typ + ": " + e.message }

// Stripe's error types.
const (
	stripeInvalidRequest = "invalid_request_error"
	stripeIdempotency    = "idempotency_error"
	stripeAPIError       = "api_error"
)

// stripeBad is a 400 invalid_request_error about param.
func stripeBad(code, param, message string) *stripeError {
	return &stripeError{status: http.StatusBadRequest, typ: stripeInvalidRequest, code: code, param: param, message: message}
}

// stripeMissing is a 404 for an object that does not exist.
func stripeMissing(kind, id, param string) *stripeError {
	return &stripeError{status: http.StatusNotFound, typ: stripeInvalidRequest, code: "resource_missing", param: param,
		message: fmt.Sprintf("No such %s: '%s'", kind, id)}
}

// writeStripeError answers err as Stripe would: a *stripeError as it is,
// the core's answers (authentication, injected failures, limits) in
// Stripe's shape, anything else as a 500 api_error that hides it.
func writeStripeError(w http.ResponseWriter, err error) {
	ans := stripeError{status: http.StatusInternalServerError, typ: stripeAPIError,
		message: "An unknown error occurred in the sandbox gateway."}
	var se *stripeError
	var ae *apiError
	switch {
	case errors.As(err, &se):
		ans = *se
	case errors.As(err, &ae) && ae.status == http.StatusUnauthorized:
		ans = stripeError{status: ae.status, typ: stripeInvalidRequest,
			message: "Invalid API Key provided: use Authorization: Bearer <the secret key>."}
		w.Header().Set("WWW-Authenticate", `Basic realm="Stripe"`)
	case errors.As(err, &ae) && ae.status >= 500:
		ans = stripeError{status: ae.status, typ: stripeAPIError,
			message: "The sandbox gateway is temporarily unavailable; retry with the same Idempotency-Key."}
	case errors.As(err, &ae):
		ans = stripeError{status: ae.status, typ: stripeInvalidRequest, message: ae.message}
	}
	body := map[string]string{"type": ans.typ, "message": ans.message}
	if ans.code != "" {
		body["code"] = ans.code
	}
	if ans.param != "" {
		body["param"] = ans.param
	}
	writeJSON(w, ans.status, map[string]any{"error": body})
}

// stripeParams are a request's parameters, by their form key.
type stripeParams struct {
	url.Values
	expand []string // expand[] values, in order
}

// readStripeParams reads r's parameters (a POST's form body, a GET's
// query) and refuses any whose key's shape (stripeShape) is not in allowed.
func readStripeParams(w http.ResponseWriter, r *http.Request, allowed ...string) (stripeParams, error) {
	raw := r.URL.RawQuery
	if r.Method == http.MethodPost {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return stripeParams{}, &stripeError{status: http.StatusRequestEntityTooLarge, typ: stripeInvalidRequest,
				message: "The request body may be at most 64 KiB."}
		}
		if err != nil {
			return stripeParams{}, stripeBad("", "", "The request body could not be read.")
		}
		raw = string(b)
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return stripeParams{}, stripeBad("", "", "Invalid request: the parameters must be form-encoded (application/x-www-form-urlencoded).")
	}
	p := stripeParams{Values: v}
	for _, k := range slices.Sorted(maps.Keys(v)) { // the first refusal is the same every time
		shape := stripeShape(k)
		if shape == "expand[]" || shape == "expand" {
			p.expand = append(p.expand, v[k]...)
			continue
		}
		if !slices.Contains(allowed, shape) {
			return stripeParams{}, stripeBad("parameter_unknown", k, "Received unknown parameter: "+k)
		}
		if len(v[k]) > 1 && !strings.HasSuffix(k, "[]") {
			return stripeParams{}, stripeBad("", k, "Received the parameter "+k+" more than once.")
		}
	}
	return p, nil
}

// stripeShape is a form key with its array indices written "[]" and the
// key in a metadata hash "[*]": line_items[0][quantity] is
// line_items[][quantity], payment_intent_data[metadata][order_id] is
// payment_intent_data[metadata][*].
func stripeShape(key string) string {
	name, rest, _ := strings.Cut(key, "[")
	var b strings.Builder
	b.WriteString(name)
	prev := name
	for rest != "" {
		seg, after, ok := strings.Cut(rest, "]")
		if !ok {
			return key // not bracket notation: taken as it is
		}
		switch {
		case prev == "metadata":
			seg = "*"
		case strings.Trim(seg, "0123456789") == "":
			seg = ""
		}
		b.WriteString("[" + seg + "]")
		prev = seg
		rest = strings.TrimPrefix(after, "[")
	}
	return b.String()
}

// metadataOf is the hash under prefix ("metadata", say) in p, refused
// when over Stripe's limits: 50 keys, keys up to 40 characters without
// brackets, values up to 500.
func (p stripeParams) metadataOf(prefix string) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range p.Values {
		name, ok := strings.CutPrefix(k, prefix+"[")
		if !ok || !strings.HasSuffix(name, "]") {
			continue
		}
		name = strings.TrimSuffix(name, "]")
		switch {
		case name == "" || utf8.RuneCountInString(name) > maxMetadataKey || strings.ContainsAny(name, "[]"):
			return nil, stripeBad("parameter_invalid_string", k, fmt.Sprintf("Metadata keys must be 1 to %d characters without square brackets.", maxMetadataKey))
		case utf8.RuneCountInString(vs[0]) > maxMetadataValue:
			return nil, stripeBad("parameter_invalid_string", k, fmt.Sprintf("Metadata values can have up to %d characters.", maxMetadataValue))
		}
		if vs[0] != "" { // Stripe unsets a key given empty
			out[name] = vs[0]
		}
	}
	if len(out) > maxMetadataKeys {
		return nil, stripeBad("parameter_invalid_string", prefix, fmt.Sprintf("You can have at most %d metadata keys.", maxMetadataKeys))
	}
	return out, nil
}

// integer is p's key as an integer; ok false when absent.
func (p stripeParams) integer(key string) (n int64, ok bool, err error) {
	s := p.Get(key)
	if !p.Has(key) {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, stripeBad("parameter_invalid_integer", key, "Invalid integer: "+s)
	}
	return n, true, nil
}

// flat is p without expand, form-encoded with sorted keys: what
// Intent.Params and Refund.Params keep, and idempotency compares.
func (p stripeParams) flat() string {
	out := url.Values{}
	for k, vs := range p.Values {
		if s := stripeShape(k); s != "expand[]" && s != "expand" {
			out[k] = vs
		}
	}
	return out.Encode()
}

// stripeIdempotencyKey is the request's Idempotency-Key or, without one, a
// fresh key: Stripe makes the key optional.
func stripeIdempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get(idempotencyKeyHeader)
	switch {
	case k == "":
		return "generated-" + randomHex(16), nil
	case len(k) > maxIdempotencyKeyLen:
		return "", stripeBad("", "", "Idempotency-Key may be at most 255 characters.")
	}
	return k, nil
}

// stripeIdempotencyError is the answer to a key reused with other
// parameters.
func stripeIdempotencyError(key string) *stripeError {
	return &stripeError{status: http.StatusBadRequest, typ: stripeIdempotency,
		message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" +
			key + "' if you meant to execute a different request."}
}

// stripeList is a list object.
func stripeList(url string, data []any, more bool) map[string]any {
	if data == nil {
		data = []any{}
	}
	return map[string]any{"object": "list", "data": data, "has_more": more, "url": url}
}

// encode is a core event as Stripe Events, in StripeAPIVersion's shape:
// a payment is checkout.session.completed, a failure
// checkout.session.expired (data.object the session, payment_intent not
// expanded). A refund sends refund.created when it is made (pending while
// refunds are held, else succeeded); a pending refund that succeeds sends
// refund.updated, one that fails refund.updated and refund.failed, two
// events (data.object the refund; refund.updated's
// data.previous_attributes what its pending self had). The first event's
// id is the core event's.
func (s *stripeFace) encode(e coreEvent) ([]providerEvent, error) {
	var types []string
	var obj any
	switch {
	case e.Kind == EventPaymentSucceeded:
		types, obj = []string{"checkout.session.completed"}, s.session(e.Intent, nil)
	case e.Kind == EventPaymentFailed:
		types, obj = []string{"checkout.session.expired"}, s.session(e.Intent, nil)
	case e.Kind == EventRefundCreated, e.Kind == EventRefundSucceeded && e.From == "":
		types, obj = []string{"refund.created"}, s.refund(e.Intent, *e.Refund, nil)
	case e.Kind == EventRefundSucceeded:
		types, obj = []string{"refund.updated"}, s.refund(e.Intent, *e.Refund, nil)
	case e.Kind == EventRefundFailed:
		types, obj = []string{"refund.updated", "refund.failed"}, s.refund(e.Intent, *e.Refund, nil)
	default:
		return nil, fmt.Errorf("no Stripe event for %s", e.Kind)
	}
	var out []providerEvent
	for i, typ := range types {
		id := e.ID
		if i > 0 {
			id = newID(eventPrefix)
		}
		data := map[string]any{"object": obj}
		if typ == "refund.updated" {
			prev := map[string]any{"status": e.From, "pending_reason": "processing"}
			if e.Refund.Status == RefundFailed {
				prev["failure_reason"], prev["failure_balance_transaction"] = nil, nil
			}
			data["previous_attributes"] = prev
		}
		body, err := json.Marshal(map[string]any{
			"id":               id,
			"object":           "event",
			"api_version":      StripeAPIVersion,
			"created":          e.At.Unix(),
			"data":             data,
			"livemode":         false,
			"pending_webhooks": 1,
			"request":          map[string]any{"id": nil, "idempotency_key": nil},
			"type":             typ,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, providerEvent{id, typ, body})
	}
	return out, nil
}

// coreRefundID is id: a Stripe refund's id is the core's.
func (*stripeFace) coreRefundID(id string) string { return id }

// stripeUserAgent is the User-Agent of Stripe's webhook deliveries.
const stripeUserAgent = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"

// sign signs as Stripe does: Stripe-Signature "t=<unix>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">", one v1 per secret (Stripe signs with the
// old and the new secret while one is rolled), which is Sign.
func (*stripeFace) sign(h http.Header, _ string, secrets []string, t time.Time, body []byte) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("User-Agent", stripeUserAgent)
	h.Set(StripeSignatureHeader, Sign(secrets, t, body))
}
