package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/inproc"
)

// bareBody is what the bare handler answers: a small fixed JSON body, the
// size and shape of a status-poll answer.
var bareBody = []byte(`{"state":"waiting","position":12345,"now_serving":2345,"estimated_wait_s":100,"poll_after_ms":25000}`)

// bare is the ceiling every path is set beside: a fasthttp handler that
// answers bareBody, on a server built by the node's own App.Server (same
// timeouts, limits and error handler as the edge's listener).
type bare struct {
	addr   string
	srv    *fasthttp.Server
	served chan error
}

func startBare(n *inproc.Edge) (*bare, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bare server: listen: %w", err)
	}
	b := &bare{addr: ln.Addr().String(), served: make(chan error, 1), srv: n.App.Server(func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(bareBody)
	})}
	go func() { b.served <- b.srv.Serve(ln) }()
	return b, nil
}

func (b *bare) stop(ctx context.Context) error {
	err := b.srv.ShutdownWithContext(ctx)
	return errors.Join(err, <-b.served)
}
