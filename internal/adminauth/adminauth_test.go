package adminauth

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/clock"
)

const token = "0123456789abcdef0123456789abcdef0123456789a"

func newGuard(opts Options) (*Guard, *clock.Fake, fasthttp.RequestHandler) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	opts.Clock = clk
	g := New(token, opts)
	h := g.Handler(func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/admin/known" && ctx.IsGet() {
			ctx.SetStatusCode(fasthttp.StatusOK)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	})
	return g, clk, h
}

// call runs h on a request from addr and returns its status.
func call(h fasthttp.RequestHandler, addr, method, path, bearer string) int {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}, nil)
	h(&ctx)
	return ctx.Response.StatusCode()
}

// TestUnauthenticatedCallersLearnNoRoutes: without the token, a known
// route, an unknown one and a wrong method all get the same 401; probes
// pass; with the token the router answers.
func TestUnauthenticatedCallersLearnNoRoutes(t *testing.T) {
	_, _, h := newGuard(Options{OpenPaths: []string{"/healthz"}})
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/known"}, {"GET", "/admin/unknown"}, {"DELETE", "/admin/known"}, {"POST", "/admin/dev/admission-token"},
	} {
		if got := call(h, "10.0.0.1", c.method, c.path, ""); got != fasthttp.StatusUnauthorized {
			t.Errorf("%s %s without a token = %d, want 401", c.method, c.path, got)
		}
		if got := call(h, "10.0.0.2", c.method, c.path, token[:len(token)-1]+"b"); got != fasthttp.StatusUnauthorized {
			t.Errorf("%s %s with a wrong token = %d, want 401", c.method, c.path, got)
		}
	}
	if got := call(h, "10.0.0.3", "GET", "/healthz", ""); got != fasthttp.StatusNotFound {
		t.Errorf("GET /healthz = %d, want it passed to the router (404 from the fake)", got)
	}
	if got := call(h, "10.0.0.3", "GET", "/admin/known", token); got != fasthttp.StatusOK {
		t.Errorf("GET /admin/known with the token = %d, want 200", got)
	}
	if got := call(h, "10.0.0.3", "GET", "/admin/unknown", token); got != fasthttp.StatusNotFound {
		t.Errorf("GET /admin/unknown with the token = %d, want 404", got)
	}
}

// TestFailuresAreThrottled: after MaxFailures failures an address (an IPv6
// one by its /64) is answered 429 without the token until the window ends;
// other addresses are not, and the token gets through from every one.
func TestFailuresAreThrottled(t *testing.T) {
	_, clk, h := newGuard(Options{MaxFailures: 3, Window: time.Minute})
	for i := 0; i < 3; i++ {
		if got := call(h, "2001:db8::1", "GET", "/admin/known", "guess"); got != fasthttp.StatusUnauthorized {
			t.Fatalf("failure %d = %d, want 401", i+1, got)
		}
	}
	if got := call(h, "2001:db8::2", "GET", "/admin/known", "guess"); got != fasthttp.StatusTooManyRequests {
		t.Errorf("the same /64 after 3 failures, guessing again = %d, want 429", got)
	}
	if got := call(h, "2001:db8::2", "GET", "/admin/known", ""); got != fasthttp.StatusTooManyRequests {
		t.Errorf("the same /64 after 3 failures, no token = %d, want 429", got)
	}
	if got := call(h, "2001:db8::2", "GET", "/admin/known", token); got != fasthttp.StatusOK {
		t.Errorf("the same /64 after 3 failures, with the token = %d, want 200", got)
	}
	if got := call(h, "2001:db8:0:1::1", "GET", "/admin/known", "guess"); got != fasthttp.StatusUnauthorized {
		t.Errorf("another /64 guessing = %d, want 401", got)
	}
	clk.Advance(time.Minute)
	if got := call(h, "2001:db8::1", "GET", "/admin/known", "guess"); got != fasthttp.StatusUnauthorized {
		t.Errorf("after the window, guessing = %d, want 401", got)
	}
}

// TestRememberedAddressesAreBounded: a guesser spread over many addresses
// fills at most MaxAddresses records, and beyond them is throttled as one.
func TestRememberedAddressesAreBounded(t *testing.T) {
	g, _, h := newGuard(Options{MaxFailures: 2, MaxAddresses: 4})
	for i := 0; i < 20; i++ {
		call(h, net.IPv4(10, 1, byte(i/256), byte(i)).String(), "GET", "/admin/known", "guess")
	}
	if n := len(g.failures); n > 4+1 {
		t.Fatalf("%d addresses remembered, want at most 4 and the shared record", n)
	}
	if got := call(h, "10.2.0.1", "GET", "/admin/known", "guess"); got != fasthttp.StatusTooManyRequests {
		t.Errorf("a new address guessing once the shared record is over its limit = %d, want 429", got)
	}
	if got := call(h, "10.1.0.0", "GET", "/admin/known", "guess"); got != fasthttp.StatusUnauthorized {
		t.Errorf("a remembered address under its limit = %d, want 401", got)
	}
}

// TestTokenIsNeverThrottled: however many addresses have failed, the
// overflow record and every address's own exhausted included, a request
// with the token gets through, from a throttled address and from a new
// one; the token is checked before the throttle, so no one can lock the
// operators out.
func TestTokenIsNeverThrottled(t *testing.T) {
	_, _, h := newGuard(Options{MaxFailures: 2, MaxAddresses: 4})
	for round := 0; round < 3; round++ {
		for i := 0; i < 50; i++ {
			call(h, net.IPv4(10, 9, byte(i/256), byte(i)).String(), "POST", "/admin/known", "guess")
		}
	}
	for _, addr := range []string{"10.9.0.0", "10.9.0.49", "192.0.2.77", "2001:db8:ffff::1"} {
		if got := call(h, addr, "GET", "/admin/known", "guess"); got != fasthttp.StatusTooManyRequests {
			t.Errorf("%s guessing with the throttle exhausted = %d, want 429", addr, got)
		}
		if got := call(h, addr, "GET", "/admin/known", token); got != fasthttp.StatusOK {
			t.Errorf("%s with the token, the throttle exhausted = %d, want 200", addr, got)
		}
	}
}

func TestEmptyTokenRefusesEverything(t *testing.T) {
	h := New("", Options{}).Handler(func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200) })
	if got := call(h, "10.0.0.1", "GET", "/admin/known", ""); got != fasthttp.StatusUnauthorized {
		t.Errorf("no token configured, none sent = %d, want 401", got)
	}
}
