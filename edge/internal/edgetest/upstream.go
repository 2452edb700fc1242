package edgetest

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/snapshot"
)

// Upstream is an HTTP server on a free 127.0.0.1 port (the edge's proxy
// dials real TCP) that records every request it answers.
type Upstream struct {
	URL string // http://127.0.0.1:<port>

	mu       sync.Mutex // guards requests
	requests []Recorded
}

// Recorded is one request an Upstream answered.
type Recorded struct {
	Method, Path string // Path includes the query string
	Header       map[string][]string
	Body         []byte
}

// Get returns the first value of a header, or "".
func (r Recorded) Get(name string) string {
	if v := r.Header[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// NewUpstream serves h on a free port until t ends, recording each request.
func NewUpstream(t testing.TB, h fasthttp.RequestHandler) *Upstream {
	t.Helper()
	return NewUpstreamAt(t, "127.0.0.1:0", h)
}

// NewUpstreamAt is NewUpstream on addr, such as one FreeAddr returned
// earlier (a server that comes up where a node already looks for it).
func NewUpstreamAt(t testing.TB, addr string, h fasthttp.RequestHandler) *Upstream {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	u := &Upstream{URL: "http://" + ln.Addr().String()}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			u.record(ctx)
			h(ctx)
		},
		DisableHeaderNamesNormalizing: true,
		CloseOnShutdown:               true,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		<-done
	})
	return u
}

func (u *Upstream) record(ctx *fasthttp.RequestCtx) {
	rec := Recorded{
		Method: string(ctx.Method()),
		Path:   string(ctx.RequestURI()),
		Header: map[string][]string{},
		Body:   append([]byte(nil), ctx.PostBody()...),
	}
	for k, v := range ctx.Request.Header.All() {
		key := strings.ToLower(string(k))
		rec.Header[key] = append(rec.Header[key], string(v))
	}
	u.mu.Lock()
	u.requests = append(u.requests, rec)
	u.mu.Unlock()
}

// Requests returns the requests answered so far.
func (u *Upstream) Requests() []Recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Recorded(nil), u.requests...)
}

// Count is how many requests were answered so far.
func (u *Upstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

// CountMatching counts the requests with that method whose path has prefix.
func (u *Upstream) CountMatching(method, pathPrefix string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, r := range u.requests {
		if r.Method == method && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// NewShop is a shop upstream that answers every request 200 "shop ok".
func NewShop(t testing.TB) *Upstream {
	return NewUpstream(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("shop ok")
	})
}

// StubOrigin stands in for the origin where a test is about the edge alone:
// it lists the sales it was given at GET /v1/sales, serves their snapshots
// at GET /v1/sales/{id} exactly as set, and answers a reserve 201.
type StubOrigin struct {
	*Upstream

	mu    sync.Mutex // guards sales
	sales map[string]snapshot.Sale
}

// NewStubOrigin starts a StubOrigin with no sales.
func NewStubOrigin(t testing.TB) *StubOrigin {
	o := &StubOrigin{sales: map[string]snapshot.Sale{}}
	o.Upstream = NewUpstream(t, o.handle)
	return o
}

// SetSale adds or replaces a sale's snapshot.
func (o *StubOrigin) SetSale(s snapshot.Sale) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sales[s.SaleID] = s
}

// OpenSale returns the snapshot of a sale that started a minute ago and
// ends in an hour, with one SKU "sku-1" of stock units available.
func OpenSale(id string, stock int64) snapshot.Sale {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return snapshot.Sale{
		SaleID: id, Name: "Sale " + id, Status: "open",
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		SKUs: []snapshot.SKU{{SKU: "sku-1", Name: "Phone", PriceMinor: 4999900, Currency: "INR", AvailableHint: stock}},
	}
}

func (o *StubOrigin) handle(ctx *fasthttp.RequestCtx) {
	segs := strings.Split(strings.Trim(string(ctx.Path()), "/"), "/")
	o.mu.Lock()
	defer o.mu.Unlock()
	write := func(status int, v any) {
		body, _ := json.Marshal(v)
		ctx.SetStatusCode(status)
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}
	switch {
	case ctx.IsGet() && len(segs) == 2 && segs[0] == "v1" && segs[1] == "sales":
		type listing struct {
			SaleID string `json:"sale_id"`
		}
		list := struct {
			Sales []listing `json:"sales"`
		}{Sales: []listing{}}
		for id := range o.sales {
			list.Sales = append(list.Sales, listing{SaleID: id})
		}
		write(fasthttp.StatusOK, list)
	case ctx.IsGet() && len(segs) == 3 && segs[0] == "v1" && segs[1] == "sales":
		s, ok := o.sales[segs[2]]
		if !ok {
			write(fasthttp.StatusNotFound, map[string]string{"error": "unknown_sale", "message": "no such sale"})
			return
		}
		write(fasthttp.StatusOK, s)
	case ctx.IsPost() && len(segs) == 4 && segs[0] == "v1" && segs[1] == "sales" && segs[3] == "reserve":
		write(fasthttp.StatusCreated, map[string]string{"reservation_id": "r-stub", "sale_id": segs[2], "status": "held"})
	default:
		write(fasthttp.StatusNotFound, map[string]string{"error": "not_found", "message": "stub origin"})
	}
}

// FreeAddr returns a 127.0.0.1 address nothing listens on (yet): a node
// pointed at it finds its upstream down until NewUpstreamAt starts one there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// CountingProxy is a reverse proxy on a free 127.0.0.1 port in front of a
// server the edge cannot dial itself (an in-memory listener) or whose
// requests a test wants to count, and can slow chosen paths down.
type CountingProxy struct {
	*Upstream

	mu     sync.Mutex               // guards delays
	delays map[string]time.Duration // path -> wait before forwarding
	done   chan struct{}            // closed when the test ends: delayed requests go on at once
}

// NewCountingProxy forwards every request to the server dial reaches.
func NewCountingProxy(t testing.TB, dial func() (net.Conn, error)) *CountingProxy {
	t.Helper()
	return NewCountingProxyAt(t, "127.0.0.1:0", dial)
}

// Delay makes every request for exactly path (no query) wait d before it is
// forwarded, as a slow origin would; 0 removes the delay. Waiting requests
// are let go when the test ends.
func (p *CountingProxy) Delay(path string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d <= 0 {
		delete(p.delays, path)
		return
	}
	p.delays[path] = d
}

func (p *CountingProxy) wait(path string) {
	p.mu.Lock()
	d := p.delays[path]
	p.mu.Unlock()
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-p.done:
	}
}

// NewCountingProxyAt is NewCountingProxy listening on addr.
func NewCountingProxyAt(t testing.TB, addr string, dial func() (net.Conn, error)) *CountingProxy {
	t.Helper()
	hc := &fasthttp.HostClient{
		Addr:                "origin.test",
		Dial:                func(string) (net.Conn, error) { return dial() },
		MaxConns:            1024,
		ReadTimeout:         20 * time.Second,
		WriteTimeout:        20 * time.Second,
		MaxIdleConnDuration: time.Minute,
	}
	t.Cleanup(hc.CloseIdleConnections)
	p := &CountingProxy{delays: map[string]time.Duration{}, done: make(chan struct{})}
	p.Upstream = NewUpstreamAt(t, addr, func(ctx *fasthttp.RequestCtx) {
		p.wait(string(ctx.Path()))
		if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Response.Reset()
			ctx.SetStatusCode(fasthttp.StatusBadGateway)
			ctx.SetBodyString(`{"error":"bad_gateway","message":"` + err.Error() + `"}`)
		}
	})
	t.Cleanup(func() { close(p.done) }) // runs before the server's shutdown, which waits for handlers
	return p
}
