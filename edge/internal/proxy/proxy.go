// Package proxy forwards requests from the edge to an upstream (the origin,
// or the shop) over a bounded connection pool, with the hygiene of
// net/http/httputil's ReverseProxy: hop-by-hop headers and client-supplied
// forwarding headers are stripped, forwarding headers are written afresh,
// and bodies and times are bounded. Each forwarded request carries the
// edge's request id (X-Request-Id), so the upstream's log line and error
// answer show the id the edge's do.
package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
)

// Options bound an upstream; zero values take the defaults.
type Options struct {
	// MaxConns caps connections to the upstream; required. When all are
	// busy a request waits up to QueueTimeout for one, then fails (ErrBusy)
	// rather than queueing unbounded.
	MaxConns int
	// QueueTimeout is how long a request may wait for a free connection: a
	// burst (a wave of admitted shoppers pressing Buy at once) is absorbed
	// instead of answered "please wait"; 0 means fail at once.
	QueueTimeout time.Duration
	// Timeout bounds a whole exchange; required.
	Timeout time.Duration
	// MaxResponseBody caps a response body in bytes; 0 means 4 MiB.
	MaxResponseBody int
}

// Upstream is one upstream server.
type Upstream struct {
	client  *fasthttp.HostClient
	host    string
	timeout time.Duration
}

// ErrBusy: every connection to the upstream is in use.
var ErrBusy = errors.New("proxy: upstream connection pool exhausted")

// New returns an Upstream for base, an http or https URL with no path.
func New(base string, opts Options) (*Upstream, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("proxy: upstream %q must be an http(s) URL", base)
	}
	if opts.MaxConns <= 0 || opts.Timeout <= 0 {
		return nil, fmt.Errorf("proxy: upstream %q needs a positive MaxConns and Timeout", base)
	}
	if opts.MaxResponseBody <= 0 {
		opts.MaxResponseBody = 4 << 20
	}
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	return &Upstream{
		client: &fasthttp.HostClient{
			Addr:                          addr,
			IsTLS:                         u.Scheme == "https",
			MaxConns:                      opts.MaxConns,
			MaxConnWaitTimeout:            opts.QueueTimeout,
			ReadTimeout:                   opts.Timeout,
			WriteTimeout:                  opts.Timeout,
			MaxIdleConnDuration:           30 * time.Second,
			MaxResponseBodySize:           opts.MaxResponseBody,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
		},
		host:    u.Host,
		timeout: opts.Timeout,
	}, nil
}

// hopHeaders are meaningful only for one connection (RFC 9110 7.6.1), and
// forwarding headers a client could forge.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// Forward sends the request of ctx upstream and writes the answer into ctx.
// clientIP is the caller's address as the edge trusts it. On error nothing
// has been written and the caller answers.
func (u *Upstream) Forward(ctx *fasthttp.RequestCtx, clientIP string) error {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	ctx.Request.CopyTo(req)
	delConnectionListed(&req.Header)
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	for _, h := range forwardingHeaders {
		req.Header.Del(h)
	}
	req.Header.Set("X-Forwarded-For", clientIP)
	req.Header.Set("X-Forwarded-Host", string(ctx.Host()))
	proto := "http"
	if ctx.IsTLS() {
		proto = "https"
	}
	req.Header.Set("X-Forwarded-Proto", proto)
	var id [128]byte
	req.Header.SetCanonical(httpapi.HeaderRequestID, httpapi.AppendRequestID(id[:0], ctx))
	req.SetHost(u.host)

	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := u.client.DoTimeout(req, resp, u.timeout); err != nil {
		if errors.Is(err, fasthttp.ErrNoFreeConns) {
			return ErrBusy
		}
		return fmt.Errorf("proxy to %s: %w", u.host, err)
	}
	delConnectionListed(&resp.Header)
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	resp.CopyTo(&ctx.Response)
	return nil
}

// Get fetches path from the upstream into dst (for the edge's own calls,
// such as snapshot refreshes) and returns the status code.
func (u *Upstream) Get(path string, dst []byte) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.SetHost(u.host)
	if err := u.client.DoTimeout(req, resp, u.timeout); err != nil {
		return 0, dst, fmt.Errorf("get %s from %s: %w", path, u.host, err)
	}
	return resp.StatusCode(), append(dst[:0], resp.Body()...), nil
}

// delConnectionListed deletes the headers a Connection header names: they
// are hop-by-hop too (RFC 9110 7.6.1), as httputil's ReverseProxy does.
func delConnectionListed(h interface {
	PeekAll(key string) [][]byte
	Del(key string)
}) {
	var names []string
	for _, v := range h.PeekAll("Connection") {
		for _, name := range strings.Split(string(v), ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, name)
			}
		}
	}
	for _, name := range names {
		h.Del(name)
	}
}
