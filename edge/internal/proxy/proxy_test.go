package proxy

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// upstream is an in-memory upstream server: a request to /hold waits until
// the test sends on release (and says on held that it arrived); any other
// answers at once.
type upstream struct {
	held    chan struct{}
	release chan struct{}
}

// newUpstream starts an in-memory upstream and returns an Upstream to it
// with opts.
func newUpstream(t testing.TB, opts Options) (*Upstream, *upstream) {
	t.Helper()
	s := &upstream{held: make(chan struct{}, 16), release: make(chan struct{})}
	u := serveUpstream(t, opts, &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/hold" {
			s.held <- struct{}{}
			<-s.release
		}
		ctx.SetBodyString("ok")
	}})
	return u, s
}

// serveUpstream runs srv on an in-memory listener and returns an Upstream
// to it, http://upstream.test, with opts.
func serveUpstream(t testing.TB, opts Options, srv *fasthttp.Server) *Upstream {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(); _ = ln.Close() })
	u, err := New("http://upstream.test", opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	u.client.Dial = func(string) (net.Conn, error) { return ln.Dial() }
	return u
}

// forward runs Forward for a request to path, as a handler would.
func forward(u *Upstream, path string) (time.Duration, error) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI(path)
	req.Header.SetMethod(fasthttp.MethodPost)
	ctx.Init(&req, nil, nil)
	return u.Forward(&ctx, Forwarded{For: "203.0.113.7"})
}

// hold sends one request the upstream keeps until release, and returns once
// the upstream has it: the pool's only connection is then in use.
func hold(t *testing.T, u *Upstream, s *upstream) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := forward(u, "/hold")
		done <- err
	}()
	select {
	case <-s.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request never reached the upstream")
	}
	return done
}

func TestForwardWithAFreeConnectionWaitsNothing(t *testing.T) {
	u, _ := newUpstream(t, Options{MaxConns: 2, Timeout: 5 * time.Second, QueueTimeout: time.Second})
	for range 3 {
		waited, err := forward(u, "/")
		if err != nil || waited != 0 {
			t.Fatalf("Forward with a free connection = waited %v, %v; want 0, nil", waited, err)
		}
	}
}

// TestForwardWritesOnlyWhatItIsTold: the upstream hears the forwarding
// headers Forwarded names and none the request arrived with — not its
// X-Forwarded-*, nor its Host as X-Forwarded-Host (no X-Forwarded-Host at
// all when Forwarded names no host), and the edge's own scheme when it
// names none — and the answer comes back without the upstream's Server
// header, for the edge's server to write its own.
func TestForwardWritesOnlyWhatItIsTold(t *testing.T) {
	forwarding := []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}
	heard := make(chan map[string]string, 1)
	u := serveUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second}, &fasthttp.Server{
		Name: "shop-backend/2.1",
		Handler: func(ctx *fasthttp.RequestCtx) {
			h := map[string]string{"Host": string(ctx.Host())}
			for _, name := range forwarding {
				if v := ctx.Request.Header.Peek(name); len(v) > 0 {
					h[name] = string(v)
				}
			}
			heard <- h
			ctx.SetBodyString("ok")
		},
	})
	for _, tc := range []struct {
		name string
		fwd  Forwarded
		want map[string]string
	}{
		{"host and scheme named", Forwarded{For: "198.51.100.9", Host: "shop.example.com", Proto: "https"},
			map[string]string{"X-Forwarded-For": "198.51.100.9", "X-Forwarded-Host": "shop.example.com", "X-Forwarded-Proto": "https"}},
		{"neither named", Forwarded{For: "198.51.100.9"},
			map[string]string{"X-Forwarded-For": "198.51.100.9", "X-Forwarded-Proto": "http"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			req.SetRequestURI("/cart")
			req.SetHost("evil.example")
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Host", "evil.example")
			req.Header.Set("X-Forwarded-Proto", "gopher")
			ctx.Init(&req, nil, nil)
			if _, err := u.Forward(&ctx, tc.fwd); err != nil {
				t.Fatalf("Forward: %v", err)
			}
			got := <-heard
			for _, name := range forwarding {
				if got[name] != tc.want[name] {
					t.Errorf("upstream heard %s %q, want %q", name, got[name], tc.want[name])
				}
			}
			if got["Host"] != "upstream.test" {
				t.Errorf("upstream heard Host %q, want its own, upstream.test", got["Host"])
			}
			if s := ctx.Response.Header.Server(); len(s) != 0 || string(ctx.Response.Body()) != "ok" {
				t.Errorf("Forward answered Server %q body %q, want no Server header and the upstream's body", s, ctx.Response.Body())
			}
		})
	}
}

// Without a queue timeout a request that finds every connection in use is
// ErrBusy at once, as it was before the pool had slots of its own.
func TestForwardBusyAtOnceWithoutAQueue(t *testing.T) {
	u, s := newUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second})
	held := hold(t, u, s)
	waited, err := forward(u, "/")
	if !errors.Is(err, ErrBusy) || waited != 0 {
		t.Errorf("Forward with the only connection in use = waited %v, %v; want 0, ErrBusy", waited, err)
	}
	close(s.release)
	if err := <-held; err != nil {
		t.Errorf("the held request: %v", err)
	}
}

// With a queue timeout the request waits; if no connection frees up in
// time it is ErrBusy, having waited the whole timeout.
func TestForwardBusyAfterTheQueueTimeout(t *testing.T) {
	const queue = 50 * time.Millisecond
	u, s := newUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second, QueueTimeout: queue})
	held := hold(t, u, s)
	waited, err := forward(u, "/")
	if !errors.Is(err, ErrBusy) || waited < queue {
		t.Errorf("Forward with the only connection in use = waited %v, %v; want ≥ %v, ErrBusy", waited, err, queue)
	}
	close(s.release)
	if err := <-held; err != nil {
		t.Errorf("the held request: %v", err)
	}
}

// A request that waits for a connection gets the one freed and reports the
// time it waited, no longer than it took the connection to come free.
func TestForwardReportsItsWaitForAConnection(t *testing.T) {
	u, s := newUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second, QueueTimeout: 5 * time.Second})
	held := hold(t, u, s)
	type result struct {
		waited time.Duration
		err    error
	}
	second := make(chan result, 1)
	start := time.Now()
	go func() {
		waited, err := forward(u, "/")
		second <- result{waited, err}
	}()
	time.Sleep(50 * time.Millisecond)
	close(s.release)
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	r := <-second
	if r.err != nil || r.waited <= 0 || r.waited > time.Since(start) {
		t.Errorf("Forward queued behind a held request = waited %v, %v; want between 0 and %v, nil", r.waited, r.err, time.Since(start))
	}
}

// The slots never let more requests reach the upstream than MaxConns: the
// client's own limit is then never what turns a request away.
func TestSlotsBoundTheRequestsInFlight(t *testing.T) {
	const conns = 3
	u, s := newUpstream(t, Options{MaxConns: conns, Timeout: 5 * time.Second, QueueTimeout: 5 * time.Second})
	done := make(chan error, 2*conns)
	for range 2 * conns {
		go func() {
			_, err := forward(u, "/hold")
			done <- err
		}()
	}
	for range conns {
		<-s.held
	}
	select {
	case <-s.held:
		t.Fatalf("more than MaxConns = %d requests reached the upstream at once", conns)
	case <-time.After(50 * time.Millisecond):
	}
	close(s.release)
	for range 2 * conns {
		if err := <-done; err != nil {
			t.Errorf("Forward: %v", err)
		}
	}
}

// TakeLeast is the quickest request since the last call, the wait for a
// connection counted: a request that queued behind a held one took at
// least as long as the hold, and one that answered at once less. Each call
// starts over; with nothing forwarded since, it is 0.
func TestTakeLeastIsTheQuickestRequestSinceTheLastCall(t *testing.T) {
	u, s := newUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second, QueueTimeout: 5 * time.Second})
	if got, n := u.TakeLeast(); got != 0 || n != 0 {
		t.Fatalf("TakeLeast before any request = %v, %d; want 0, 0", got, n)
	}
	const holdFor = 100 * time.Millisecond
	held := hold(t, u, s)
	queued := make(chan error, 1)
	go func() { _, err := forward(u, "/"); queued <- err }()
	time.Sleep(holdFor)
	close(s.release)
	for _, c := range []<-chan error{held, queued} {
		if err := <-c; err != nil {
			t.Fatalf("Forward: %v", err)
		}
	}
	// Both waited out most of the hold: the held one in the upstream, the
	// other for the connection (from whenever its goroutine started).
	if got, n := u.TakeLeast(); got < holdFor/2 || n != 2 {
		t.Errorf("TakeLeast after two requests that waited about %v = %v, %d; want at least %v, 2", holdFor, got, n, holdFor/2)
	}
	if got, n := u.TakeLeast(); got != 0 || n != 0 {
		t.Errorf("TakeLeast again with nothing forwarded = %v, %d; want 0, 0", got, n)
	}
	if _, err := forward(u, "/"); err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if got, n := u.TakeLeast(); got <= 0 || got >= holdFor || n != 1 {
		t.Errorf("TakeLeast after a request answered at once = %v, %d; want above 0 and under %v, 1", got, n, holdFor)
	}
}

// TestTakeLeastCountsARefusalAsSlow: a request refused for a full pool
// (no queue) counts as the longest exchange, never as a quick answer that
// would clear a hold.
func TestTakeLeastCountsARefusalAsSlow(t *testing.T) {
	u, s := newUpstream(t, Options{MaxConns: 1, Timeout: 5 * time.Second})
	held := hold(t, u, s)
	if _, err := forward(u, "/"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Forward with the only connection in use = %v, want ErrBusy", err)
	}
	if got, n := u.TakeLeast(); got != 5*time.Second || n != 1 {
		t.Errorf("TakeLeast after a refusal = %v, %d; want the 5 s timeout, 1", got, n)
	}
	close(s.release)
	if err := <-held; err != nil {
		t.Errorf("the held request: %v", err)
	}
}
