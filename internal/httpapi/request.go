package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread"
)

// processPrefix starts the request ids this process makes, so that ids
// from two processes (or two runs of one) never collide in the logs.
var processPrefix = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on supported platforms
	return hex.EncodeToString(b[:])
}()

// maxRequestIDLen bounds an X-Request-Id taken from a request.
const maxRequestIDLen = 64

// AppendRequestID appends the id of ctx's request: the X-Request-Id it
// arrived with when that is 1 to 64 characters of [A-Za-z0-9._-] (the edge
// sends its id with every request it forwards to the origin; a CDN may set
// one too), else one made of this process's random prefix and the server's
// number for the request.
func AppendRequestID(b []byte, ctx *fasthttp.RequestCtx) []byte {
	if in := ctx.Request.Header.PeekBytes(HeaderRequestID); validRequestID(in) {
		return append(b, in...)
	}
	b = append(b, processPrefix...)
	b = append(b, '-')
	return strconv.AppendUint(b, ctx.ID(), 36)
}

// RequestID is AppendRequestID as a string, for log lines.
func RequestID(ctx *fasthttp.RequestCtx) string {
	var buf [maxRequestIDLen + 16]byte
	return string(AppendRequestID(buf[:0], ctx))
}

func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for _, c := range id {
		if !idChar(c) && c != '.' {
			return false
		}
	}
	return true
}

// idChar reports whether c may stand in a sale, SKU or request id.
func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// ValidID accepts sale and SKU ids: 1 to 64 characters of [A-Za-z0-9_-].
// They become parts of Redis keys and URLs.
func ValidID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idChar(s[i]) {
			return false
		}
	}
	return true
}

// ValidOpaque accepts account ids, reservation and order ids and
// idempotency keys: printable ASCII without spaces, at most 128 bytes.
func ValidOpaque(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Bearer returns the token of an Authorization: Bearer header, or "".
func Bearer(ctx *fasthttp.RequestCtx) string {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(string(h[:7]), "bearer ") {
		return strings.TrimSpace(string(h[7:]))
	}
	return ""
}

// DecodeJSON reads the request body into v: it must be application/json, at
// most maxBytes, one JSON object with no fields v does not know. Its errors
// are *Error answers (415, 413 or 400).
func DecodeJSON(ctx *fasthttp.RequestCtx, maxBytes int, v any) error {
	media, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || media != "application/json" {
		return New(fasthttp.StatusUnsupportedMediaType, CodeUnsupportedMedia, "The body must be JSON, sent as Content-Type: application/json.")
	}
	body := ctx.PostBody()
	if len(body) > maxBytes {
		return ErrBodyTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return New(fasthttp.StatusBadRequest, CodeInvalidJSON, "The body is empty; a JSON object is expected.")
		case errors.As(err, &typeErr):
			return New(fasthttp.StatusBadRequest, CodeInvalidField, "Field "+typeErr.Field+" has the wrong type.")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return New(fasthttp.StatusBadRequest, CodeUnknownField, "The body has a field this endpoint does not take: "+strings.TrimPrefix(err.Error(), "json: unknown field ")+".")
		default:
			return New(fasthttp.StatusBadRequest, CodeInvalidJSON, "The body is not valid JSON.")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return New(fasthttp.StatusBadRequest, CodeInvalidJSON, "The body has data after the JSON object.")
	}
	return nil
}

// ErrorHandler is a fasthttp.Server's ErrorHandler for either tier: it
// answers requests fasthttp could not read (and heads httpread.Strict
// refuses) in the contract's shape — 408, 431, 413 or 400 — on a
// connection that lingers as fasthttp closes it (httpread.Lingering), and
// closes without an answer a new connection on which no request arrived.
func ErrorHandler() func(ctx *fasthttp.RequestCtx, err error) {
	return httpread.ErrorHandler(func(ctx *fasthttp.RequestCtx, f httpread.Failure) {
		WriteError(ctx, ReadFailureAnswer(f))
	})
}

// ExpectHandler is a fasthttp.Server's ExpectHandler for either tier, whose
// bodies may take maxBodyBytes (0: fasthttp's default limit). A request
// with Expect: 100-continue whose head already says it will be refused — a
// Content-Length over the limit (413), a head httpread.Strict refuses (400) —
// gets that answer at once, in the contract's shape, and the connection is
// closed, lingering (httpread.Linger) for a client that sends its body
// without waiting; only the others are told 100 Continue and send their
// bodies.
//
// fasthttp's documentation asks an ExpectHandler not to touch the response;
// on a refusal it writes ctx.Response, with the status returned, as the
// final answer, and the handler never runs. Only a refusal writes it here;
// internal/serve's tests hold fasthttp to that.
func ExpectHandler(maxBodyBytes int) func(ctx *fasthttp.RequestCtx) int {
	if maxBodyBytes <= 0 {
		maxBodyBytes = fasthttp.DefaultMaxRequestBodySize
	}
	return func(ctx *fasthttp.RequestCtx) int {
		var e *Error
		switch {
		case !httpread.CheckHead(&ctx.Request.Header):
			e = ErrBadRequest
		case ctx.Request.Header.ContentLength() > maxBodyBytes:
			e = ErrBodyTooLarge
		default:
			return fasthttp.StatusContinue
		}
		httpread.Linger(ctx) // fasthttp closes the connection; a client that did not wait may be sending its body
		WriteError(ctx, e)
		return e.Status
	}
}

// ReadFailureAnswer is the answer to a request that could not be read for f.
func ReadFailureAnswer(f httpread.Failure) *Error {
	switch f {
	case httpread.Timeout:
		return ErrRequestTimeout
	case httpread.HeadTooLarge:
		return ErrHeadTooLarge
	case httpread.BodyTooLarge:
		return ErrBodyTooLarge
	}
	return ErrBadRequest
}

// AddressKey is ip as the key of a per-address limit: an IPv4 address as
// it is, an IPv6 address by its /64, which one host or customer usually
// holds whole (keyed by /128, one host could take a limit's budget many
// times over and fill the limiter's memory).
func AddressKey(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
