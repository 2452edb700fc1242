// Package reservepeers holds the two designs the origin's reserve path is
// compared with (issue 31), each the simplest fast way to sell a fixed
// stock and each a fasthttp server on a 127.0.0.1 port of its own that
// answers the origin's route, POST /v1/sales/{sale}/reserve with a JSON
// body {sku, idempotency_key}: 201 when it took a unit, 409
// {"error":"sold_out"} when none was left.
//
//   - Seckill is the classic Redis-Lua seckill: a script takes a unit from
//     one counter, and a process-local flag answers every request after the
//     last unit without asking Redis. It checks no account, no admission
//     token and no idempotency key.
//   - Serializable is the textbook Postgres design: one SERIALIZABLE
//     transaction per request reads the SKU's count, decrements it and
//     inserts an order; a transaction Postgres cannot serialize is
//     answered 503 and its unit stays unsold.
//
// Each reports the units it gave out by its own books (Sold), so a
// benchmark can check that neither sold more than its stock.
package reservepeers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults of both servers, the origin's own figures so that the designs
// differ in how they sell and not in their budgets.
const (
	// DefaultBudget bounds one request's Redis or Postgres work, as the
	// origin's RequestBudget.
	DefaultBudget = 3 * time.Second
	// maxBody is the largest request body read, as the origin's public
	// listener takes.
	maxBody = 64 << 10
)

// The peers' answers: fixed bodies, so both spend nothing on encoding.
var (
	bodyTaken       = []byte(`{"status":"taken"}`)
	bodySoldOut     = []byte(`{"error":"sold_out"}`)
	bodyUnknownSKU  = []byte(`{"error":"unknown_sku"}`)
	bodyInvalidBody = []byte(`{"error":"invalid_body"}`)
	bodyNotFound    = []byte(`{"error":"not_found"}`)
	bodyTryAgain    = []byte(`{"error":"serialization_failure"}`)
	bodyUnavailable = []byte(`{"error":"unavailable"}`)
	bodyInternal    = []byte(`{"error":"internal"}`)
	routePrefix     = []byte("/v1/sales/")
	routeSuffix     = []byte("/reserve")
)

// answer writes status with a fixed JSON body.
func answer(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// reserveSale is the {sale} of a POST /v1/sales/{sale}/reserve; ok is false
// for any other method or path.
func reserveSale(ctx *fasthttp.RequestCtx) (sale []byte, ok bool) {
	if !ctx.IsPost() {
		return nil, false
	}
	rest, found := bytes.CutPrefix(ctx.Path(), routePrefix)
	if !found {
		return nil, false
	}
	sale, found = bytes.CutSuffix(rest, routeSuffix)
	if !found || len(sale) == 0 || bytes.IndexByte(sale, '/') >= 0 {
		return nil, false
	}
	return sale, true
}

// server is one peer's listener and its fasthttp server.
type server struct {
	addr   string
	srv    *fasthttp.Server
	served chan error // Serve's result, once it has returned
}

// serve starts h on a 127.0.0.1 port of its own, with the origin's limits
// and timeouts.
func serve(name string, h fasthttp.RequestHandler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	s := &server{addr: ln.Addr().String(), served: make(chan error, 1), srv: &fasthttp.Server{
		Handler:               h,
		Name:                  name,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    maxBody,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
	}}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// shutdown stops accepting, waits for the requests in hand (within ctx),
// and waits for Serve to return.
func (s *server) shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	return errors.Join(err, <-s.served)
}
