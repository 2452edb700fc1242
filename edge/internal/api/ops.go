package api

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime"
	"path"
	"slices"
	"strings"
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
}

// rosterBudget bounds the overview's read of the roster.
const rosterBudget = 300 * time.Millisecond

// overviewCounters are the metrics the dashboard shows as they are, summed
// over their labels but the one named (its values become name.value).
var overviewCounters = map[string]string{
	"flashgate_edge_challenges_total":     "outcome",
	"flashgate_edge_tarpit_caught_total":  "",
	"flashgate_edge_tarpit_answers_total": "",
	"flashgate_edge_tarpit_entries":       "",
	"flashgate_edge_rejections_total":     "code",
	"flashgate_edge_joins_total":          "",
}

// getOverview: GET /admin/overview.
func (s *Server) getOverview(ctx *fasthttp.RequestCtx, _ []string) error {
	now := s.Clock()
	r := s.Admission.Readiness()
	out := overviewJSON{
		Node: nodeJSON{Time: now.UTC(), Ready: r.Ready, OriginOK: r.ListCurrent, RedisOK: r.TickCurrent,
			ListAgeS: seconds(r.ListAge), TickAgeS: seconds(r.TickAge), StaleSale: r.StaleSales},
		Sales:    []saleOverviewJSON{},
		Counters: s.counters(),
	}
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

// counters reads overviewCounters from the registry.
func (s *Server) counters() map[string]float64 {
	out := map[string]float64{}
	families, err := s.Registry.Gather()
	if err != nil && len(families) == 0 {
		return out
	}
	for _, f := range families {
		by, ok := overviewCounters[f.GetName()]
		if !ok {
			continue
		}
		name := strings.TrimPrefix(f.GetName(), "flashgate_edge_")
		for _, m := range f.GetMetric() {
			key := name
			if by != "" {
				key = name + "." + labelValue(m, by)
			}
			out[key] += metricValue(m)
		}
	}
	return out
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
