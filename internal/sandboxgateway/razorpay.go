package sandboxgateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The Razorpay personality (PersonalityRazorpay) answers the calls of a
// Razorpay integration that takes payments with Payment Links, as
// Razorpay's API does (the pages the origin's adapter names in
// origin/internal/payment/razorpay/testdata/README.md):
//
//	POST /v1/payment_links                   amount, currency, reference_id, description, expire_by, notes,
//	                                         callback_url, callback_method, upi_link, reminder_enable,
//	                                         accept_partial (false only), customer, notify
//	GET  /v1/payment_links                   reference_id or payment_id
//	GET  /v1/payment_links/{id}
//	POST /v1/payment_links/{id}/cancel
//	GET  /v1/payments                        from, to, count (1 to 100, default 10), skip
//	GET  /v1/payments/{id}
//	GET  /v1/payments/{id}/refunds           from, to, count, skip
//	POST /v1/payments/{id}/refund            amount, speed, receipt, notes + X-Refund-Idempotency
//
// Bodies are JSON objects; a field the call does not take is refused, as
// Razorpay does. Every call carries basic auth with the key id
// RazorpayKeyID and, as the key secret, the sandbox's API key (APIKey):
// one fixed test key id, so that a setup names it without asking the
// sandbox. Errors are Razorpay's {"error": {"code", "description",
// "source", "step", "reason", "metadata", "field"}}: BAD_REQUEST_ERROR
// for a refusal (400; 401 for a wrong key; 409 for an idempotency key
// reused with another body), SERVER_ERROR for the injected outages.
//
// The core maps onto Razorpay's objects: an intent is a Payment Link
// (plink_…, its id; short_url is the sandbox's pay page), created while it
// requires payment, paid once paid, cancelled once failed by POST
// …/cancel (only a created link), expired once failed otherwise (by the
// /fail control endpoint or the page). reference_id is unique among links
// (its reuse is refused with Razorpay's "payment link creation with
// reference ID already attempted"), expire_by must be at least 15 minutes
// ahead. A paid link has its Order (order_…) and one captured Payment
// (pay_…) of method upi, whose vpa is the sandbox payer's (RazorpayVPA):
// "upi:alice@okbank" pays from alice@okbank. A refund is a Refund
// (rfnd_…), processed at once; while refunds are held
// (Gateway.HoldRefunds) it is pending, as a normal-speed refund is for
// days, until the sandbox processes it (processed) or fails it (failed).
// A payment's amount_refunded and refund_status (null, partial, full)
// count its pending and processed refunds, not failed ones, so a failed
// refund's amount may be refunded again; a payment refunded in full is
// refunded. Its refunds listing shows every refund in its current status.
// The ids of one intent share its 24 hex digits (Razorpay's own ids are
// 14 letters and digits). Events are Razorpay's webhooks (see encode):
// payment_link.paid, payment_link.expired, payment_link.cancelled,
// refund.created (for a pending refund), refund.processed and
// refund.failed, signed in X-Razorpay-Signature, their id in
// X-Razorpay-Event-Id.
//
// Not played: links expiring by themselves at expire_by (only fail and
// cancel end one), partial payments (accept_partial), failed payment
// attempts and the payment.* and order.* events, instant refunds (speed
// optimum is taken and processed as normal, and refund.speed_changed is
// never sent), refund.created for a refund processed at once, Orders and
// Standard Checkout, payments by card, netbanking or wallet, notifications
// (notify, reminders, the SMS and email links), updating a link (PATCH),
// the live-mode-only rule of UPI links (upi_link is taken with the test
// key), the refund's 409 while a request with its idempotency key is in
// progress (the core answers each at once), the callback's razorpay_*
// query parameters, and rate limits (429).
type razorpayFace struct{ g *Gateway }

// RazorpayKeyID is the API key id the Razorpay personality takes, with the
// sandbox's API key as its secret: a test key id as Razorpay shapes them
// ("rzp_test_" and 14 letters).
const RazorpayKeyID = "rzp_test_SandboxGateway"

// Razorpay's webhook headers: the body's signature, and the event's id.
const (
	RazorpaySignatureHeader = "X-Razorpay-Signature"
	RazorpayEventIDHeader   = "X-Razorpay-Event-Id"
)

// Razorpay id prefixes. A link's id is razorpayLinkPrefix and its
// intent's hex digits; its order and payment share them, and a refund's id
// shares the core refund's (coreRefundPrefix).
const (
	razorpayLinkPrefix    = "plink_"
	razorpayOrderPrefix   = "order_"
	razorpayPaymentPrefix = "pay_"
	razorpayRefundPrefix  = "rfnd_"
)

// razorpayAccountID is the merchant account the sandbox's events name.
const razorpayAccountID = "acc_SandboxGateway"

func (*razorpayFace) intentPrefix() string { return razorpayLinkPrefix }

// razorpayEndpoint is a Razorpay API endpoint: its errors are answered as
// Razorpay's, and its basic auth is turned into the bearer api checks.
type razorpayEndpoint handler

func (h razorpayEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		writeRazorpayError(w, err)
	}
}

func (f *razorpayFace) routes(mux *http.ServeMux) {
	api := func(h handler) http.Handler { return razorpayEndpoint(f.auth(f.g.api(h))) }
	mux.Handle("POST /v1/payment_links", api(f.createLink))
	mux.Handle("GET /v1/payment_links", api(f.listLinks))
	mux.Handle("GET /v1/payment_links/{id}", api(f.getLink))
	mux.Handle("POST /v1/payment_links/{id}/cancel", api(f.cancelLink))
	mux.Handle("GET /v1/payments", api(f.listPayments))
	mux.Handle("GET /v1/payments/{id}", api(f.getPayment))
	mux.Handle("GET /v1/payments/{id}/refunds", api(f.listRefunds))
	mux.Handle("POST /v1/payments/{id}/refund", api(f.createRefund))
	mux.Handle("/v1/", api(func(http.ResponseWriter, *http.Request) error {
		return razorpayBad("", "The requested URL was not found on the server.")
	}))
}

// auth turns Razorpay's basic auth (RazorpayKeyID and the API key as its
// secret) into the bearer g.api checks; anything else leaves no
// credentials, so that api refuses it.
func (f *razorpayFace) auth(next handler) handler {
	id, secret := []byte(RazorpayKeyID), []byte(f.g.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) error {
		user, pass, ok := r.BasicAuth()
		r.Header.Del("Authorization")
		if ok && subtle.ConstantTimeCompare([]byte(user), id)&subtle.ConstantTimeCompare([]byte(pass), secret) == 1 {
			r.Header.Set("Authorization", bearerPrefix+f.g.cfg.APIKey)
		}
		return next(w, r)
	}
}

// razorpayError is an error answer in Razorpay's shape.
type razorpayError struct {
	status      int
	code        string // BAD_REQUEST_ERROR, SERVER_ERROR
	description string
	field       string // "" for none
}

func (e *razorpayError) Error() string { return e.code + ": " + e.description }

// razorpayBad is a 400 BAD_REQUEST_ERROR about field.
func razorpayBad(field, description string) *razorpayError {
	return &razorpayError{status: http.StatusBadRequest, code: "BAD_REQUEST_ERROR", description: description, field: field}
}

// razorpayNoID is Razorpay's answer for an id it does not know.
var razorpayNoID = razorpayBad("", "The id provided does not exist")

// writeRazorpayError answers err as Razorpay would: a *razorpayError as it
// is, the core's answers (authentication, injected failures) in Razorpay's
// shape, anything else as a 500 SERVER_ERROR that hides it.
func writeRazorpayError(w http.ResponseWriter, err error) {
	ans := razorpayError{status: http.StatusInternalServerError, code: "SERVER_ERROR",
		description: "The server encountered an error. The incident has been reported to admins."}
	var re *razorpayError
	var ae *apiError
	switch {
	case errors.As(err, &re):
		ans = *re
	case errors.As(err, &ae) && ae.status == http.StatusUnauthorized:
		ans = razorpayError{status: ae.status, code: "BAD_REQUEST_ERROR", description: "The api key provided is invalid"}
		w.Header().Set("WWW-Authenticate", `Basic realm="Razorpay"`)
	case errors.As(err, &ae) && ae.status >= 500:
		ans = razorpayError{status: ae.status, code: "SERVER_ERROR",
			description: "The sandbox gateway is temporarily unavailable; retry the request."}
	case errors.As(err, &ae):
		ans = razorpayError{status: ae.status, code: "BAD_REQUEST_ERROR", description: ae.message}
	}
	body := map[string]any{"code": ans.code, "description": ans.description, "source": "NA", "step": "NA",
		"reason": "NA", "metadata": map[string]any{}}
	if ans.status == http.StatusBadRequest {
		body["source"], body["step"], body["reason"] = "business", "payment_initiation", "input_validation_failed"
	}
	if ans.field != "" {
		body["field"] = ans.field
	}
	writeJSON(w, ans.status, map[string]any{"error": body})
}

// razorpayBody is a request's JSON object, by field.
type razorpayBody map[string]json.RawMessage

// readRazorpayBody reads r's JSON object body ("" is an empty object) and
// refuses a field not in allowed.
func readRazorpayBody(w http.ResponseWriter, r *http.Request, allowed ...string) (razorpayBody, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &razorpayError{status: http.StatusRequestEntityTooLarge, code: "BAD_REQUEST_ERROR",
			description: "The request body may be at most 64 KiB."}
	case err != nil:
		return nil, razorpayBad("", "The request body could not be read.")
	}
	m := razorpayBody{}
	if len(bytes.TrimSpace(b)) > 0 {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&m); err != nil || m == nil {
			return nil, razorpayBad("", "The request body must be a JSON object.")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) { // the first refusal is the same every time
		if !slices.Contains(allowed, k) {
			return nil, razorpayBad(k, k+" is/are not required and should not be sent")
		}
	}
	return m, nil
}

// integer is field k as an integer; ok false when absent or null.
func (m razorpayBody) integer(k string) (n int64, ok bool, err error) {
	raw, has := m[k]
	if !has || string(raw) == "null" {
		return 0, false, nil
	}
	var num json.Number
	if json.Unmarshal(raw, &num) != nil {
		return 0, false, razorpayBad(k, "The "+k+" must be an integer.")
	}
	n, perr := num.Int64()
	if perr != nil {
		return 0, false, razorpayBad(k, "The "+k+" must be an integer.")
	}
	return n, true, nil
}

// str is field k as a string; ok false when absent or null.
func (m razorpayBody) str(k string) (s string, ok bool, err error) {
	raw, has := m[k]
	if !has || string(raw) == "null" {
		return "", false, nil
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", false, razorpayBad(k, "The "+k+" must be a string.")
	}
	return s, true, nil
}

// boolean is field k as a boolean; false when absent or null.
func (m razorpayBody) boolean(k string) (bool, error) {
	raw, has := m[k]
	if !has || string(raw) == "null" {
		return false, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, razorpayBad(k, "The "+k+" field must be true or false.")
	}
	return b, nil
}

// Razorpay's limits on notes.
const (
	razorpayMaxNotes     = 15
	razorpayMaxNoteValue = 255
)

// notes is field k (notes, customer, notify) as an object of strings
// (numbers and booleans kept as their JSON text), within Razorpay's notes
// limits when k is notes; nil when absent.
func (m razorpayBody) notes(k string) (map[string]string, error) {
	raw, has := m[k]
	if !has || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) == nil && len(arr) == 0 {
			return nil, nil // Razorpay's empty notes
		}
		return nil, razorpayBad(k, "The "+k+" must be an object.")
	}
	out := make(map[string]string, len(obj))
	for name, v := range obj {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		if k == "notes" && utf8.RuneCountInString(s) > razorpayMaxNoteValue {
			return nil, razorpayBad(k, "value: the length must not be greater than 255.")
		}
		out[name] = s
	}
	if k == "notes" && len(out) > razorpayMaxNotes {
		return nil, razorpayBad(k, "Number of fields in notes should be less than or equal to 15")
	}
	return out, nil
}

// encode is a core event as a Razorpay webhook: a payment is
// payment_link.paid (payload payment_link, payment and order), a failure
// payment_link.cancelled when the merchant cancelled the link and
// payment_link.expired otherwise (payload payment_link); a refund created
// pending is refund.created, one processed (at once, or later) is
// refund.processed, one failed refund.failed (payload refund and payment,
// as of the event).
func (f *razorpayFace) encode(e coreEvent) ([]providerEvent, error) {
	var typ string
	var contains []string
	payload := map[string]any{}
	in := e.Intent
	switch e.Kind {
	case EventPaymentSucceeded:
		typ, contains = "payment_link.paid", []string{"payment_link", "order", "payment"}
		payload["payment_link"] = map[string]any{"entity": razorpayLink(in)}
		payload["order"] = map[string]any{"entity": razorpayOrder(in)}
		payload["payment"] = map[string]any{"entity": razorpayPayment(in)}
	case EventPaymentFailed:
		typ, contains = "payment_link.expired", []string{"payment_link"}
		if in.Closed {
			typ = "payment_link.cancelled"
		}
		payload["payment_link"] = map[string]any{"entity": razorpayLink(in)}
	case EventRefundCreated, EventRefundSucceeded, EventRefundFailed:
		typ = map[string]string{EventRefundCreated: "refund.created", EventRefundSucceeded: "refund.processed",
			EventRefundFailed: "refund.failed"}[e.Kind]
		contains = []string{"refund", "payment"}
		payload["refund"] = map[string]any{"entity": razorpayRefund(in, *e.Refund)}
		payload["payment"] = map[string]any{"entity": razorpayPayment(in)}
	default:
		return nil, fmt.Errorf("no Razorpay event for %s", e.Kind)
	}
	body, err := json.Marshal(map[string]any{
		"entity":     "event",
		"account_id": razorpayAccountID,
		"event":      typ,
		"contains":   contains,
		"payload":    payload,
		"created_at": e.At.Unix(),
	})
	return []providerEvent{{e.ID, typ, body}}, err
}

// coreRefundID is the core's id of Refund id (rfnd_…); any other id as
// it is.
func (*razorpayFace) coreRefundID(id string) string {
	if hex, ok := strings.CutPrefix(id, razorpayRefundPrefix); ok {
		return coreRefundPrefix + hex
	}
	return id
}

// razorpayUserAgent is the User-Agent of Razorpay's webhook deliveries.
const razorpayUserAgent = "Razorpay-Webhook/v1"

// sign signs as Razorpay does: X-Razorpay-Signature is the hex
// HMAC-SHA256 of the raw body under the webhook secret (RazorpaySign).
// Razorpay sends one signature, so the first of secrets signs; a receiver
// rotating its secret accepts either. X-Razorpay-Event-Id is the event's
// id, the same on every delivery of it.
func (*razorpayFace) sign(h http.Header, eventID string, secrets []string, _ time.Time, body []byte) {
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", razorpayUserAgent)
	h.Set(RazorpayEventIDHeader, eventID)
	if len(secrets) > 0 {
		h.Set(RazorpaySignatureHeader, RazorpaySign(secrets[0], body))
	}
}

// RazorpaySign is the X-Razorpay-Signature of body under secret.
func RazorpaySign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// razorpayHex is the hex digits an intent's Razorpay ids share.
func razorpayHex(intentID string) string { return strings.TrimPrefix(intentID, razorpayLinkPrefix) }
