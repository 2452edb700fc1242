// HTTP load: one endpoint driven with fasthttp from a fixed number of
// connections, with pre-built requests so that the load generator's own
// work stays small and the same for every server it is pointed at.

package loadgen

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
)

// HTTPRequest is one pre-built HTTP request: everything but the host.
type HTTPRequest struct {
	Method        string
	Path          string
	Authorization []byte // the whole header value; nil sends none
	UserToken     []byte // X-User-Token (the edge's status poll and reserve); nil sends none
	ContentType   string
	Body          []byte
}

// HTTPOptions bound an HTTP run against one server.
type HTTPOptions struct {
	// Addr is the server's host:port.
	Addr string
	// Conns is how many connections (and goroutines) send at once.
	Conns int
	// Timeout bounds one request; 0 means 5 s.
	Timeout time.Duration
}

// HTTPClient sends requests to one server over up to Conns keep-alive
// connections. Build one per server and reuse it for warm-up and timed runs.
type HTTPClient struct {
	opts HTTPOptions
	hc   *fasthttp.HostClient
}

// NewHTTP returns an HTTPClient for opts.Addr.
func NewHTTP(opts HTTPOptions) *HTTPClient {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	opts.Conns = max(opts.Conns, 1)
	return &HTTPClient{opts: opts, hc: &fasthttp.HostClient{
		Addr:                      opts.Addr,
		MaxConns:                  opts.Conns,
		MaxIdemponentCallAttempts: 1, // a benchmark counts failures, it does not hide them
		ReadTimeout:               opts.Timeout,
		WriteTimeout:              opts.Timeout,
	}}
}

// Run sends reqs[first] to reqs[first+n-1] and labels each answer with its
// HTTP status.
func (c *HTTPClient) Run(ctx context.Context, reqs []HTTPRequest, first, n int) Result {
	return Run(ctx, Options{Workers: c.opts.Conns, Calls: n, First: first}, func() Func {
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
func (c *HTTPClient) Close() { c.hc.CloseIdleConnections() }
