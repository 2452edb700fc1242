// Package api is the edge's HTTP surface: the public listener (static page,
// snapshot, queue join and status, the reserve gate, pass-through to origin
// and to the shop) and the admin listener (admission settings, metrics).
// Routes and answers follow docs/API.md. Handlers read the request, call the
// admission controller, the line and the upstreams, and answer; every
// failure is answered through errorTable (errors.go).
package api

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/proxy"
	"github.com/flashgate/flashgate/edge/internal/roster"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/internal/adminauth"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/tokens"
)

// Deps are the components the handlers use.
type Deps struct {
	Admission  *admission.Controller            // each sale's view, its readiness and estimates
	Line       *line.Keeper                     // the line: joins (waiting for its durable copy), claims, settings
	Snapshots  *snapshot.Cache                  // the origin's sales, for the ops dashboard
	Ops        OriginOps                        // the dashboard's reads from the origin; nil: none
	Audit      AdminAudit                       // records defence changes and tarpit releases before they are made (audit.go); nil: every one is refused please_wait
	Roster     *roster.Roster                   // the nodes sharing this Redis; nil: none
	Tokens     *tokens.Verifier                 // queue and admission tokens
	Issuer     *tokens.Issuer                   // queue and admission tokens
	Challenges *challenge.Challenger            // joins' proof of work, when a sale asks for it
	Defences   *defence.Defences                // the tarpit, trust rules and network limits; nil: none
	Users      *tokens.UserVerifier             // the shop's user tokens
	DevUsers   *tokens.DevUserIssuer            // dev mode only; nil otherwise
	Origin     *proxy.Upstream                  // reserves
	Payments   *proxy.Upstream                  // orders, reservations and the payment webhook, to the same origin
	Shop       *proxy.Upstream                  // nil: paths outside the sale answer 404
	Static     func(*fasthttp.RequestCtx) error // the page and its files (assets.Handler)
	Limits     Limits
	Log        *slog.Logger
	Registry   *prometheus.Registry
	Clock      clock.Clock // nil means clock.Real
	AdminToken string
}

// Limits are the per-address, per-subnet and per-account rate limits of
// the public routes; a nil limiter is no limit. Addresses are keyed by
// httpapi.AddressKey (an IPv6 address by its /64), subnets by subnetKey
// (an IPv4 address by its /24, an IPv6 one by its /48).
type Limits struct {
	JoinIP, JoinAccount *limiter.Limiter
	PollIP, PollAccount *limiter.Limiter
	// JoinSubnet and PollSubnet keep the per-network counts; their rates
	// are the defence settings' (Deps.Defences), which ops change at run
	// time. Without Defences, or a store, there is no network limit.
	JoinSubnet, PollSubnet    limiter.Store
	ReserveIP, ReserveAccount *limiter.Limiter
	OrderAccount              *limiter.Limiter // POST /v1/orders
	OrderReadAccount          *limiter.Limiter // GET /v1/orders/{id} and GET /v1/reservations/{id}
	WebhookIP                 *limiter.Limiter // POST /v1/payments/webhook
}

// Options tune the handlers; zero values take the defaults.
type Options struct {
	// TrustedProxies are the load balancers and CDN ranges whose
	// X-Forwarded-For, -Host and -Proto are believed; from any other peer
	// the peer address is the client, and the edge names the host and
	// scheme itself.
	TrustedProxies []netip.Prefix
	// PublicHost is the host shoppers reach the edge at, sent upstream as
	// X-Forwarded-Host when no trusted proxy names one; "" sends none.
	PublicHost string
	// Budget bounds the Redis work of one request; 0 means 2 s.
	Budget time.Duration
	// WebhookAllow are the payment gateway's addresses: a webhook from
	// any other client address is answered 403. Empty: any address.
	WebhookAllow []netip.Prefix
	// WebhookMaxBodyBytes bounds a webhook's body (413 beyond); 0 means
	// DefaultWebhookMaxBodyBytes.
	WebhookMaxBodyBytes int
	// MaxHeldSnapshots bounds the snapshot watches (?at=) the node holds
	// at once; beyond it they are answered at once. Behind a CDN there is
	// about one a second per CDN cache. 0 means DefaultMaxHeldSnapshots.
	MaxHeldSnapshots int
}

// DefaultMaxHeldSnapshots is the snapshot watches a node holds at once
// unless set: thousands of CDN caches, not a crowd's pages.
const DefaultMaxHeldSnapshots = 10_000

// DefaultWebhookMaxBodyBytes is the webhook body bound unless set: a
// gateway's event is a few hundred bytes.
const DefaultWebhookMaxBodyBytes = 64 << 10

// Server holds the handlers of both listeners.
type Server struct {
	Deps
	opts     Options
	metrics  metrics
	promh    fasthttp.RequestHandler
	networks atomic.Pointer[networkLimiters] // the network limits of the defence settings in force
	logs     logCache                        // the admission logs built here (admissionlog.go)
	latency  latencyReadings                 // the origin latency the overview measures from (ops.go)
	held     atomic.Int64                    // snapshot watches held now (sale.go)
}

type metrics struct {
	requests         *prometheus.HistogramVec
	joins            prometheus.Counter
	polls            *prometheus.CounterVec
	admitted         prometheus.Counter
	challenges       *prometheus.CounterVec // by outcome
	rejections       *prometheus.CounterVec
	limitRefusals    *prometheus.CounterVec // 429 rate_limited, by the limit that refused
	upstream         *prometheus.HistogramVec
	originWait       *prometheus.HistogramVec // by upstream, as upstream names them
	snapshotsNotHeld prometheus.Counter       // snapshot watches answered at once, every hold taken

	// The children of polls, rejections, limitRefusals, requests and originWait
	// that the hot paths use.
	pollsBy      *childCache[string, prometheus.Counter]
	rejectionsBy *childCache[string, prometheus.Counter]
	limitedBy    *childCache[string, prometheus.Counter]
	requestsBy   *childCache[routeStatus, prometheus.Observer]
	originWaitBy *childCache[string, prometheus.Observer]
}

// New returns a Server; its metrics register on deps.Registry.
func New(deps Deps, opts Options) *Server {
	if opts.Budget <= 0 {
		opts.Budget = 2 * time.Second
	}
	if opts.WebhookMaxBodyBytes <= 0 {
		opts.WebhookMaxBodyBytes = DefaultWebhookMaxBodyBytes
	}
	if opts.MaxHeldSnapshots <= 0 {
		opts.MaxHeldSnapshots = DefaultMaxHeldSnapshots
	}
	deps.Clock = clock.Or(deps.Clock)
	s := &Server{Deps: deps, opts: opts}
	s.metrics = metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_edge_request_seconds", Help: "Edge requests by route and status, with their latency.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"route", "status"}),
		joins:    prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_joins_total", Help: "Queue joins answered with a place."}),
		polls:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_polls_total", Help: "Status polls by answered state."}, []string{"state"}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_admission_tokens_total", Help: "Admission tokens issued."}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_challenges_total",
			Help: "Joins' proof-of-work challenges by outcome: issued, solved, or refused as expired, too_easy, unsolved, wrong_account_or_sale, malformed."}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_edge_rejections_total", Help: "Requests answered with an error, by code.",
		}, []string{"code"}),
		// Beside rejections{code="rate_limited"}: which limit it was, so
		// that ops can tell a network's budget running out (join_subnet)
		// from one address's (join_ip) or one account's.
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_edge_limited_total", Help: "Public requests answered 429 rate_limited, by the rate limit that refused them (join_ip, join_subnet, join_account, poll_ip, ...).",
		}, []string{"limit"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_edge_upstream_seconds", Help: "Proxied requests by upstream and outcome, with their latency.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"upstream", "outcome"}),
		snapshotsNotHeld: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_snapshot_watches_unheld_total",
			Help: "Snapshot watches (?at=) answered at once because the node held as many as it may."}),
		// The part of flashgate_edge_upstream_seconds spent before the
		// request was sent: queueing for a connection of the upstream's
		// pool (0 for most requests; up to the queue timeout when busy).
		// The 10 µs bucket keeps those zeros from reading as 50 µs.
		originWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_edge_origin_wait_seconds", Help: "Proxied requests' wait for a free connection to their upstream, by upstream.",
			Buckets: []float64{.00001, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"upstream"}),
	}
	s.metrics.pollsBy = newChildCache(func(state string) prometheus.Counter { return s.metrics.polls.WithLabelValues(state) })
	s.metrics.rejectionsBy = newChildCache(func(code string) prometheus.Counter { return s.metrics.rejections.WithLabelValues(code) })
	s.metrics.limitedBy = newChildCache(func(limit string) prometheus.Counter { return s.metrics.limitRefusals.WithLabelValues(limit) })
	for name, l := range deps.Limits.named() {
		if l != nil {
			s.metrics.limited(name) // shown from the start, at 0
		}
	}
	if deps.Defences != nil {
		s.metrics.limited(LimitJoinSubnet)
		s.metrics.limited(LimitPollSubnet)
	}
	s.metrics.requestsBy = newChildCache(func(k routeStatus) prometheus.Observer {
		return s.metrics.requests.WithLabelValues(k.route, strconv.Itoa(k.status))
	})
	s.metrics.originWaitBy = newChildCache(func(upstream string) prometheus.Observer {
		return s.metrics.originWait.WithLabelValues(upstream)
	})
	heldNow := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashgate_edge_snapshot_watches_held",
		Help: "Snapshot watches (?at=) held now, waiting for their second to end or the sale's news."},
		func() float64 { return float64(s.held.Load()) })
	m := s.metrics
	deps.Registry.MustRegister(heldNow, m.requests, m.joins, m.polls, m.admitted, m.challenges, m.rejections, m.limitRefusals, m.upstream, m.originWait, m.snapshotsNotHeld)
	s.promh = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{}))
	return s
}

// handler is a route's body: it writes success itself and returns any other
// answer as an error.
type handler func(ctx *fasthttp.RequestCtx, params []string) error

type route struct {
	method  string
	pattern []string // "*" matches one segment, which goes to params; "**" the rest
	name    string
	h       handler
}

// publicRoutes are the routes of the public listener, in the order they are
// matched; the dev login only in dev mode (DevUsers set). A request no route
// takes goes to the shop (Public). docs/API.md lists each one (routes_test.go).
func (s *Server) publicRoutes() []route {
	routes := []route{
		{fasthttp.MethodGet, []string{"v1", "sales", "*"}, "snapshot", s.snapshot},
		{fasthttp.MethodPost, []string{"v1", "sales", "*", "queue"}, "join", s.join},
		{fasthttp.MethodGet, []string{"v1", "sales", "*", "queue", "status"}, "status", s.status},
		{fasthttp.MethodGet, []string{"v1", "sales", "*", "admission-log"}, "admission_log", s.admissionLog},
		{fasthttp.MethodPost, []string{"v1", "sales", "*", "reserve"}, "reserve", s.reserve},
		{fasthttp.MethodPost, []string{"v1", "orders"}, "orders", s.userPassThrough(LimitOrderAccount, s.Limits.OrderAccount)},
		{fasthttp.MethodGet, []string{"v1", "orders", "*"}, "order", s.userPassThrough(LimitOrderReadAccount, s.Limits.OrderReadAccount)},
		{fasthttp.MethodGet, []string{"v1", "reservations", "*"}, "reservation", s.userPassThrough(LimitOrderReadAccount, s.Limits.OrderReadAccount)},
		{fasthttp.MethodPost, []string{"v1", "payments", "webhook"}, "webhook", s.webhook},
		{fasthttp.MethodGet, []string{""}, "static", s.static},
		{fasthttp.MethodGet, []string{"static", "**"}, "static", s.static},
		{fasthttp.MethodHead, []string{""}, "static", s.static},
		{fasthttp.MethodHead, []string{"static", "**"}, "static", s.static},
		{fasthttp.MethodGet, []string{"healthz"}, "healthz", s.healthz},
		{fasthttp.MethodGet, []string{"readyz"}, "readyz", s.readyz},
	}
	if s.DevUsers != nil {
		routes = append(routes, route{fasthttp.MethodPost, []string{"v1", "dev", "login"}, "dev_login", s.devLogin})
	}
	return routes
}

// Public is the handler of the public listener.
func (s *Server) Public() fasthttp.RequestHandler {
	return s.router(s.publicRoutes(), s.shop)
}

// adminRoutes are the routes of the admin listener, in the order they are
// matched; any other request is 404 (Admin). docs/API.md lists each one
// (routes_test.go).
func (s *Server) adminRoutes() []route {
	return []route{
		{fasthttp.MethodGet, []string{"admin", "sales", "*", "admission"}, "get_admission", s.getAdmission},
		{fasthttp.MethodPut, []string{"admin", "sales", "*", "admission"}, "put_admission", s.putAdmission},
		{fasthttp.MethodGet, []string{"admin", "defences"}, "get_defences", s.getDefences},
		{fasthttp.MethodPut, []string{"admin", "defences"}, "put_defences", s.putDefences},
		{fasthttp.MethodGet, []string{"admin", "sales", "*", "changes"}, "get_changes", s.getChanges},
		{fasthttp.MethodGet, []string{"admin", "sales", "*", "books"}, "get_books", s.getBooks},
		{fasthttp.MethodGet, []string{"admin", "changes"}, "get_admin_changes", s.getAdminChanges},
		{fasthttp.MethodGet, []string{"admin", "overview"}, "get_overview", s.getOverview},
		{fasthttp.MethodGet, []string{"admin", "dashboard"}, "dashboard", s.serveDashboard},
		{fasthttp.MethodGet, []string{"admin", "dashboard", "*"}, "dashboard", s.serveDashboard},
		{fasthttp.MethodGet, []string{"admin", "tarpit"}, "get_tarpit", s.getTarpit},
		{fasthttp.MethodDelete, []string{"admin", "tarpit"}, "release_tarpit", s.releaseTarpit},
		{fasthttp.MethodGet, []string{"metrics"}, "metrics", func(ctx *fasthttp.RequestCtx, _ []string) error {
			s.promh(ctx)
			return nil
		}},
		{fasthttp.MethodGet, []string{"healthz"}, "healthz", s.healthz},
		{fasthttp.MethodGet, []string{"readyz"}, "readyz", s.readyz},
	}
}

// Admin is the handler of the admin listener: every request but /healthz
// and /readyz is authenticated with the admin bearer token before it is
// routed, and an address that keeps failing is throttled (see adminauth).
func (s *Server) Admin() fasthttp.RequestHandler {
	routes := s.adminRoutes()
	// The dashboard's page and files hold nothing secret: the page asks
	// the operator for the token, and every read it makes carries it.
	open := append([]string{"/healthz", "/readyz"}, dashboardPaths()...)
	guard := adminauth.New(s.AdminToken, adminauth.Options{OpenPaths: open, Reject: s.answerError, Clock: s.Clock})
	return guard.Handler(s.router(routes, func(ctx *fasthttp.RequestCtx, _ []string) error { return httpapi.ErrNotFound }))
}

func (s *Server) router(routes []route, fallback handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		name := "other"
		var segBuf [8]string
		segs := httpapi.SplitPath(strings.Trim(string(ctx.Path()), "/"), segBuf[:0])
		h := fallback
		var params []string
		for i := range routes {
			if routes[i].method != string(ctx.Method()) {
				continue
			}
			if p, ok := httpapi.MatchPath(routes[i].pattern, segs); ok {
				h, params, name = routes[i].h, p, routes[i].name
				break
			}
		}
		if err := h(ctx, params); err != nil {
			s.answerError(ctx, err)
		}
		s.metrics.request(name, ctx.Response.StatusCode()).Observe(time.Since(start).Seconds())
	}
}

// answerError answers err as errorTable says, counts it under the code it
// is answered with, and logs it, with the request id its answer carries,
// when the table did not expect it.
func (s *Server) answerError(ctx *fasthttp.RequestCtx, err error) {
	e, expected := errorTable.Classify(err)
	if !expected {
		s.Log.Warn("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()),
			"request_id", httpapi.RequestID(ctx), "err", err)
	}
	s.metrics.rejected(e.Code).Inc()
	httpapi.WriteError(ctx, e)
}

// healthz: GET /healthz, liveness: the process serves requests. It says
// nothing about Redis or the origin; /readyz does.
func (s *Server) healthz(ctx *fasthttp.RequestCtx, _ []string) error {
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyzJSON is the body of GET /readyz. Ages are in milliseconds, null
// before the first good list or tick.
type readyzJSON struct {
	Status     string   `json:"status"`               // "ready" or "not_ready"
	Error      string   `json:"error,omitempty"`      // "not_ready" when not ready, as every error body has
	Message    string   `json:"message,omitempty"`    // why not
	RequestID  string   `json:"request_id,omitempty"` // when not ready, as every error body has
	ListAgeMS  *int64   `json:"sales_list_age_ms"`
	TickAgeMS  *int64   `json:"tick_age_ms"`
	StaleSales []string `json:"stale_sales"` // listed sales answered please_wait for want of a current snapshot
}

// readyz: GET /readyz, readiness for the load balancer: 200 while the node
// can answer sale requests, 503 with Retry-After while it is starting or
// cannot reach the origin or its Redis.
func (s *Server) readyz(ctx *fasthttp.RequestCtx, _ []string) error {
	r := s.Admission.Readiness()
	out := readyzJSON{Status: "ready", StaleSales: r.StaleSales}
	if out.StaleSales == nil {
		out.StaleSales = []string{}
	}
	if r.ListAge >= 0 {
		ms := r.ListAge.Milliseconds()
		out.ListAgeMS = &ms
	}
	if r.TickAge >= 0 {
		ms := r.TickAge.Milliseconds()
		out.TickAgeMS = &ms
	}
	status := fasthttp.StatusOK
	if !r.Ready {
		status = fasthttp.StatusServiceUnavailable
		out.Status, out.Error, out.RequestID = codeNotReady, codeNotReady, httpapi.RequestID(ctx)
		ctx.Response.Header.SetCanonical(httpapi.HeaderRequestID, []byte(out.RequestID))
		if !r.ListCurrent {
			out.Message = "No current list of the origin's sales: the node is starting or cannot reach the origin."
		} else {
			out.Message = "No current admission tick: the node is starting or cannot reach its Redis."
		}
		ctx.Response.Header.SetCanonical(httpapi.HeaderRetryAfter, []byte("1"))
	}
	httpapi.WriteJSON(ctx, status, out)
	return nil
}

// budget gives a request's Redis calls their own deadline: fasthttp's
// RequestCtx has none.
func (s *Server) budget() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.Budget)
}

// addressKey is the caller's address as the key of a per-address limit:
// httpapi.AddressKey, so an IPv6 client is counted by its /64.
func (s *Server) addressKey(ctx *fasthttp.RequestCtx) string {
	a, _ := s.clientAddr(ctx)
	return addressKey(a)
}

// addressKey is httpapi.AddressKey of a client address.
func addressKey(a netip.Addr) string { return httpapi.AddressKey(a.AsSlice()) }

// peer is the address of the connection the request came on.
func peer(ctx *fasthttp.RequestCtx) netip.Addr {
	a, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return a.Unmap()
}

// clientAddr is the caller's address: the peer, or when the peer is a
// trusted proxy, the right-most hop of X-Forwarded-For (every header line
// of it, in order) that is not a trusted proxy; when every hop is, the
// left-most. A hop may carry a port ("198.51.100.4:5000").
//
// The walk stops at a hop that is not an address ("unknown", an
// obfuscated name, an empty entry): the trusted proxy to its right wrote
// it for its own peer, so nothing vouches for the hops left of it, and a
// limit keyed on the hop itself would be keyed on whatever its writer
// chose — a new key per request, if a client could reach the header. The
// caller is then the nearest trusted hop, the one that wrote it (the peer
// when it is the last), and named is false: the address is a proxy's, not
// the client's. So every client behind a proxy that writes no addresses
// shares that proxy's budget rather than each choosing its own.
func (s *Server) clientAddr(ctx *fasthttp.RequestCtx) (addr netip.Addr, named bool) {
	addr = peer(ctx)
	if !s.trusted(addr) {
		return addr, true
	}
	var hops []string
	for _, line := range ctx.Request.Header.PeekAll("X-Forwarded-For") {
		if line := strings.TrimSpace(string(line)); line != "" {
			hops = append(hops, strings.Split(line, ",")...)
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return addr, false
		}
		if !s.trusted(hop) {
			return hop, true
		}
		addr = hop
	}
	return addr, true
}

// parseHop reads one X-Forwarded-For entry: an IPv4 or IPv6 address, with
// or without a port (an IPv6 one with a port in brackets); false for
// anything else. A zone is dropped: it is the writer's choice, not part of
// the address.
func parseHop(hop string) (netip.Addr, bool) {
	hop = strings.TrimSpace(hop)
	a, err := netip.ParseAddr(hop)
	if err != nil {
		ap, perr := netip.ParseAddrPort(hop)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// forwarded is what the edge tells an upstream about the request of ctx
// (proxy.Forwarded): the client's address as clientAddr has it; the public
// host and the scheme as the peer named them in X-Forwarded-Host and
// X-Forwarded-Proto when it is a trusted proxy and they are well-formed,
// else the configured public host (or none) and the scheme of the edge's
// own listener. The request's Host is never passed on: the client chose
// it, and a shop that builds links or redirects from X-Forwarded-Host
// would build them to whatever host the client liked.
func (s *Server) forwarded(ctx *fasthttp.RequestCtx) proxy.Forwarded {
	a, _ := s.clientAddr(ctx)
	f := proxy.Forwarded{For: a.String(), Host: s.opts.PublicHost, Proto: "http"}
	if ctx.IsTLS() {
		f.Proto = "https"
	}
	if !s.trusted(peer(ctx)) {
		return f
	}
	if h := lastEntry(ctx.Request.Header.PeekAll("X-Forwarded-Host")); ValidHost(h) {
		f.Host = h
	}
	switch p := lastEntry(ctx.Request.Header.PeekAll("X-Forwarded-Proto")); {
	case strings.EqualFold(p, "http"):
		f.Proto = "http"
	case strings.EqualFold(p, "https"):
		f.Proto = "https"
	}
	return f
}

// lastEntry is the right-most comma-separated entry of a header's lines,
// trimmed: the one the nearest proxy wrote, when proxies append to it.
func lastEntry(lines [][]byte) string {
	if len(lines) == 0 {
		return ""
	}
	last := string(lines[len(lines)-1])
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.TrimSpace(last)
}

// ValidHost reports whether h is a host as a URL's authority carries it
// (a name, an IPv4 address or a bracketed IPv6 one, with an optional
// port), in at most 255 bytes: nothing that could end a header or change
// a URL built from it.
func ValidHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
