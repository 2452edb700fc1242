package api

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
)

// The hot answers (join and status poll) are written by hand into a stack
// buffer instead of through encoding/json: the same bytes json.Marshal
// writes for them (tests compare the two), without reflection or allocation.
// Errors are httpapi.WriteError's, written the same way.

// answerBufLen is the stack buffer the hot answers are built in; a longer
// answer still works (append grows it on the heap).
const answerBufLen = 1024

// appendQueueAnswer appends a's JSON as json.Marshal encodes queueAnswer.
func appendQueueAnswer(b []byte, a *queueAnswer) []byte {
	b = append(b, '{')
	if a.State != "" {
		b = append(b, `"state":`...)
		b = httpapi.AppendJSONString(b, a.State)
		b = append(b, ',')
	}
	if a.QueueToken != "" {
		b = append(b, `"queue_token":`...)
		b = httpapi.AppendJSONString(b, a.QueueToken)
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
		b = httpapi.AppendJSONString(b, a.AdmissionToken)
	}
	if a.Final != nil {
		b = append(b, `,"final":`...)
		b = strconv.AppendBool(b, *a.Final)
	}
	return append(b, '}')
}

// writeQueueAnswer writes a as the JSON body with status, not to be cached.
func writeQueueAnswer(ctx *fasthttp.RequestCtx, status int, a *queueAnswer) {
	var buf [answerBufLen]byte
	httpapi.WriteBody(ctx, status, appendQueueAnswer(buf[:0], a))
}

// The response headers the hot paths set, in the form fasthttp's Set would
// normalize them to (the servers keep header names normalized), so that
// SetCanonical can skip normalizing them again on every request.
var (
	headerRateLimitLimit     = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Limit")
	headerRateLimitRemaining = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Remaining")
	headerRateLimitReset     = fasthttp.AppendNormalizedHeaderKey(nil, "X-RateLimit-Reset")
)
