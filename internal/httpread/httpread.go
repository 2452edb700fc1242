// Package httpread is what the edge's and the origin's fasthttp servers
// share about reading a request before any handler runs: why a read failed
// (so that a connection on which nothing arrived is closed without an
// answer, a slow request gets 408 and a large head 431), the strict
// checks of a request head that fasthttp's parser leaves out, and the
// lingering close that lets a client still sending a refused body read
// its answer.
package httpread

import (
	"bytes"
	"errors"
	"net"
	"os"

	"github.com/valyala/fasthttp"
)

// Failure is why fasthttp could not read a request.
type Failure int

const (
	// NothingRead: no byte of a request arrived before the read deadline
	// or the peer's close. Nobody is waiting for an answer; one written
	// now would be read as the answer to the client's next request.
	NothingRead Failure = iota
	// Timeout: the request began but did not arrive in the read timeout (408).
	Timeout
	// HeadTooLarge: the request line and headers overflow the read buffer (431).
	HeadTooLarge
	// BodyTooLarge: the body is over the server's limit (413).
	BodyTooLarge
	// Malformed: anything else (400).
	Malformed
)

// Classify says why fasthttp reported err to a Server's ErrorHandler for
// the request in ctx.
//
// fasthttp closes an idle keep-alive connection silently, but on a new
// connection that carries nothing before ReadTimeout (or is reset by its
// peer) it hands the bare read error to the ErrorHandler, just as it does
// when a body stops part-way. Which one it was, only a connection from
// Listener can say; on others a bare read error on a connection's first
// request counts as NothingRead, so that nothing is ever written on a
// connection that may not have carried a request.
func Classify(ctx *fasthttp.RequestCtx, err error) Failure {
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small):
		return HeadTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return BodyTooLarge
	}
	if _, bare := err.(*net.OpError); bare && !began(ctx) {
		return NothingRead
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Timeout
	}
	return Malformed
}

// began reports whether a byte of a request has arrived on ctx's connection.
func began(ctx *fasthttp.RequestCtx) bool {
	if c, ok := ctx.Conn().(*conn); ok {
		return c.began
	}
	return ctx.ConnRequestNum() > 0 // set once a first request has been read
}

// HangUp closes ctx's connection from an ErrorHandler, so that the answer
// fasthttp writes after it goes nowhere.
func HangUp(ctx *fasthttp.RequestCtx) { _ = ctx.Conn().Close() }

// ErrMalformedHead is what Strict reports to the ErrorHandler for a head
// fasthttp parsed but HTTP/1.1 (RFC 9112) does not allow.
var ErrMalformedHead = errors.New("httpread: request head is not strict HTTP/1.x")

// Strict runs h for requests whose head passes CheckHead; it answers the
// others with onError(ctx, ErrMalformedHead) (a Server's ErrorHandler, which
// classifies it Malformed) and closes the connection.
func Strict(h fasthttp.RequestHandler, onError func(*fasthttp.RequestCtx, error)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !CheckHead(&ctx.Request.Header) {
			onError(ctx, ErrMalformedHead)
			ctx.SetConnectionClose()
			return
		}
		h(ctx)
	}
}

// CheckHead reports whether a head fasthttp accepted is also strict
// HTTP/1.x: version 1.0 or 1.1, no header name with a space or tab in it,
// and no header folded onto a continuation line (obs-fold). fasthttp
// accepts all three; a proxy or cache in front of us may read such a head
// differently from us, which is how requests get smuggled.
func CheckHead(h *fasthttp.RequestHeader) bool {
	switch string(h.Protocol()) {
	case "HTTP/1.1", "HTTP/1.0":
	default:
		return false
	}
	raw := h.RawHeaders()
	for len(raw) > 0 {
		switch raw[0] {
		case ' ', '\t':
			return false // obs-fold
		case '\r', '\n':
			return true // the blank line that ends the head
		}
		// The name, up to its colon: short, so byte by byte.
		i := 0
		for ; i < len(raw) && raw[i] != ':' && raw[i] != '\n'; i++ {
			if raw[i] == ' ' || raw[i] == '\t' {
				return false
			}
		}
		// The value, skipped to the end of its line.
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return true
		}
		raw = raw[i+j+1:]
	}
	return true
}

// ErrorHandler is a fasthttp Server's ErrorHandler for either tier: a new
// connection on which nothing arrived is closed without an answer, and every
// other failure is answered by answer, in the tier's own error shape, on a
// connection that lingers when fasthttp then closes it (see Linger).
func ErrorHandler(answer func(ctx *fasthttp.RequestCtx, f Failure)) func(ctx *fasthttp.RequestCtx, err error) {
	return func(ctx *fasthttp.RequestCtx, err error) {
		f := Classify(ctx, err)
		if f == NothingRead {
			HangUp(ctx)
			return
		}
		Linger(ctx) // fasthttp closes the connection after the answer; the request's rest is unread
		answer(ctx, f)
	}
}
