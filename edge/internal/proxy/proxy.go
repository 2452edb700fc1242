// Package proxy forwards requests from the edge to an upstream (the origin,
// or the shop) over a bounded connection pool, with the hygiene of
// net/http/httputil's ReverseProxy: hop-by-hop headers and client-supplied
// forwarding headers are stripped, forwarding headers are written afresh,
// and bodies and times are bounded. Each forwarded request carries the
// edge's request id (X-Request-Id), so the upstream's log line and error
// answer show the id the edge's do. A request takes one of the pool's
// connection slots before it is sent, and Forward reports how long it
// waited for one: the queueing in front of the upstream, which the
// round trip's time alone does not show. TakeLeast says whether a queue
// stands in front of it: the shortest time any request spent with it
// lately, its wait included.
package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
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
	client *fasthttp.HostClient
	// slots holds one token per request in flight, at most MaxConns: a
	// request waits here, not inside the client, so that its wait can be
	// timed (fasthttp's own queue for a connection does not say how long
	// it waited). The client is capped at the same MaxConns, so a request
	// holding a slot always finds or dials a connection.
	slots        chan struct{}
	queueTimeout time.Duration
	// least is the shortest sojourn (wait and exchange, in ns) of the
	// requests Forward finished since the last TakeLeast, 0 for none, and
	// finished how many there were.
	least, finished atomic.Int64
	host            string
	timeout         time.Duration
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
			MaxConnWaitTimeout:            opts.QueueTimeout, // a backstop: a closing connection may be counted a moment longer
			ReadTimeout:                   opts.Timeout,
			WriteTimeout:                  opts.Timeout,
			MaxIdleConnDuration:           30 * time.Second,
			MaxResponseBodySize:           opts.MaxResponseBody,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
		},
		slots:        make(chan struct{}, opts.MaxConns),
		queueTimeout: opts.QueueTimeout,
		host:         u.Host,
		timeout:      opts.Timeout,
	}, nil
}

// acquire takes a connection slot, waiting up to the queue timeout for
// one, and returns how long it waited: 0 when a slot was free, the common
// case.
func (u *Upstream) acquire() (time.Duration, error) {
	select {
	case u.slots <- struct{}{}:
		return 0, nil
	default:
	}
	if u.queueTimeout <= 0 {
		return 0, ErrBusy
	}
	start := time.Now()
	t := fasthttp.AcquireTimer(u.queueTimeout) // pooled: a wait allocates nothing
	defer fasthttp.ReleaseTimer(t)
	select {
	case u.slots <- struct{}{}:
		return time.Since(start), nil
	case <-t.C:
		return time.Since(start), ErrBusy
	}
}

// release gives back the slot acquire took.
func (u *Upstream) release() { <-u.slots }

// observe counts a finished request and keeps d if it is the shortest
// sojourn since the last TakeLeast.
func (u *Upstream) observe(d time.Duration) {
	u.finished.Add(1)
	ns := max(int64(d), 1) // 0 means none
	for {
		least := u.least.Load()
		if least != 0 && least <= ns {
			return
		}
		if u.least.CompareAndSwap(least, ns) {
			return
		}
	}
}

// TakeLeast returns the shortest time a request forwarded since the
// previous call spent with the upstream (its wait for a connection and the
// exchange; one that timed out, its time until then; one refused for a
// full pool counts as the longest exchange), and how many finished, and
// starts over; 0, 0 when none did. A connection that failed at once is
// not counted. It is CoDel's signal of a standing queue: when even the
// quickest of many was slow, every request queued.
func (u *Upstream) TakeLeast() (least time.Duration, finished int) {
	n := u.finished.Swap(0)
	return time.Duration(u.least.Swap(0)), int(n)
}

// InFlight is how many requests hold a connection slot now.
func (u *Upstream) InFlight() int { return len(u.slots) }

// MaxConns is how many connection slots the upstream has.
func (u *Upstream) MaxConns() int { return cap(u.slots) }

// hopHeaders are meaningful only for one connection (RFC 9110 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// forwardingHeaders name the client, its host or its scheme. All are
// deleted; the edge writes X-Forwarded-For and -Proto afresh, and -Host
// when it knows one to believe (Forwarded). The others (CDNs' own client
// headers among them) it does not set, so whatever a request carries came
// from the client, and an upstream that believed one (the shop, say) would
// take a forged address for the shopper's.
var forwardingHeaders = []string{
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip",
	"True-Client-Ip", "Cf-Connecting-Ip", "X-Client-Ip", "Fastly-Client-Ip", "X-Cluster-Client-Ip",
}

// Forwarded is what the edge tells an upstream about a request it
// forwards, in the forwarding headers it writes afresh. The caller decides
// what to believe (the api package: its trusted proxies); Forward writes
// only these, never what the request itself carried.
type Forwarded struct {
	// For is X-Forwarded-For: the client's address as the edge trusts it.
	For string
	// Host is X-Forwarded-Host: the public host the request was for, as a
	// trusted proxy named it or the edge is configured with; "" sends
	// none. Never the client's own Host, which the client chose.
	Host string
	// Proto is X-Forwarded-Proto, "http" or "https"; "" means the scheme
	// of the edge's own listener.
	Proto string
}

// Forward sends the request of ctx upstream and writes the answer into ctx,
// with the forwarding headers fwd says. On error nothing has been written
// and the caller answers. waited is how long the request waited for a free
// connection (the whole QueueTimeout when it failed with ErrBusy); the wait
// counts against Timeout, which bounds the whole exchange.
func (u *Upstream) Forward(ctx *fasthttp.RequestCtx, fwd Forwarded) (waited time.Duration, err error) {
	start := time.Now()
	waited, err = u.acquire()
	if err != nil {
		u.observe(u.timeout) // refused for a full pool: as slow as an exchange may be
		return waited, err
	}
	defer u.release()
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
	req.Header.Set("X-Forwarded-For", fwd.For)
	if fwd.Host != "" {
		req.Header.Set("X-Forwarded-Host", fwd.Host)
	}
	proto := fwd.Proto
	if proto == "" {
		proto = "http"
		if ctx.IsTLS() {
			proto = "https"
		}
	}
	req.Header.Set("X-Forwarded-Proto", proto)
	var id [128]byte
	req.Header.SetCanonical(httpapi.HeaderRequestID, httpapi.AppendRequestID(id[:0], ctx))
	req.SetHost(u.host)

	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := u.client.DoTimeout(req, resp, u.timeout-waited); err != nil {
		switch {
		case errors.Is(err, fasthttp.ErrNoFreeConns):
			u.observe(u.timeout)
			return waited, ErrBusy
		case errors.Is(err, fasthttp.ErrTimeout):
			u.observe(time.Since(start))
		}
		// A refused or broken connection fails at once and says nothing
		// about how long the upstream takes: not counted.
		return waited, fmt.Errorf("proxy to %s: %w", u.host, err)
	}
	u.observe(time.Since(start))
	delConnectionListed(&resp.Header)
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	// The upstream's Server header names its software to whoever asks; the
	// edge's server writes its own, as on every answer it makes itself.
	resp.Header.Del(fasthttp.HeaderServer)
	resp.CopyTo(&ctx.Response)
	return waited, nil
}

// Get fetches path from the upstream into dst (for the edge's own calls,
// such as snapshot refreshes) and returns the status code.
func (u *Upstream) Get(path string, dst []byte) (int, []byte, error) {
	waited, err := u.acquire()
	if err != nil {
		return 0, dst, fmt.Errorf("get %s from %s: %w", path, u.host, err)
	}
	defer u.release()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.SetHost(u.host)
	if err := u.client.DoTimeout(req, resp, u.timeout-waited); err != nil {
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
