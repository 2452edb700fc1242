package sandboxgateway

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Request limits.
const (
	maxBodyBytes          = 64 << 10
	maxIdempotencyKeyLen  = 255
	idempotencyKeyHeader  = "Idempotency-Key"
	unavailableRetryAfter = "1"
)

var _ http.Handler = (*Gateway)(nil)

// ServeHTTP serves the API, the sandbox endpoints and the hosted pay page.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }

// routes maps every endpoint: the personality's merchant API, and the
// sandbox's own endpoints, the same whatever the personality. /v1/* calls
// pass through api: latency,
// injected failures, then the API key. Everything under /sandbox/, unknown
// paths included, requires the control token (control), except that pay
// and fail also take the intent's pay key (payer).
func (g *Gateway) routes() *http.ServeMux {
	mux := http.NewServeMux()
	g.persona.routes(mux)

	mux.Handle("GET /sandbox/intents", g.control(g.handleList))
	mux.Handle("POST /sandbox/intents/{id}/pay", g.payer(g.handlePay))
	mux.Handle("POST /sandbox/intents/{id}/fail", g.payer(g.handleFail))
	mux.Handle("GET /sandbox/events", g.control(g.handleEvents))
	mux.Handle("GET /sandbox/webhooks", g.control(g.handleGetWebhooks))
	mux.Handle("PUT /sandbox/webhooks", g.control(g.handlePutWebhooks))
	mux.Handle("GET /sandbox/refunds", g.control(g.handleGetRefunds))
	mux.Handle("PUT /sandbox/refunds", g.control(g.handlePutRefunds))
	mux.Handle("POST /sandbox/refunds/{id}/process", g.control(g.handleSettleRefund(RefundSucceeded)))
	mux.Handle("POST /sandbox/refunds/{id}/fail", g.control(g.handleSettleRefund(RefundFailed)))

	mux.HandleFunc("GET /pay/{id}", g.handlePage)
	mux.Handle("GET /healthz", handler(func(w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	none := handler(func(_ http.ResponseWriter, r *http.Request) error { return noRoute(mux, r) })
	mux.Handle(sandboxPrefix, g.control(none))
	mux.Handle("/", none)
	return mux
}

// sandboxPrefix is the catch-all of the sandbox endpoints.
const sandboxPrefix = "/sandbox/"

// handler is an endpoint that may fail; its error is answered by writeError.
type handler func(w http.ResponseWriter, r *http.Request) error

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		writeError(w, err)
	}
}

// api wraps a /v1/* endpoint: it sleeps Latency, fails with FailureRate,
// then requires the API key.
func (g *Gateway) api(h handler) handler {
	key := []byte(bearerPrefix + g.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) error {
		if g.cfg.Latency > 0 {
			t := time.NewTimer(g.cfg.Latency)
			select {
			case <-r.Context().Done():
				t.Stop()
				return nil // the client is gone
			case <-t.C:
			}
		}
		if g.rnd.chance(g.cfg.FailureRate) {
			w.Header().Set("Retry-After", unavailableRetryAfter)
			return errUnavailable
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), key) != 1 {
			return challenge(w, errUnauthorized)
		}
		return h(w, r)
	}
}

// control wraps a /sandbox/* endpoint: it requires the control token.
func (g *Gateway) control(h handler) handler {
	token := []byte(bearerPrefix + g.cfg.ControlToken)
	return func(w http.ResponseWriter, r *http.Request) error {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), token) != 1 {
			return challenge(w, errNoControlToken)
		}
		return h(w, r)
	}
}

// payer wraps the pay and fail endpoints of intent {id}: they take the
// control token, or that intent's pay key, which the pay page reads from
// its pay_url. Another intent's key is refused like a wrong one, and so is
// any key for an unknown intent: without the control token, the answer
// tells nothing about which intents exist.
func (g *Gateway) payer(h handler) handler {
	token := []byte(bearerPrefix + g.cfg.ControlToken)
	return func(w http.ResponseWriter, r *http.Request) error {
		auth := []byte(r.Header.Get("Authorization"))
		key, isBearer := bytes.CutPrefix(auth, []byte(bearerPrefix))
		controlOK := subtle.ConstantTimeCompare(auth, token) == 1
		if !controlOK && !(isBearer && g.payKeyMatches(r.PathValue("id"), key)) {
			return challenge(w, errNoPayKey)
		}
		return h(w, r)
	}
}

// bearerPrefix starts every Authorization header the gateway accepts.
const bearerPrefix = "Bearer "

// challenge adds the WWW-Authenticate header a 401 carries and returns
// err, the 401 to answer.
func challenge(w http.ResponseWriter, err *apiError) error {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-gateway"`)
	return err
}

func (g *Gateway) handleCreate(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if msg := req.validate(); msg != "" {
		return badRequest(msg)
	}
	in, created, err := g.createIntent(key, req)
	if err != nil {
		return err
	}
	writeJSON(w, statusFor(created), in)
	return nil
}

func (g *Gateway) handleRefund(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var req struct {
		AmountMinor *int64 `json:"amount_minor"`
	}
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if req.AmountMinor != nil && *req.AmountMinor <= 0 {
		return badRequest("amount_minor must be a positive integer in minor units, or left out to refund the rest")
	}
	re, created, err := g.refund(r.PathValue("id"), key, req.AmountMinor, "")
	if err != nil {
		return err
	}
	writeJSON(w, statusFor(created), re)
	return nil
}

func (g *Gateway) handleGet(w http.ResponseWriter, r *http.Request) error {
	in, err := g.Intent(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// handleList answers {"intents": [...]} in creation order, optionally only
// those created at or after ?created_since=<RFC 3339>.
func (g *Gateway) handleList(w http.ResponseWriter, r *http.Request) error {
	var since time.Time
	if s := r.URL.Query().Get("created_since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return badRequest("created_since must be an RFC 3339 time, like 2026-01-02T15:04:05Z")
		}
		since = t
	}
	writeJSON(w, http.StatusOK, map[string][]Intent{"intents": g.intentsSince(since)})
	return nil
}

// payRequest is the optional body of POST /sandbox/intents/{id}/pay.
type payRequest struct {
	// Payer is the paying instrument, e.g. "upi:alice@okbank"; nil (no
	// body, or no field) means DefaultPayer.
	Payer *string `json:"payer"`
}

func (g *Gateway) handlePay(w http.ResponseWriter, r *http.Request) error {
	var req payRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	var payer string
	if req.Payer != nil {
		if !ValidPayer(*req.Payer) {
			return badRequest(fmt.Sprintf("payer must be 1 to %d bytes of printable characters without spaces, like upi:alice@okbank", maxPayerLen))
		}
		payer = *req.Payer
	}
	in, err := g.PayAs(r.PathValue("id"), payer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

func (g *Gateway) handleFail(w http.ResponseWriter, r *http.Request) error {
	in, err := g.Fail(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

func (g *Gateway) handleEvents(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string][]Event{"events": g.Events()})
	return nil
}

// webhookSetting is the body of PUT and GET /sandbox/webhooks.
type webhookSetting struct {
	Enabled *bool `json:"enabled"`
}

func (g *Gateway) handleGetWebhooks(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, webhookSetting{Enabled: new(g.WebhooksEnabled())})
	return nil
}

func (g *Gateway) handlePutWebhooks(w http.ResponseWriter, r *http.Request) error {
	var req webhookSetting
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Enabled == nil {
		return badRequest(`the body must be {"enabled": true} or {"enabled": false}`)
	}
	g.SetWebhooksEnabled(*req.Enabled)
	g.log.Info("webhooks switched", "enabled", *req.Enabled)
	writeJSON(w, http.StatusOK, req)
	return nil
}

// refundSetting is the body of PUT and GET /sandbox/refunds.
type refundSetting struct {
	Hold *bool `json:"hold"`
}

func (g *Gateway) handleGetRefunds(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, refundSetting{Hold: new(g.RefundsHeld())})
	return nil
}

func (g *Gateway) handlePutRefunds(w http.ResponseWriter, r *http.Request) error {
	var req refundSetting
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Hold == nil {
		return badRequest(`the body must be {"hold": true} or {"hold": false}`)
	}
	g.HoldRefunds(*req.Hold)
	g.log.Info("refund holding switched", "hold", *req.Hold)
	writeJSON(w, http.StatusOK, req)
	return nil
}

// handleSettleRefund settles refund {id} as status to and answers it.
func (g *Gateway) handleSettleRefund(to string) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		re, err := g.settleRefund(r.PathValue("id"), to)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, re)
		return nil
	}
}

// noRoute answers a request no endpoint matched: 405 when the path exists
// for another method, else 404.
func noRoute(mux *http.ServeMux, r *http.Request) error {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != sandboxPrefix && pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		return &apiError{http.StatusMethodNotAllowed, "method_not_allowed",
			r.Method + " is not allowed here; use " + strings.Join(allowed, " or ")}
	}
	return &apiError{http.StatusNotFound, "not_found", "no endpoint at " + r.URL.Path}
}

// statusFor is 201 for something created, 200 for an idempotent replay.
func statusFor(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// idempotencyKey returns the request's Idempotency-Key.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get(idempotencyKeyHeader)
	switch {
	case k == "":
		return "", &apiError{http.StatusBadRequest, "missing_idempotency_key", "the Idempotency-Key header is required"}
	case len(k) > maxIdempotencyKeyLen:
		return "", badRequest("the Idempotency-Key header may be at most 255 bytes")
	}
	return k, nil
}

// decodeBody decodes r's JSON body into v, rejecting unknown fields,
// trailing data and bodies over maxBodyBytes. allowEmpty lets an empty body
// leave v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && allowEmpty {
		return nil
	}
	if err == nil {
		if _, err = dec.Token(); errors.Is(err, io.EOF) {
			return nil
		} else if err == nil {
			return badRequest("the body must hold one JSON object and nothing after it")
		}
	}
	var (
		tooLarge  *http.MaxBytesError
		wrongType *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "the body may be at most 64 KiB"}
	case errors.As(err, &wrongType) && wrongType.Field != "":
		return badRequest("field " + wrongType.Field + " must be a JSON " + jsonKind(wrongType.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("the body must be a JSON object")
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "float"):
		return "integer"
	case kind == "map", kind == "struct":
		return "object"
	case kind == "ptr":
		return "value of the right type"
	}
	return kind
}

// apiError is an answer for a request that went wrong.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(message string) *apiError {
	return &apiError{http.StatusBadRequest, "bad_request", message}
}

var (
	errUnauthorized   = &apiError{http.StatusUnauthorized, "unauthorized", "a valid Authorization: Bearer <API key> header is required"}
	errNoControlToken = &apiError{http.StatusUnauthorized, "unauthorized", "a valid Authorization: Bearer <control token> header is required"}
	errNoPayKey       = &apiError{http.StatusUnauthorized, "unauthorized", "a valid Authorization: Bearer <control token, or this intent's pay key from its pay_url> header is required"}
	errUnavailable    = &apiError{http.StatusServiceUnavailable, "unavailable", "the gateway is temporarily unavailable; retry with the same Idempotency-Key"}
)

// errorAnswers maps the intent and refund store's errors to their answers.
var errorAnswers = []struct {
	err error
	ans apiError
}{
	{ErrUnknownIntent, apiError{http.StatusNotFound, "unknown_intent", "no intent has that id"}},
	{ErrIntentFailed, apiError{http.StatusConflict, "intent_failed", "this payment has failed and cannot be paid"}},
	{ErrIntentSucceeded, apiError{http.StatusConflict, "intent_succeeded", "this payment has succeeded and cannot fail"}},
	{ErrUnknownRefund, apiError{http.StatusNotFound, "unknown_refund", "no refund has that id"}},
	{ErrRefundNotPending, apiError{http.StatusConflict, "refund_not_pending", "this refund is settled; only a pending refund can be processed or failed"}},
	{errNotSucceeded, apiError{http.StatusConflict, "intent_not_succeeded", "only a succeeded intent can be refunded"}},
	{errRefundExceeds, apiError{http.StatusConflict, "refund_exceeds_amount", "the refunds would exceed the intent's amount"}},
	{errIdempotencyUsed, apiError{http.StatusConflict, "idempotency_conflict", "this Idempotency-Key was used with a different request"}},
}

// writeError answers err: an *apiError as it is, a store error by
// errorAnswers, anything else as a 500 that hides it.
func writeError(w http.ResponseWriter, err error) {
	ans := apiError{http.StatusInternalServerError, "internal", "the gateway failed unexpectedly"}
	var ae *apiError
	if errors.As(err, &ae) {
		ans = *ae
	} else {
		for _, m := range errorAnswers {
			if errors.Is(err, m.err) {
				ans = m.ans
				break
			}
		}
	}
	writeJSON(w, ans.status, map[string]string{"error": ans.code, "message": ans.message})
}

// writeJSON answers v as JSON with status, never to be sniffed as another
// type or cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
