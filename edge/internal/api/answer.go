package api

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"
)

// The hot answers (join, status poll, errors) are written by hand into a
// stack buffer instead of through encoding/json: the same bytes json.Marshal
// writes for them (tests compare the two), without reflection or allocation.

// answerBufLen is the stack buffer the hot answers are built in; a longer
// answer still works (append grows it on the heap).
const answerBufLen = 1024

// appendQueueAnswer appends a's JSON as json.Marshal encodes queueAnswer.
func appendQueueAnswer(b []byte, a *queueAnswer) []byte {
	b = append(b, '{')
	if a.State != "" {
		b = append(b, `"state":`...)
		b = appendJSONString(b, a.State)
		b = append(b, ',')
	}
	if a.QueueToken != "" {
		b = append(b, `"queue_token":`...)
		b = appendJSONString(b, a.QueueToken)
		b = append(b, ',')
	}
	b = append(b, `"position":`...)
	b = strconv.AppendInt(b, a.Position, 10)
	b = append(b, `,"now_serving":`...)
	b = strconv.AppendInt(b, a.NowServing, 10)
	b = append(b, `,"estimated_wait_s":`...)
	b = strconv.AppendInt(b, a.EstimatedWaitS, 10)
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, a.PollAfterMS, 10)
	if a.PreQueue {
		b = append(b, `,"pre_queue":true`...)
	}
	if a.Paused {
		b = append(b, `,"paused":true`...)
	}
	if a.AdmissionToken != "" {
		b = append(b, `,"admission_token":`...)
		b = appendJSONString(b, a.AdmissionToken)
	}
	if a.Final != nil {
		b = append(b, `,"final":`...)
		b = strconv.AppendBool(b, *a.Final)
	}
	return append(b, '}')
}

// appendErrorBody appends the contract's error body {"error","message"} as
// json.Marshal encodes it.
func appendErrorBody(b []byte, code, message string) []byte {
	b = append(b, `{"error":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, message)
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal encodes a string: as it is
// when it is printable ASCII without the quote, the backslash and the
// characters encoding/json escapes for HTML; through encoding/json otherwise.
func appendJSONString(b []byte, s string) []byte {
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

// writeQueueAnswer writes a as the JSON body with status, not to be cached.
func writeQueueAnswer(ctx *fasthttp.RequestCtx, status int, a *queueAnswer) {
	var buf [answerBufLen]byte
	writeBody(ctx, status, appendQueueAnswer(buf[:0], a))
}

// writeBody writes body (JSON) with status, not to be cached. The body is copied.
func writeBody(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.SetCanonical(headerCacheControl, noStore)
	ctx.SetBody(body)
}

// The response headers the hot paths set, in the form fasthttp's Set would
// normalize them to (the servers keep header names normalized), so that
// SetCanonical can skip normalizing them again on every request.
var (
	headerCacheControl       = fasthttp.AppendNormalizedHeaderKey(nil, "Cache-Control")
	headerRetryAfter         = fasthttp.AppendNormalizedHeaderKey(nil, "Retry-After")
	headerRateLimitLimit     = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Limit")
	headerRateLimitRemaining = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Remaining")
	headerRateLimitReset     = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Reset")
	noStore                  = []byte("no-store")
)
