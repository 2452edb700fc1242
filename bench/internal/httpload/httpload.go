// Package httpload drives one HTTP endpoint with fasthttp from a fixed number
// of connections, sending pre-built requests so that the load generator's own
// work stays small and the same for every server it is pointed at.
package httpload

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
)

// Request is one pre-built request: everything but the host.
type Request struct {
	Method        string
	Path          string
	Authorization []byte // the whole header value; nil sends none
	UserToken     []byte // X-User-Token (the edge's status poll and reserve); nil sends none
	ContentType   string
	Body          []byte
}

// Options bound a run against one server.
type Options struct {
	// Addr is the server's host:port.
	Addr string
	// Conns is how many connections (and goroutines) send at once.
	Conns int
	// Timeout bounds one request; 0 means 5 s.
	Timeout time.Duration
}

// Client sends requests to one server over up to Conns keep-alive
// connections. Build one per server and reuse it for warm-up and timed runs.
type Client struct {
	opts Options
	hc   *fasthttp.HostClient
}

// New returns a Client for opts.Addr.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	opts.Conns = max(opts.Conns, 1)
	return &Client{opts: opts, hc: &fasthttp.HostClient{
		Addr:                      opts.Addr,
		MaxConns:                  opts.Conns,
		MaxIdemponentCallAttempts: 1, // a benchmark counts failures, it does not hide them
		ReadTimeout:               opts.Timeout,
		WriteTimeout:              opts.Timeout,
	}}
}

// Run sends reqs[first] to reqs[first+n-1] and labels each answer with its
// HTTP status.
func (c *Client) Run(ctx context.Context, reqs []Request, first, n int) loadgen.Result {
	return loadgen.Run(ctx, loadgen.Options{Workers: c.opts.Conns, Calls: n, First: first}, func() loadgen.Func {
		req, resp := new(fasthttp.Request), new(fasthttp.Response)
		return func(_ context.Context, i int) (int, error) {
			r := &reqs[i]
			req.Header.SetMethod(r.Method)
			req.SetRequestURI(r.Path)
			req.SetHost(c.opts.Addr)
			if r.Authorization != nil {
				req.Header.SetBytesV(fasthttp.HeaderAuthorization, r.Authorization)
			}
			if r.UserToken != nil {
				req.Header.SetBytesV("X-User-Token", r.UserToken)
			}
			if r.ContentType != "" {
				req.Header.SetContentType(r.ContentType)
			}
			req.SetBodyRaw(r.Body)
			err := c.hc.DoTimeout(req, resp, c.opts.Timeout)
			if err != nil {
				return 0, err
			}
			return resp.StatusCode(), nil
		}
	})
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }
