package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"regexp"
	"strings"

	"github.com/valyala/fasthttp"
)

// decodeJSON reads the request body into v: it must be application/json, at
// most maxBytes, one JSON object with no fields v does not know.
func decodeJSON(ctx *fasthttp.RequestCtx, maxBytes int, v any) error {
	media, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || media != "application/json" {
		return fail(fasthttp.StatusUnsupportedMediaType, "unsupported_media_type", "The body must be JSON, sent as Content-Type: application/json.")
	}
	body := ctx.PostBody()
	if len(body) > maxBytes {
		return bodyTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return fail(fasthttp.StatusBadRequest, "invalid_json", "The body is empty; a JSON object is expected.")
		case errors.As(err, &typeErr):
			return fail(fasthttp.StatusBadRequest, "invalid_field", "Field "+typeErr.Field+" has the wrong type.")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fail(fasthttp.StatusBadRequest, "unknown_field", "The body has a field this endpoint does not take: "+strings.TrimPrefix(err.Error(), "json: unknown field ")+".")
		default:
			return fail(fasthttp.StatusBadRequest, "invalid_json", "The body is not valid JSON.")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(fasthttp.StatusBadRequest, "invalid_json", "The body has data after the JSON object.")
	}
	return nil
}

var bodyTooLarge = fail(fasthttp.StatusRequestEntityTooLarge, "body_too_large", "The body is larger than this endpoint takes.")

// idPattern is the alphabet of sale and SKU ids: they become parts of Redis
// keys and URLs.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validOpaque accepts account ids and idempotency keys: printable ASCII
// without spaces, at most 128 bytes.
func validOpaque(s string) bool {
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

// bearer returns the token of an Authorization: Bearer header, or "".
func bearer(ctx *fasthttp.RequestCtx) string {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(string(h[:7]), "bearer ") {
		return strings.TrimSpace(string(h[7:]))
	}
	return ""
}
