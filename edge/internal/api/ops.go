package api

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"mime"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The ops dashboard: a page on the admin listener (GET /admin/dashboard),
// refreshed every second or two from the routes below, with controls for
// the admission rate and pause. The page itself holds nothing secret and
// is served without the token; every read and change it makes carries the
// admin token, which the operator types in once.

// OriginOps reads what the dashboard shows from the origin's side, through
// the signed line routes (line.OriginStore).
type OriginOps interface {
	Changes(ctx context.Context, sale string) (json.RawMessage, error)
	Books(ctx context.Context, sale string) (json.RawMessage, error)
}

var _ OriginOps = (*line.OriginStore)(nil)

//go:embed dashboard
var dashboard embed.FS

// dashboardFiles are the page's files, by their path on the admin
// listener; open to anyone who reaches the listener.
var dashboardFiles = map[string]string{
	"/admin/dashboard":               "dashboard/index.html",
	"/admin/dashboard/dashboard.js":  "dashboard/dashboard.js",
	"/admin/dashboard/dashboard.css": "dashboard/dashboard.css",
}

// dashboardPaths are dashboardFiles' paths, for the admin guard.
func dashboardPaths() []string {
	paths := make([]string, 0, len(dashboardFiles))
	for p := range dashboardFiles {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// serveDashboard: GET /admin/dashboard and its files.
func (s *Server) serveDashboard(ctx *fasthttp.RequestCtx, _ []string) error {
	name, ok := dashboardFiles[string(ctx.Path())]
	if !ok {
		return errNoFile
	}
	b, err := dashboard.ReadFile(name)
	if err != nil {
		return err
	}
	ctx.SetContentType(mime.TypeByExtension(path.Ext(name)))
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("X-Frame-Options", "DENY")
	ctx.Response.Header.Set("Referrer-Policy", "no-referrer")
	ctx.Response.Header.Set("Content-Security-Policy",
		"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	ctx.SetBody(b)
	return nil
}

// overviewJSON is GET /admin/overview: this node and every sale it knows.
type overviewJSON struct {
	Node     nodeJSON           `json:"node"`
	Sales    []saleOverviewJSON `json:"sales"`
	Counters map[string]float64 `json:"counters"`
	Reserves reservesJSON       `json:"reserves"`
	// Nodes are every node on the roster (this one's Redis), null when
	// it cannot be read.
	Nodes []rosterNodeJSON `json:"nodes"`
}

// rosterNodeJSON is a node as the roster has it: what it last said of
// itself and how long ago, by Redis's clock.
type rosterNodeJSON struct {
	ID       string  `json:"id"`
	This     bool    `json:"this"`
	Ready    bool    `json:"ready"`
	OriginOK bool    `json:"origin_ok"`
	RedisOK  bool    `json:"redis_ok"`
	AgeS     float64 `json:"age_s"`
}

// nodeJSON is this node's state: whether it reaches the origin (its list
// of sales is current) and Redis (its last good tick is recent).
type nodeJSON struct {
	Time      time.Time `json:"time"`
	Ready     bool      `json:"ready"`
	OriginOK  bool      `json:"origin_ok"`
	RedisOK   bool      `json:"redis_ok"`
	ListAgeS  float64   `json:"list_age_s"` // -1: no list yet
	TickAgeS  float64   `json:"tick_age_s"` // -1: no good tick yet
	StaleSale []string  `json:"stale_sales"`
}

type saleOverviewJSON struct {
	SaleID    string    `json:"sale_id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	SoldOut   bool      `json:"sold_out"`
	Available int64     `json:"available"` // units the origin's last snapshot shows
	// Current: the origin's snapshot is recent; Fresh: the cursor's
	// reading is (Redis answers). Admission is absent before the first.
	Current   bool           `json:"current"`
	Fresh     bool           `json:"fresh"`
	Admission *admissionJSON `json:"admission"`
	// Rebuilding: this node's last tick found that Redis no longer holds
	// the sale's line it read before (its keys gone, or writes lost in a
	// failover), and the line is being restored from the origin's durable
	// copy; joins and polls answer please_wait until it is back.
	// RestoredAt is when the line Redis holds was put there by a restore
	// (Redis's clock), null when it is the line first created there (or
	// one lost before any place was handed out), or not read yet.
	Rebuilding bool       `json:"rebuilding"`
	RestoredAt *time.Time `json:"restored_at"`
}

// reservesJSON is what this node saw of reserves, in all sales, counted
// since it started: the dashboard takes rates from two overviews' counts
// and their node.time.
type reservesJSON struct {
	// Answers are the reserves this node answered, by HTTP status
	// (flashgate_edge_request_seconds{route="reserve"}): its own answers
	// (409 sold out from the snapshot, 401, 429, 503 please_wait) and the
	// origin's, passed on (201 reserved, 200 the reservation already
	// held, 403 limit reached, 409 sold out or the sale over, 503
	// please_wait).
	Answers map[string]uint64 `json:"answers"`
	// Origin are the reserves sent on to the origin, by how the exchange
	// ended (flashgate_edge_upstream_seconds{upstream="origin"}): "ok" the
	// origin answered, whatever the status; "error" the connection failed
	// or the exchange timed out; "busy" every connection was in use, and it
	// was never sent.
	Origin map[string]uint64 `json:"origin"`
	// Latency is how long the origin took to answer them lately; null on
	// the node's first overview, which has no reading to measure from.
	Latency *latencyJSON `json:"latency"`
}

// latencyJSON is a reserve's round trip to the origin as this node timed
// it — any wait for a free connection included — over the last WindowS
// seconds: quantiles of the "ok" exchanges' histogram interpolated within
// its buckets, as Prometheus's histogram_quantile does; null when the
// origin answered none.
type latencyJSON struct {
	WindowS float64  `json:"window_s"`
	Count   uint64   `json:"count"` // answers in the window
	P50S    *float64 `json:"p50_s"`
	P99S    *float64 `json:"p99_s"`
}

// rosterBudget bounds the overview's read of the roster.
const rosterBudget = 300 * time.Millisecond

// overviewCounters are the metrics the dashboard shows as they are, by
// their name without flashgate_edge_, summed over their labels but the one
// named: its values become name.value, the name without _total
// (rejections.sold_out).
var overviewCounters = map[string]string{
	"flashgate_edge_challenges_total":     "outcome",
	"flashgate_edge_tarpit_caught_total":  "",
	"flashgate_edge_tarpit_answers_total": "",
	"flashgate_edge_tarpit_entries":       "",
	"flashgate_edge_rejections_total":     "code",
	"flashgate_edge_joins_total":          "",
	// Creating a sale's line counts as its first restore.
	"flashgate_edge_line_restores_total": "",
	"flashgate_edge_line_failures_total": "step",
}

// The histograms the overview reads reserves from (server.go names them).
const (
	requestsMetric = "flashgate_edge_request_seconds"
	upstreamMetric = "flashgate_edge_upstream_seconds"
)

// getOverview: GET /admin/overview.
func (s *Server) getOverview(ctx *fasthttp.RequestCtx, _ []string) error {
	now := s.Clock.Now()
	r := s.Admission.Readiness()
	out := overviewJSON{
		Node: nodeJSON{Time: now.UTC(), Ready: r.Ready, OriginOK: r.ListCurrent, RedisOK: r.TickCurrent,
			ListAgeS: seconds(r.ListAge), TickAgeS: seconds(r.TickAge), StaleSale: r.StaleSales},
		Sales: []saleOverviewJSON{},
	}
	out.Counters, out.Reserves = s.readMetrics(now)
	if out.Node.StaleSale == nil {
		out.Node.StaleSale = []string{}
	}
	for _, e := range s.Snapshots.All() {
		sale := saleOverviewJSON{SaleID: e.Sale.SaleID, Name: e.Sale.Name, Status: e.Sale.Status,
			StartsAt: e.Sale.StartsAt, EndsAt: e.Sale.EndsAt, SoldOut: e.Sale.SoldOut, Available: e.Sale.Available()}
		if v, err := s.Admission.View(e.Sale.SaleID); err == nil {
			sale.Current, sale.Fresh = v.Current(now), v.Fresh(now)
			if v.HasState {
				a := admissionOf(v.State)
				a.Autotune = s.autotuneOf(e.Sale.SaleID)
				sale.Admission = &a
				// While lost, the state is the reading before the loss,
				// and its restore time the last one before this. A line
				// lost with no reading before (Epoch unset) is a new
				// sale's, being created: nothing was lost.
				sale.Rebuilding = v.State.Lost && v.State.Epoch != ""
				if at := v.State.RestoredAt; !at.IsZero() {
					at = at.UTC()
					sale.RestoredAt = &at
				}
			}
		}
		out.Sales = append(out.Sales, sale)
	}
	slices.SortFunc(out.Sales, func(a, b saleOverviewJSON) int { return b.StartsAt.Compare(a.StartsAt) })
	if s.Roster != nil {
		// Briefly: with Redis unreachable the overview still answers,
		// without the roster.
		c, cancel := context.WithTimeout(context.Background(), rosterBudget)
		nodes, err := s.Roster.Nodes(c)
		cancel()
		if err == nil {
			out.Nodes = make([]rosterNodeJSON, 0, len(nodes))
			for _, n := range nodes {
				out.Nodes = append(out.Nodes, rosterNodeJSON{ID: n.ID, This: n.ID == s.Roster.ID(), Ready: n.State.Ready,
					OriginOK: n.State.OriginOK, RedisOK: n.State.RedisOK, AgeS: n.Age.Seconds()})
			}
		}
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

func seconds(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return d.Seconds()
}

// readMetrics reads overviewCounters and the reserves' histograms from one
// gather of the registry, and measures the origin's latency since the
// reading latencyWindow ago.
func (s *Server) readMetrics(now time.Time) (map[string]float64, reservesJSON) {
	counters := map[string]float64{}
	res := reservesJSON{Answers: map[string]uint64{}, Origin: map[string]uint64{}}
	families, err := s.Registry.Gather()
	latency := histReading{at: now} // zeros until the origin answers
	for _, f := range families {
		switch f.GetName() {
		case requestsMetric:
			for _, m := range f.GetMetric() {
				if labelValue(m, "route") == "reserve" {
					res.Answers[labelValue(m, "status")] += m.GetHistogram().GetSampleCount()
				}
			}
		case upstreamMetric:
			for _, m := range f.GetMetric() {
				if labelValue(m, "upstream") != "origin" {
					continue
				}
				outcome := labelValue(m, "outcome")
				res.Origin[outcome] += m.GetHistogram().GetSampleCount()
				if outcome == "ok" {
					latency = readingOf(now, m.GetHistogram())
				}
			}
		}
		by, ok := overviewCounters[f.GetName()]
		if !ok {
			continue
		}
		name := strings.TrimPrefix(f.GetName(), "flashgate_edge_")
		for _, m := range f.GetMetric() {
			key := name
			if by != "" {
				key = strings.TrimSuffix(name, "_total") + "." + labelValue(m, by)
			}
			counters[key] += metricValue(m)
		}
	}
	// A failed gather may lack the histogram: its zeros would read as the
	// counts going back.
	if err == nil {
		if from, ok := s.latency.since(latency); ok {
			res.Latency = latencyOf(from, latency)
		}
	}
	return counters, res
}

// latencyWindow is how far back the overview's origin latency looks: long
// enough for a p99 of a busy second's answers, short enough that a slow
// origin shows within seconds rather than averaged into the whole sale.
const latencyWindow = 10 * time.Second

// latencyReadings are the origin latency histogram as overviews read it, a
// second apart or more: the newest reading latencyWindow old and every
// later one, so the list stays short however many dashboards poll.
type latencyReadings struct {
	mu   sync.Mutex // guards list
	list []histReading
}

// histReading is a histogram's cumulative counts at a time.
type histReading struct {
	at      time.Time
	count   uint64
	bounds  []float64 // the buckets' upper bounds, ascending, +Inf left out
	buckets []uint64  // cumulative count at each bound
}

// readingOf reads a histogram at now.
func readingOf(now time.Time, h *dto.Histogram) histReading {
	r := histReading{at: now, count: h.GetSampleCount()}
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		r.bounds = append(r.bounds, b.GetUpperBound())
		r.buckets = append(r.buckets, b.GetCumulativeCount())
	}
	return r
}

// since keeps cur (when the newest kept reading is a second old) and
// returns the reading to measure cur from: the newest kept that is at
// least latencyWindow old, else the oldest kept; false on the node's first
// overview, with none kept.
func (l *latencyReadings) since(cur histReading) (histReading, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) == 0 {
		l.list = append(l.list, cur)
		return histReading{}, false
	}
	base := 0
	for i, r := range l.list {
		if cur.at.Sub(r.at) >= latencyWindow {
			base = i
		}
	}
	l.list = l.list[base:]
	if cur.at.Sub(l.list[len(l.list)-1].at) >= time.Second {
		l.list = append(l.list, cur)
	}
	return l.list[0], true
}

// latencyOf is the latency of the answers between two readings of the
// same histogram.
func latencyOf(from, to histReading) *latencyJSON {
	out := &latencyJSON{WindowS: max(to.at.Sub(from.at).Seconds(), 0), Count: sub(to.count, from.count)}
	if out.Count == 0 {
		return out
	}
	window := make([]uint64, len(to.buckets))
	for i, c := range to.buckets {
		var was uint64
		if i < len(from.buckets) { // none before the origin first answered
			was = from.buckets[i]
		}
		window[i] = sub(c, was)
	}
	p50, p99 := quantile(0.5, to.bounds, window, out.Count), quantile(0.99, to.bounds, window, out.Count)
	out.P50S, out.P99S = &p50, &p99
	return out
}

// sub is a-b, never below 0.
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// quantile is the q-quantile (0 < q <= 1) of count observations in
// cumulative buckets: linear within the bucket it falls in, from 0 for the
// first one; the highest bound when it falls beyond it, as Prometheus's
// histogram_quantile answers.
func quantile(q float64, bounds []float64, cumulative []uint64, count uint64) float64 {
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for i, upper := range bounds {
		if c := cumulative[i]; float64(c) >= rank && c > below {
			return lower + (upper-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = upper, cumulative[i]
	}
	return lower
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// getChanges: GET /admin/sales/{sale}/changes: the sale's admission changes
// as the origin keeps them, newest first.
func (s *Server) getChanges(ctx *fasthttp.RequestCtx, params []string) error {
	return s.fromOrigin(ctx, params[0], s.Ops.Changes)
}

// getBooks: GET /admin/sales/{sale}/books: the sale's books as the
// origin's ledger holds them.
func (s *Server) getBooks(ctx *fasthttp.RequestCtx, params []string) error {
	return s.fromOrigin(ctx, params[0], s.Ops.Books)
}

// fromOrigin answers what read answers for a sale the node knows: the
// origin's JSON as it is, its 404 as unknown_sale, and please_wait when
// the origin cannot be reached.
func (s *Server) fromOrigin(ctx *fasthttp.RequestCtx, sale string, read func(context.Context, string) (json.RawMessage, error)) error {
	if _, err := s.Admission.View(sale); errors.Is(err, admission.ErrUnknownSale) {
		return err
	}
	if s.Ops == nil {
		return httpapi.PleaseWait
	}
	c, cancel := s.budget()
	defer cancel()
	body, err := read(c, sale)
	var oe *line.OriginError
	switch {
	case errors.As(err, &oe) && oe.Status == fasthttp.StatusNotFound:
		return errUnknownSale
	case err != nil:
		s.Log.Warn("ops read from the origin failed", "sale", sale, "err", err)
		return httpapi.PleaseWait
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(body)
	return nil
}

// maxOperator bounds the operator's name a dashboard sends.
const maxOperator = 64

// actorOf names who makes an admin change, for the origin's record of it:
// which admin token (its fingerprint, never the token), from which
// address, and the operator's own name if the dashboard sent one in
// X-Operator (not authenticated: anyone with the token may type any name).
func (s *Server) actorOf(ctx *fasthttp.RequestCtx) string {
	sum := sha256.Sum256([]byte(s.AdminToken))
	addr, _ := s.clientAddr(ctx)
	actor := "admin token " + hex.EncodeToString(sum[:4]) + " from " + addr.String()
	if name := strings.TrimSpace(string(ctx.Request.Header.Peek("X-Operator"))); validOperator(name) {
		actor += " (" + name + ")"
	}
	return actor
}

func validOperator(name string) bool {
	if name == "" || len(name) > maxOperator || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
