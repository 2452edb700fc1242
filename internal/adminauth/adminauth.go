// Package adminauth guards an admin listener. Every request is
// authenticated before it is routed, so a caller without the token gets the
// same 401 for every path and method and learns nothing about which routes
// exist (or whether dev mode is on). The token is checked first, in
// constant time, and a request that carries it always gets through: only
// failures are throttled, so that no one, from however many addresses,
// can lock the operators out. An address that keeps failing is answered
// 429 for a while (failures from beyond the addresses remembered count
// together); with a strong token (internal/secretcheck) guessing it is
// hopeless anyway, and the throttle makes failing callers back off.
package adminauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// Options tune a Guard; zero values take the defaults.
type Options struct {
	// OpenPaths are served without the token: liveness and readiness
	// probes, which say nothing an outsider could use.
	OpenPaths []string
	// MaxFailures is how many failed attempts an address may make within
	// Window before it is refused until the window ends (default 10).
	MaxFailures int
	// Window is the period failures are counted over (default 1 minute).
	Window time.Duration
	// MaxAddresses bounds the addresses whose failures are remembered
	// (default 10,000); beyond it, failures from new addresses count
	// together, so a spread-out guesser is throttled as one.
	MaxAddresses int
	// Clock is the clock (default clock.Real); tests set it.
	Clock clock.Clock
	// Reject answers a refused request with its *httpapi.Error (401 or
	// 429). A tier passes its own error answer, so that refusals are
	// counted and carry request ids like every other error it answers;
	// nil means httpapi.WriteError.
	Reject func(ctx *fasthttp.RequestCtx, err error)
}

// Guard authenticates an admin listener's requests with one bearer token.
type Guard struct {
	token [sha256.Size]byte // SHA-256 of the token: compared in constant time, whatever a request's length
	empty bool              // no token configured: every request but OpenPaths is refused
	open  map[string]bool
	opts  Options

	mu       sync.Mutex         // guards failures
	failures map[string]*record // by address (an IPv6 address by its /64)
}

// record counts an address's failures in the window that began at start.
type record struct {
	start time.Time
	count int
}

// overflow is the key failures from new addresses share once MaxAddresses
// are remembered.
const overflow = "overflow"

// New returns a Guard for token. An empty token refuses every request but
// those to OpenPaths.
func New(token string, opts Options) *Guard {
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = 10
	}
	if opts.Window <= 0 {
		opts.Window = time.Minute
	}
	if opts.MaxAddresses <= 0 {
		opts.MaxAddresses = 10_000
	}
	opts.Clock = clock.Or(opts.Clock)

	open := make(map[string]bool, len(opts.OpenPaths))
	for _, p := range opts.OpenPaths {
		open[p] = true
	}
	return &Guard{token: sha256.Sum256([]byte(token)), empty: token == "", open: open, opts: opts, failures: map[string]*record{}}
}

var errUnauthorized = httpapi.New(fasthttp.StatusUnauthorized, httpapi.CodeUnauthorized,
	"This listener needs Authorization: Bearer <admin token>.")

// Handler returns next behind the guard. A request with the token is
// passed on whatever its address has failed before; one without it is
// answered 429 while its address is throttled, else 401, and counted.
func (g *Guard) Handler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if g.open[string(ctx.Path())] || g.authentic(httpapi.Bearer(ctx)) {
			next(ctx)
			return
		}
		addr := httpapi.AddressKey(ctx.RemoteIP())
		if wait := g.refusedFor(addr); wait > 0 {
			g.reject(ctx, &httpapi.Error{
				Status: fasthttp.StatusTooManyRequests, Code: httpapi.CodeRateLimited,
				Message:    "Too many failed attempts from this address; try again in " + strconv.Itoa(wait) + " s.",
				RetryAfter: wait,
			})
			return
		}
		g.failed(addr)
		g.reject(ctx, errUnauthorized)
	}
}

// authentic reports whether bearer is the token, in time that depends on
// neither (both are hashed first, so not even on their lengths).
func (g *Guard) authentic(bearer string) bool {
	sum := sha256.Sum256([]byte(bearer))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1 && !g.empty
}

// reject answers a refused request with e.
func (g *Guard) reject(ctx *fasthttp.RequestCtx, e *httpapi.Error) {
	if g.opts.Reject != nil {
		g.opts.Reject(ctx, e)
		return
	}
	httpapi.WriteError(ctx, e)
}

// refusedFor returns how many seconds addr stays refused, or 0.
func (g *Guard) refusedFor(addr string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.failures[addr]
	if !ok {
		if len(g.failures) < g.opts.MaxAddresses {
			return 0
		}
		r, ok = g.failures[overflow]
		if !ok {
			return 0
		}
	}
	left := r.start.Add(g.opts.Window).Sub(g.opts.Clock.Now())
	if r.count < g.opts.MaxFailures || left <= 0 {
		return 0
	}
	return int((left + time.Second - 1) / time.Second)
}

// failed counts a failure of addr.
func (g *Guard) failed(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Clock.Now()
	r, ok := g.failures[addr]
	if !ok && len(g.failures) >= g.opts.MaxAddresses {
		g.forgetExpired(now)
		if len(g.failures) >= g.opts.MaxAddresses {
			addr = overflow
			r, ok = g.failures[addr]
		}
	}
	if !ok || now.Sub(r.start) >= g.opts.Window {
		r = &record{start: now}
		g.failures[addr] = r
	}
	r.count++
}

func (g *Guard) forgetExpired(now time.Time) {
	for addr, r := range g.failures {
		if now.Sub(r.start) >= g.opts.Window {
			delete(g.failures, addr)
		}
	}
}
