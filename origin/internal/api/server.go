// Package api is the origin's HTTP surface: the public reserve, reservation
// and snapshot endpoints (reached only through the edge) and the admin
// listener (sales, ledger, metrics, dev tokens). Routes and answers follow
// docs/API.md.
package api

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/flashgate/flashgate/internal/adminauth"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/sales"
	"github.com/flashgate/flashgate/tokens"
)

// Deps are the components the handlers use.
type Deps struct {
	Catalog    *catalog.Catalog
	Sales      *sales.Service          // creates sales, takes reserves, shows snapshots and books, rebuilds, finds reservations
	Ledger     *ledger.Store           // the edges' durable copies of their lines
	Orders     *orders.Service         // nil when no payment gateway is configured
	Verifier   *tokens.Verifier        // admission tokens
	Users      *tokens.UserVerifier    // the shop's user tokens
	Issuer     *tokens.Issuer          // dev-mode admission tokens; nil outside dev mode
	Edges      *tokens.RequestVerifier // the edges' signed line requests; nil: no line routes
	Signatures SignatureStore          // the line requests' signatures taken; required with Edges
	Log        *slog.Logger
	Registry   *prometheus.Registry // metrics served on the admin listener
	Clock      clock.Clock          // nil means clock.Real
	AdminToken string
	// Ready says whether the origin takes requests that need Redis or
	// Postgres and, when not, what it waits for; until it does, every
	// route but the probes and metrics answers please_wait. nil means
	// always ready.
	Ready func() (ready bool, waitingFor string)
}

// Options tune the handlers; zero values take the defaults.
type Options struct {
	// Dev switches on the dev-mode admission-token endpoint.
	Dev bool
	// Budget bounds the Redis and Postgres work of one request. Required
	// (app.Config.RequestBudget).
	Budget time.Duration
	// MaxPublicBody caps a public request body in bytes; 0 means 4 KiB.
	MaxPublicBody int
	// MaxAdminBody caps an admin request body in bytes; 0 means 1 MiB.
	MaxAdminBody int
}

// Server holds the handlers of both listeners.
type Server struct {
	Deps
	opts Options

	requests *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	metrics  fasthttp.RequestHandler
}

// New returns a Server; its metrics register on deps.Registry.
func New(deps Deps, opts Options) *Server {
	if opts.MaxPublicBody <= 0 {
		opts.MaxPublicBody = 4 << 10
	}
	if opts.MaxAdminBody <= 0 {
		opts.MaxAdminBody = 1 << 20
	}
	deps.Clock = clock.Or(deps.Clock)
	if deps.Ready == nil {
		deps.Ready = func() (bool, string) { return true, "" }
	}
	s := &Server{
		Deps: deps,
		opts: opts,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashgate_origin_request_seconds",
			Help:    "Origin HTTP requests by route and status, with their latency.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_origin_rejections_total",
			Help: "Origin requests answered with an error, by code: the error table's classification, as answered.",
		}, []string{"code"}),
	}
	deps.Registry.MustRegister(s.requests, s.errors)
	s.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{}))
	return s
}

// handler is a route's body: it writes success itself and returns any other
// answer as an error.
type handler func(ctx *fasthttp.RequestCtx, c context.Context, params []string) error

type route struct {
	method  string
	pattern []string // "*" matches one segment, which goes to params
	name    string
	h       handler
}

// publicRoutes are the routes of the public listener, in the order they are
// matched: the sale, order, webhook and line routes, which wait for the
// origin to be ready, then the probes. docs/API.md lists each one
// (routes_test.go).
func (s *Server) publicRoutes() []route {
	return append(s.whenReady([]route{
		{fasthttp.MethodPost, []string{"v1", "sales", "*", "reserve"}, "reserve", s.reserve},
		{fasthttp.MethodGet, []string{"v1", "sales"}, "sales", s.listSales},
		{fasthttp.MethodGet, []string{"v1", "sales", "*"}, "sale", s.snapshot},
		{fasthttp.MethodGet, []string{"v1", "reservations", "*"}, "reservation", s.reservation},
		{fasthttp.MethodPost, []string{"v1", "orders"}, "create_order", s.createOrder},
		{fasthttp.MethodGet, []string{"v1", "orders", "*"}, "order", s.order},
		{fasthttp.MethodPost, []string{"v1", "payments", "webhook"}, "payment_webhook", s.paymentWebhook},
		{fasthttp.MethodGet, []string{"v1", "lines", "*"}, "line", s.signed(s.getLine)},
		{fasthttp.MethodPost, []string{"v1", "lines", "*"}, "line_ensure", s.signed(s.ensureLine)},
		{fasthttp.MethodPut, []string{"v1", "lines", "*", "settings"}, "line_settings", s.signed(s.lineSettings)},
		{fasthttp.MethodGet, []string{"v1", "lines", "*", "changes"}, "line_changes", s.signed(s.lineChanges)},
		{fasthttp.MethodGet, []string{"v1", "lines", "*", "books"}, "line_books", s.signed(s.lineBooks)},
		{fasthttp.MethodPost, []string{"v1", "lines", "*", "ceilings"}, "line_ceilings", s.signed(s.raiseLine)},
		{fasthttp.MethodPost, []string{"v1", "lines", "*", "serving"}, "line_serving", s.signed(s.lowerServing)},
		{fasthttp.MethodPost, []string{"v1", "lines", "*", "draw"}, "line_draw", s.signed(s.sealDraw)},
		{fasthttp.MethodPost, []string{"v1", "admin-changes"}, "admin_change", s.signed(s.recordAdminChange)},
		{fasthttp.MethodGet, []string{"v1", "admin-changes"}, "admin_changes", s.signed(s.adminChanges)},
	}), s.probeRoutes()...)
}

// adminRoutes are the routes of the admin listener, in the order they are
// matched: the sale and dev routes, which wait for the origin to be ready
// (the dev admission token only in dev mode, Options.Dev), then the probes
// and metrics, which never do. docs/API.md lists each one (routes_test.go).
func (s *Server) adminRoutes() []route {
	r := []route{
		{fasthttp.MethodPost, []string{"admin", "sales"}, "create_sale", s.createSale},
		{fasthttp.MethodGet, []string{"admin", "sales", "*", "ledger"}, "ledger", s.ledger},
		{fasthttp.MethodPost, []string{"admin", "sales", "*", "rebuild"}, "rebuild", s.rebuildSale},
	}
	if s.opts.Dev {
		r = append(r, route{fasthttp.MethodPost, []string{"admin", "dev", "admission-token"}, "dev_admission_token", s.devAdmissionToken})
	}
	return append(append(s.whenReady(r), s.probeRoutes()...),
		route{fasthttp.MethodGet, []string{"metrics"}, "metrics", func(ctx *fasthttp.RequestCtx, _ context.Context, _ []string) error {
			s.metrics(ctx)
			return nil
		}},
	)
}

// probeRoutes are liveness and readiness, on both listeners.
func (s *Server) probeRoutes() []route {
	return []route{
		{fasthttp.MethodGet, []string{"healthz"}, "healthz", s.healthz},
		{fasthttp.MethodGet, []string{"readyz"}, "readyz", s.readyz},
	}
}

// whenReady makes each route answer please_wait (errStarting) until the
// origin is ready (Deps.Ready): before, the stores they use may not reach
// Redis or Postgres, the schema may be old and the catalog empty.
func (s *Server) whenReady(routes []route) []route {
	for i := range routes {
		h := routes[i].h
		routes[i].h = func(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
			if ready, _ := s.Ready(); !ready {
				return errStarting
			}
			return h(ctx, c, params)
		}
	}
	return routes
}

// Public is the handler of the public listener.
func (s *Server) Public() fasthttp.RequestHandler {
	return s.router(s.publicRoutes())
}

// Admin is the handler of the admin listener: every request but /healthz
// and /readyz is authenticated with the admin bearer token before it is
// routed, and an address that keeps failing is throttled (see adminauth).
func (s *Server) Admin() fasthttp.RequestHandler {
	guard := adminauth.New(s.AdminToken, adminauth.Options{OpenPaths: []string{"/healthz", "/readyz"}, Reject: s.fail, Clock: s.Clock})
	return guard.Handler(s.router(s.adminRoutes()))
}

func (s *Server) router(routes []route) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		name := "not_found"
		defer func() {
			s.requests.WithLabelValues(name, strconv.Itoa(ctx.Response.StatusCode())).Observe(time.Since(start).Seconds())
		}()
		var segBuf [8]string
		segs := httpapi.SplitPath(strings.Trim(string(ctx.Path()), "/"), segBuf[:0])
		var match *route
		var params []string
		methodMismatch := false
		for i := range routes {
			p, ok := httpapi.MatchPath(routes[i].pattern, segs)
			if !ok {
				continue
			}
			if routes[i].method != string(ctx.Method()) {
				methodMismatch = true
				continue
			}
			match, params = &routes[i], p
			break
		}
		if match == nil {
			if methodMismatch {
				s.fail(ctx, errMethodNotAllowed)
				return
			}
			s.fail(ctx, httpapi.ErrNotFound)
			return
		}
		name = match.name
		// fasthttp's RequestCtx has no deadline: every request gets its own
		// budget for the Redis and Postgres calls it makes.
		c, cancel := context.WithTimeout(context.Background(), s.opts.Budget)
		defer cancel()
		if err := match.h(ctx, c, params); err != nil {
			s.fail(ctx, err)
		}
	}
}

// healthz: GET /healthz, liveness: the process serves requests. It says
// nothing about Redis or Postgres; /readyz does.
func (s *Server) healthz(ctx *fasthttp.RequestCtx, _ context.Context, _ []string) error {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyzJSON is the body of GET /readyz: the edge's shape, without its
// ages and stale sales.
type readyzJSON struct {
	Status    string `json:"status"`               // "ready" or "not_ready"
	Error     string `json:"error,omitempty"`      // "not_ready" when not ready, as every error body has
	Message   string `json:"message,omitempty"`    // what the origin waits for
	RequestID string `json:"request_id,omitempty"` // when not ready, as every error body has
}

// readyz: GET /readyz, readiness for the load balancer: 503 not_ready with
// Retry-After until the origin has reached Redis and Postgres, migrated
// and checked Redis for lost sales, then 200 for good. A dependency lost
// later shows in the answers that need it (please_wait), not here: every
// origin shares it, and one not sent requests helps no one.
func (s *Server) readyz(ctx *fasthttp.RequestCtx, _ context.Context, _ []string) error {
	ready, waitingFor := s.Ready()
	if ready {
		writeJSON(ctx, fasthttp.StatusOK, readyzJSON{Status: "ready"})
		return nil
	}
	id := httpapi.RequestID(ctx)
	ctx.Response.Header.SetCanonical(httpapi.HeaderRequestID, []byte(id))
	ctx.Response.Header.SetCanonical(httpapi.HeaderRetryAfter, []byte("1"))
	writeJSON(ctx, fasthttp.StatusServiceUnavailable, readyzJSON{Status: codeNotReady, Error: codeNotReady,
		Message: "The origin is starting: waiting for " + waitingFor + ".", RequestID: id})
	return nil
}
