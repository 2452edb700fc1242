package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread"
	"github.com/flashgate/flashgate/tokens"
)

// Error is an answer other than success: an HTTP status and a stable code.
// Handlers return it; writeError turns every error into a response, and no
// client ever sees err.Error() of anything else.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int // seconds; 0 means no Retry-After header
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func fail(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// pleaseWait is the answer while Redis or the origin cannot be reached.
var pleaseWait = &Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       "please_wait",
	Message:    "The sale is busy right now; please try again in a moment.",
	RetryAfter: 2,
}

// errNotReady is please_wait for a sale the edge cannot answer for yet: it
// is starting, its last snapshot of the sale is older than the bound, or
// the sale is newer than its last list of the origin's sales.
var errNotReady = &Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       "please_wait",
	Message:    "The sale's current state is not known here yet; please try again in a moment.",
	RetryAfter: 1,
}

var (
	errUnknownSale = fail(fasthttp.StatusNotFound, "unknown_sale", "There is no such sale.")
	errSaleClosed  = fail(fasthttp.StatusConflict, "sale_closed", "The sale is over.")
	errSoldOut     = fail(fasthttp.StatusConflict, "sold_out", "Sold out.")
	errNotFound    = fail(fasthttp.StatusNotFound, "not_found", "There is nothing at this path.")
)

// writeError maps err to its response: an *Error as it is, a token error to
// 401 with its code, anything else (a dependency down) to 503 please_wait.
func writeError(ctx *fasthttp.RequestCtx, log *slog.Logger, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case tokens.Code(err) != "" && isTokenError(err):
		e = fail(fasthttp.StatusUnauthorized, tokens.Code(err), "The token is missing, expired or not valid for this request.")
	default:
		log.Warn("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
		e = pleaseWait
	}
	if e.RetryAfter > 0 {
		var buf [20]byte
		ctx.Response.Header.SetCanonical(headerRetryAfter, strconv.AppendInt(buf[:0], int64(e.RetryAfter), 10))
	}
	var buf [answerBufLen]byte
	writeBody(ctx, e.Status, appendErrorBody(buf[:0], e.Code, e.Message))
}

func isTokenError(err error) bool {
	for _, target := range []error{tokens.ErrMissing, tokens.ErrMalformed, tokens.ErrExpired,
		tokens.ErrInvalid, tokens.ErrWrongSale, tokens.ErrWrongAccount} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// writeJSON writes v as the JSON body with status, not to be cached.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		body = []byte(`{"error":"internal","message":"The answer could not be encoded."}`)
	}
	writeBody(ctx, status, body)
}

// Answers to requests fasthttp could not read.
var (
	errRequestTimeout = fail(fasthttp.StatusRequestTimeout, "request_timeout", "The request did not arrive in time.")
	errHeadTooLarge   = fail(fasthttp.StatusRequestHeaderFieldsTooLarge, "request_header_too_large", "The request's headers are larger than the edge takes.")
	errBodyTooLarge   = fail(fasthttp.StatusRequestEntityTooLarge, "body_too_large", "The body is larger than the edge takes.")
	errBadRequest     = fail(fasthttp.StatusBadRequest, "bad_request", "The request could not be read.")
)

// ErrorHandler answers requests fasthttp could not read (and heads
// httpread.Strict refuses) in the contract's shape, and closes without an
// answer a new connection on which no request arrived.
func ErrorHandler(log *slog.Logger) func(ctx *fasthttp.RequestCtx, err error) {
	return httpread.ErrorHandler(func(ctx *fasthttp.RequestCtx, f httpread.Failure) {
		e := errBadRequest
		switch f {
		case httpread.Timeout:
			e = errRequestTimeout
		case httpread.HeadTooLarge:
			e = errHeadTooLarge
		case httpread.BodyTooLarge:
			e = errBodyTooLarge
		}
		writeError(ctx, log, e)
	})
}
