package edgetest

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
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
// at GET /v1/sales/{id} exactly as set, answers a reserve 201, and keeps
// the lines' durable copy in memory behind the signed /v1/lines routes, as
// the origin does (signatures checked with the tokenstest keys for
// tokenstest.LineAudience, each taken once), and the admin changes behind
// the signed /v1/admin-changes routes.
type StubOrigin struct {
	*Upstream

	mu        sync.Mutex // guards sales, lines, linesDown and taken
	sales     map[string]snapshot.Sale
	lines     map[string]*StubLine
	linesDown bool
	taken     map[string]bool // the line requests' signatures taken (RequestSignature.Key)
	verifier  *tokens.RequestVerifier
	// delay (ns) slows every answer but the sale list, the snapshots and
	// the lines: what the edge's origin pools carry (SetDelay).
	delay atomic.Int64
	// reserveStatus is the status reserves are answered with, 0 for 201
	// (SetReserveStatus).
	reserveStatus atomic.Int64
	// changes are the admin changes recorded (POST /v1/admin-changes),
	// oldest first: an edge records each before it makes it. Guarded by mu.
	changes []json.RawMessage
}

// SetReserveStatus makes reserves answer status (with the origin's error
// body for a 4xx or 5xx: 409 sold_out, 503 please_wait, any other
// bad_request); 201 answers a hold again.
func (o *StubOrigin) SetReserveStatus(status int) { o.reserveStatus.Store(int64(status)) }

// SetDelay makes the answers a shopper's requests get through the edge's
// origin pools (reserves, orders, anything but the sale list, the
// snapshots and the lines) take d, as an origin behind on its work would;
// 0 answers at once again.
func (o *StubOrigin) SetDelay(d time.Duration) { o.delay.Store(int64(d)) }

// StubLine is a StubOrigin's durable copy of a sale's line, changed as the
// origin changes it (the methods of line.Row).
type StubLine = line.Row

// NewStubOrigin starts a StubOrigin with no sales.
func NewStubOrigin(t testing.TB) *StubOrigin {
	verifier, err := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Audience: tokenstest.LineAudience})
	if err != nil {
		t.Fatalf("NewRequestVerifier = %v", err)
	}
	o := &StubOrigin{sales: map[string]snapshot.Sale{}, lines: map[string]*StubLine{}, taken: map[string]bool{}, verifier: verifier}
	o.Upstream = NewUpstream(t, o.handle)
	return o
}

// Line returns a copy of a sale's durable line; false when there is none.
func (o *StubOrigin) Line(sale string) (StubLine, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.lines[sale]
	if !ok {
		return StubLine{}, false
	}
	return *l, true
}

// Consistent calls f with the sale's line held still: no line request
// lands while f runs, so f can read Redis and the copy at one instant.
func (o *StubOrigin) Consistent(sale string, f func(StubLine)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l, ok := o.lines[sale]; ok {
		f(*l)
	}
}

// SetLinesDown makes the /v1/lines routes answer 503 (down) or work again,
// as an origin that cannot reach its database would.
func (o *StubOrigin) SetLinesDown(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.linesDown = down
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
	control := len(segs) >= 2 && segs[0] == "v1" && (segs[1] == "lines" || (segs[1] == "sales" && ctx.IsGet()))
	if d := time.Duration(o.delay.Load()); d > 0 && !control {
		time.Sleep(d)
	}
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
		switch status := int(o.reserveStatus.Load()); status {
		case 0, fasthttp.StatusCreated:
			write(fasthttp.StatusCreated, map[string]string{"reservation_id": "r-stub", "sale_id": segs[2], "status": "held"})
		case fasthttp.StatusConflict:
			write(status, map[string]string{"error": "sold_out", "message": "sold out"})
		case fasthttp.StatusServiceUnavailable:
			write(status, map[string]string{"error": "please_wait", "message": "try again shortly"})
		default:
			write(status, map[string]string{"error": "bad_request", "message": "stub origin"})
		}
	case len(segs) >= 3 && segs[0] == "v1" && segs[1] == "lines":
		status, v := o.line(ctx, segs[2:])
		write(status, v)
	case len(segs) == 2 && segs[0] == "v1" && segs[1] == "admin-changes":
		status, v := o.adminChanges(ctx)
		write(status, v)
	default:
		write(fasthttp.StatusNotFound, map[string]string{"error": "not_found", "message": "stub origin"})
	}
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

// line answers the /v1/lines routes (segs after "lines"); the caller holds mu.
func (o *StubOrigin) line(ctx *fasthttp.RequestCtx, segs []string) (int, any) {
	sig, err := o.verifier.Verify(string(ctx.Request.Header.Peek(tokens.RequestSignatureHeader)),
		string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
	if err == nil && o.taken[sig.Key] {
		err = tokens.ErrReplayed
	}
	if err != nil {
		return fasthttp.StatusUnauthorized, map[string]string{"error": tokens.Code(err), "message": "stub origin: bad signature"}
	}
	if o.linesDown {
		return fasthttp.StatusServiceUnavailable, map[string]string{"error": "please_wait", "message": "stub origin: lines down"}
	}
	o.taken[sig.Key] = true
	sale := segs[0]
	if _, ok := o.sales[sale]; !ok {
		return fasthttp.StatusNotFound, map[string]string{"error": "unknown_sale", "message": "stub origin"}
	}
	l := o.lines[sale]
	var body struct {
		Seed          string   `json:"seed"`
		RatePerSecond *float64 `json:"rate_per_s"`
		Paused        *bool    `json:"paused"`
		ChallengeBits *int     `json:"challenge_bits"`
		Pre           int64    `json:"pre"`
		Post          int64    `json:"post"`
		Serving       int64    `json:"serving"`
		Version       int64    `json:"settings_version"`
		Ceiling       int64    `json:"ceiling"`
		PreQueue      *int64   `json:"pre_queue"`
	}
	if len(ctx.PostBody()) > 0 {
		if err := json.Unmarshal(ctx.PostBody(), &body); err != nil {
			return fasthttp.StatusBadRequest, map[string]string{"error": "invalid_json", "message": "stub origin"}
		}
	}
	route := string(ctx.Method())
	if len(segs) > 1 {
		route += " " + segs[1]
	}
	if l == nil && route != "POST" {
		return fasthttp.StatusNotFound, map[string]string{"error": "unknown_sale", "message": "stub origin: no line"}
	}
	switch route {
	case "GET":
	case "POST":
		if l == nil {
			l = &StubLine{SaleID: sale, Seed: body.Seed}
			if body.RatePerSecond != nil {
				l.RatePerSecond = *body.RatePerSecond
			}
			if body.Paused != nil {
				l.Paused = *body.Paused
			}
			o.lines[sale] = l
		}
	case "PUT settings":
		*l = l.WithSettings(line.Change{RatePerSecond: body.RatePerSecond, Paused: body.Paused, ChallengeBits: body.ChallengeBits})
	case "POST ceilings":
		*l = l.Raised(line.Ceilings{Pre: body.Pre, Post: body.Post, Serving: body.Serving, SettingsVersion: body.Version})
	case "POST serving":
		*l = l.Lowered(body.Version, body.Ceiling)
	case "POST draw":
		if l.DrawSize == nil && body.PreQueue != nil {
			n := *body.PreQueue
			l.DrawSize = &n
		}
	default:
		return fasthttp.StatusNotFound, map[string]string{"error": "not_found", "message": "stub origin"}
	}
	return fasthttp.StatusOK, l
}

// adminChanges answers the signed /v1/admin-changes routes as the origin
// does, keeping the changes in memory (unchecked: the origin's tests check
// them); the caller holds mu.
func (o *StubOrigin) adminChanges(ctx *fasthttp.RequestCtx) (int, any) {
	sig, err := o.verifier.Verify(string(ctx.Request.Header.Peek(tokens.RequestSignatureHeader)),
		string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
	if err == nil && o.taken[sig.Key] {
		err = tokens.ErrReplayed
	}
	if err != nil {
		return fasthttp.StatusUnauthorized, map[string]string{"error": tokens.Code(err), "message": "stub origin: bad signature"}
	}
	o.taken[sig.Key] = true
	if ctx.IsPost() {
		o.changes = append(o.changes, append(json.RawMessage(nil), ctx.PostBody()...))
		return fasthttp.StatusOK, json.RawMessage(ctx.PostBody())
	}
	newest := make([]json.RawMessage, 0, len(o.changes))
	for i := len(o.changes) - 1; i >= 0; i-- {
		newest = append(newest, o.changes[i])
	}
	return fasthttp.StatusOK, map[string]any{"changes": newest}
}
