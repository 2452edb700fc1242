// Package httpapi is what the edge's and the origin's HTTP handlers share
// about answering: the Error every failure becomes (status, stable code,
// message), a tier's table from the errors its services return to those
// answers (so that the response and the metrics classify an error the same
// way), the request id each error answer and its log line carry, and the
// small readers every handler needs (bearer tokens, ids, JSON bodies).
//
// Each tier keeps its own table and its own codes; this package holds only
// the codes both tiers answer with.
package httpapi

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/tokens"
)

// Error is an answer other than success: an HTTP status and a stable code.
// Handlers return it (or a sentinel their tier's Table maps to one); no
// client ever sees err.Error() of anything else.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int // seconds; 0 means no Retry-After header
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New returns the answer status with code and message.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// The codes both tiers answer with. A tier's own codes sit beside its table.
const (
	CodePleaseWait       = "please_wait"
	CodeBadRequest       = "bad_request"
	CodeRequestTimeout   = "request_timeout"
	CodeHeadTooLarge     = "request_header_too_large"
	CodeBodyTooLarge     = "body_too_large"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnauthorized     = "unauthorized"
	CodeRateLimited      = "rate_limited"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidField     = "invalid_field"
	CodeUnknownField     = "unknown_field"
	CodeInternal         = "internal"
)

// PleaseWait is what a shopper hears when a dependency is down or slow:
// nothing the client sent causes it, and trying again soon may work.
var PleaseWait = &Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       CodePleaseWait,
	Message:    "The sale is busy right now; please try again in a moment.",
	RetryAfter: 2,
}

// Answers to requests the server could not read (see ReadFailure).
var (
	ErrRequestTimeout = New(fasthttp.StatusRequestTimeout, CodeRequestTimeout, "The request did not arrive in time.")
	ErrHeadTooLarge   = New(fasthttp.StatusRequestHeaderFieldsTooLarge, CodeHeadTooLarge, "The request's headers are larger than this server takes.")
	ErrBodyTooLarge   = New(fasthttp.StatusRequestEntityTooLarge, CodeBodyTooLarge, "The body is larger than this server takes.")
	ErrBadRequest     = New(fasthttp.StatusBadRequest, CodeBadRequest, "The request could not be read.")
	ErrNotFound       = New(fasthttp.StatusNotFound, CodeNotFound, "There is nothing at this path.")
)

// Table maps the errors a tier's handlers return to their answers. An
// *Error answers as it is, a token failure as 401 with its code, a sentinel
// added with Map as its answer, and anything else as the table's fallback
// (PleaseWait): a dependency down, which the caller logs.
type Table struct {
	rules    []rule
	fallback *Error
}

type rule struct {
	target error
	answer *Error
}

// NewTable returns a table whose unknown errors answer fallback.
func NewTable(fallback *Error) *Table { return &Table{fallback: fallback} }

// Map makes every error that errors.Is target answer with answer. Rules are
// tried in the order they were added. Map is for building the table before
// it serves; it is not safe to call concurrently with Classify.
func (t *Table) Map(target error, answer *Error) *Table {
	t.rules = append(t.rules, rule{target, answer})
	return t
}

// Classify returns err's answer, and whether err was expected: false means
// no rule knew it (a dependency failed), and the caller should log it.
func (t *Table) Classify(err error) (answer *Error, expected bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	if e := tokenAnswer(err); e != nil {
		return e, true
	}
	for _, r := range t.rules {
		if errors.Is(err, r.target) {
			return r.answer, true
		}
	}
	return t.fallback, false
}

// tokenFailures are the token errors answered 401; tokens.Code names them.
var tokenFailures = []error{tokens.ErrMissing, tokens.ErrMalformed, tokens.ErrExpired,
	tokens.ErrInvalid, tokens.ErrWrongSale, tokens.ErrWrongAccount}

// tokenAnswers are the 401 answers by the code tokens.Code gives.
var tokenAnswers = map[string]*Error{
	"missing_token": New(fasthttp.StatusUnauthorized, "missing_token", "This request needs an Authorization: Bearer token."),
	"token_expired": New(fasthttp.StatusUnauthorized, "token_expired", "The token has expired."),
	"wrong_sale":    New(fasthttp.StatusUnauthorized, "wrong_sale", "The token is for another sale."),
	"wrong_account": New(fasthttp.StatusUnauthorized, "wrong_account", "The token is for another account."),
	"invalid_token": New(fasthttp.StatusUnauthorized, "invalid_token", "The token is not valid."),
	// A signed request (tokens.RequestVerifier) taken once already.
	"replayed_request": New(fasthttp.StatusUnauthorized, "replayed_request", "This signed request has been taken once already."),
}

// tokenAnswer is the 401 for a token failure, or nil when err is none.
func tokenAnswer(err error) *Error {
	for _, target := range tokenFailures {
		if errors.Is(err, target) {
			if e, ok := tokenAnswers[tokens.Code(err)]; ok {
				return e
			}
			return tokenAnswers["invalid_token"]
		}
	}
	return nil
}
