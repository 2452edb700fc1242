package httpapi

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"
)

// The response headers written on every answer, in the form fasthttp's Set
// would normalize them to, so that SetCanonical can skip normalizing them
// again on every request.
var (
	HeaderCacheControl       = fasthttp.AppendNormalizedHeaderKey(nil, "Cache-Control")
	HeaderRetryAfter         = fasthttp.AppendNormalizedHeaderKey(nil, "Retry-After")
	HeaderRequestID          = fasthttp.AppendNormalizedHeaderKey(nil, "X-Request-Id")
	HeaderContentTypeOptions = fasthttp.AppendNormalizedHeaderKey(nil, "X-Content-Type-Options")
	noStore                  = []byte("no-store")
	noSniff                  = []byte("nosniff")
)

// bufLen is the stack buffer an error answer is built in; a longer one
// still works (append grows it on the heap).
const bufLen = 512

// WriteError answers e on ctx: its status, Retry-After when it has one,
// X-Request-Id, not to be cached, and the JSON body
// {"error","message","request_id"}. It does not allocate.
func WriteError(ctx *fasthttp.RequestCtx, e *Error) {
	var buf [bufLen]byte
	b := buf[:0]
	if e.RetryAfter > 0 {
		b = strconv.AppendInt(b, int64(e.RetryAfter), 10)
		ctx.Response.Header.SetCanonical(HeaderRetryAfter, b)
		b = b[:0]
	}
	b = AppendRequestID(b, ctx)
	ctx.Response.Header.SetCanonical(HeaderRequestID, b)
	id := len(b)
	b = append(b, `{"error":`...)
	b = AppendJSONString(b, e.Code)
	b = append(b, `,"message":`...)
	b = AppendJSONString(b, e.Message)
	b = append(b, `,"request_id":`...)
	b = append(b, '"')
	b = append(b, b[:id]...) // AppendRequestID writes only characters JSON takes as they are
	b = append(b, '"')
	b = append(b, '}')
	WriteBody(ctx, e.Status, b[id:])
}

// WriteJSON writes v as the JSON body with status, not to be cached.
func WriteJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		body = []byte(`{"error":"internal","message":"The answer could not be encoded."}`)
	}
	WriteBody(ctx, status, body)
}

// WriteBody writes body (JSON) with status, not to be cached and not to be
// sniffed as anything but JSON. The body is copied.
func WriteBody(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.SetCanonical(HeaderCacheControl, noStore)
	ctx.Response.Header.SetCanonical(HeaderContentTypeOptions, noSniff)
	ctx.SetBody(body)
}

// AppendJSONString appends s as json.Marshal encodes a string: as it is
// when it is printable ASCII without the quote, the backslash and the
// characters encoding/json escapes for HTML; through encoding/json otherwise.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			q, err := json.Marshal(s) // a string always encodes
			if err != nil {
				return append(b, `""`...)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
