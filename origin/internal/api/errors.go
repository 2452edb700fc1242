package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"

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

// pleaseWait is what a shopper hears when a dependency is down or slow.
var pleaseWait = &Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       "please_wait",
	Message:    "The sale is busy right now; please try again in a moment.",
	RetryAfter: 2,
}

// writeError maps err to its response: an *Error as it is, a token error to
// 401 with its code, and anything else (Redis or Postgres down, a timeout)
// to 503 please_wait, logged, because nothing the client sent causes those.
func writeError(ctx *fasthttp.RequestCtx, log *slog.Logger, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case isTokenError(err):
		e = fail(fasthttp.StatusUnauthorized, tokens.Code(err), tokenMessage(err))
	default:
		if !errors.Is(err, context.Canceled) {
			log.Warn("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
		}
		e = pleaseWait
	}
	if e.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(ctx, e.Status, struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{e.Code, e.Message})
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

func tokenMessage(err error) string {
	switch tokens.Code(err) {
	case "missing_token":
		return "This request needs an Authorization: Bearer token."
	case "token_expired":
		return "The token has expired."
	case "wrong_sale":
		return "The token is for another sale."
	case "wrong_account":
		return "The token is for another account."
	}
	return "The token is not valid."
}

// writeJSON writes v as the JSON body with status.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		body = []byte(`{"error":"internal","message":"The answer could not be encoded."}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(body)
}
