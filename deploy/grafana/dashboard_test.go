package grafana

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// dashboardFile is the dashboard operators import, in this package's folder.
const dashboardFile = "flashgate.json"

// datasourceRef names a data source, as panels, queries and variables do.
type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// onVariable is the data source every panel and query uses: the dashboard's ${datasource} variable, so that
// whoever imports it picks their Prometheus.
var onVariable = datasourceRef{Type: "prometheus", UID: "${datasource}"}

// dashboard is the part of Grafana's dashboard model these tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// panel is a panel or a row; a collapsed row holds its panels itself, an open one is followed by them.
type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []target       `json:"targets"`
	Panels     []panel        `json:"panels"`
}

type target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource *datasourceRef `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Datasource *datasourceRef  `json:"datasource"`
	Query      json.RawMessage `json:"query"`
}

// queryText is a query variable's query: Grafana saves it as a string, or (its Prometheus editor) as an object
// with the string in "query".
func (v variable) queryText() (string, error) {
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query %s is neither a string nor an object with one", v.Name, v.Query)
	}
	return o.Query, nil
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line := 1 + strings.Count(string(b[:syn.Offset]), "\n")
			t.Fatalf("%s:%d: %v", dashboardFile, line, err)
		}
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels is every panel and row of d, the panels of collapsed rows included, in order.
func allPanels(d dashboard) []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// query is one PromQL expression of the dashboard and where it is.
type query struct {
	where string
	expr  string
}

// queries are the expressions of every panel's targets and of the query variables.
func queries(t *testing.T, d dashboard) []query {
	t.Helper()
	var out []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, query{where: "variable " + v.Name, expr: q})
	}
	for _, p := range allPanels(d) {
		for _, tg := range p.Targets {
			out = append(out, query{where: fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	return out
}

// TestDashboard: the file is a dashboard Grafana imports — a title, a uid, rows of panels — with the data source
// and sale variables, every panel and query on the data source variable, and every query an expression.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.Title == "" {
		t.Error("the dashboard has no title")
	}
	if d.UID == "" || len(d.UID) > 40 {
		t.Errorf("uid %q, want 1 to 40 characters (Grafana's limit)", d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want at least 36 (data sources named by uid)", d.SchemaVersion)
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("variable datasource: type %q, query %s; want a datasource variable of Prometheus data sources", v.Type, v.Query)
	}
	sale := vars["sale"]
	if sale.Type != "query" || sale.Datasource == nil || *sale.Datasource != onVariable {
		t.Errorf("variable sale: type %q on %+v, want a query variable on %+v", sale.Type, sale.Datasource, onVariable)
	} else if q, err := sale.queryText(); err != nil || q != "label_values(flashgate_edge_queue_length, sale)" {
		t.Errorf("variable sale: query %q (%v), want label_values(flashgate_edge_queue_length, sale)", q, err)
	}

	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	ids := map[int]string{}
	rows, charts := 0, 0
	for _, p := range allPanels(d) {
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" {
			t.Errorf("panel %d (%s) has no title", p.ID, p.Type)
		}
		if p.Type == "row" {
			rows++
			if len(p.Targets) > 0 {
				t.Errorf("row %q has queries; rows hold panels, not queries", p.Title)
			}
			for _, c := range p.Panels {
				if c.Type == "row" {
					t.Errorf("row %q holds row %q; rows do not nest", p.Title, c.Title)
				}
			}
			continue
		}
		charts++
		if len(p.Panels) > 0 {
			t.Errorf("panel %q (%s) holds panels; only rows do", p.Title, p.Type)
		}
		if p.Datasource == nil || *p.Datasource != onVariable {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, onVariable)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: query refId %q is empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q query %s has no expr", p.Title, tg.RefID)
			}
			if tg.Datasource != nil && *tg.Datasource != onVariable {
				t.Errorf("panel %q query %s: datasource %+v, want %+v", p.Title, tg.RefID, *tg.Datasource, onVariable)
			}
		}
	}
	if rows == 0 || charts == 0 {
		t.Errorf("%d rows and %d panels, want panels in rows", rows, charts)
	}
}

var (
	// promString is a quoted string in PromQL (label values, regular expressions): left out before looking for
	// names, so that a value never reads as a metric.
	promString = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// promName is a metric or label name, keyword or function in PromQL.
	promName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// selector is a flashgate_ metric with label matchers.
	selector = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])(flashgate_[a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	// matcher is a label matcher's label name.
	matcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// grouping is an aggregation's by or without clause.
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// labelValues is a Grafana variable query's label_values(metric, label).
	labelValues = regexp.MustCompile(`label_values\s*\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// refs is what one query reads: the flashgate_ metric names it names, the labels its selectors match on each,
// and the labels it groups by (by and without clauses, label_values' label).
type refs struct {
	metrics []string
	matched map[string][]string
	grouped []string
}

// readRefs finds the references in a PromQL expression (or a label_values query) with a tokenizer, not a
// parser: what it needs is names, which PromQL writes plainly once strings are left out.
func readRefs(expr string) refs {
	e := promString.ReplaceAllString(expr, `""`)
	r := refs{matched: map[string][]string{}}
	seen := map[string]bool{}
	for _, tok := range promName.FindAllString(e, -1) {
		if strings.HasPrefix(tok, "flashgate_") && !seen[tok] {
			seen[tok] = true
			r.metrics = append(r.metrics, tok)
		}
	}
	for _, m := range selector.FindAllStringSubmatch(e, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(r.matched[m[1]], l[1]) {
				r.matched[m[1]] = append(r.matched[m[1]], l[1])
			}
		}
	}
	add := func(label string) {
		if label = strings.TrimSpace(label); label != "" && !slices.Contains(r.grouped, label) {
			r.grouped = append(r.grouped, label)
		}
	}
	for _, m := range grouping.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(m[1], ",") {
			add(l)
		}
	}
	if m := labelValues.FindStringSubmatch(e); m != nil {
		add(m[2])
	}
	slices.Sort(r.metrics)
	slices.Sort(r.grouped)
	return r
}

// TestReadRefs: the tokenizer finds every flashgate_ name and label, and nothing inside strings.
func TestReadRefs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr    string
		metrics []string
		matched map[string][]string
		grouped []string
	}{
		{expr: `sum by (outcome) (rate(flashgate_reserves_total[$__rate_interval]))`,
			metrics: []string{"flashgate_reserves_total"}, grouped: []string{"outcome"}},
		{expr: `histogram_quantile(0.99, sum by (le, route) (rate(flashgate_origin_request_seconds_bucket{route!~"healthz|readyz", status=~"5.."}[5m])))`,
			metrics: []string{"flashgate_origin_request_seconds_bucket"},
			matched: map[string][]string{"flashgate_origin_request_seconds_bucket": {"route", "status"}},
			grouped: []string{"le", "route"}},
		{expr: `flashgate_edge_rejections_total{code="flashgate_not_a_metric", reason='flashgate_nor_this'}`,
			metrics: []string{"flashgate_edge_rejections_total"},
			matched: map[string][]string{"flashgate_edge_rejections_total": {"code", "reason"}}},
		{expr: `clamp_min(max by (sale) (flashgate_edge_queue_length{sale=~"$sale"}) - max by(sale)(flashgate_edge_now_serving {sale=~"$sale"}), 0)`,
			metrics: []string{"flashgate_edge_now_serving", "flashgate_edge_queue_length"},
			matched: map[string][]string{"flashgate_edge_queue_length": {"sale"}, "flashgate_edge_now_serving": {"sale"}},
			grouped: []string{"sale"}},
		{expr: `label_values(flashgate_edge_queue_length, sale)`,
			metrics: []string{"flashgate_edge_queue_length"}, grouped: []string{"sale"}},
		{expr: `sum without (instance) (up + notflashgate_x) or vector(0)`, grouped: []string{"instance"}},
	} {
		got := readRefs(c.expr)
		matched := c.matched
		if matched == nil {
			matched = map[string][]string{}
		}
		if !slices.Equal(got.metrics, c.metrics) || !slices.Equal(got.grouped, c.grouped) ||
			!maps.EqualFunc(got.matched, matched, func(a, b []string) bool { return slices.Equal(a, b) }) {
			t.Errorf("readRefs(%s) = %v %v %v, want %v %v %v", c.expr, got.metrics, got.matched, got.grouped, c.metrics, matched, c.grouped)
		}
	}
}

// targetLabels are the labels Prometheus gives every series it scrapes; the binaries do not export them.
var targetLabels = map[string]bool{"instance": true, "job": true}

// exports are the flashgate_ families the binaries exported, by name, with the binaries that did.
type exports map[string]struct {
	family
	binaries []string
}

func mergeScrapes(scrapes []scrape) exports {
	out := exports{}
	for _, s := range scrapes {
		for name, f := range s.families {
			e := out[name]
			if e.labels == nil {
				e.family = family{kind: f.kind, labels: map[string]bool{}}
			}
			maps.Copy(e.labels, f.labels)
			e.binaries = append(e.binaries, s.binary)
			out[name] = e
		}
	}
	return out
}

// resolve finds the family a series name belongs to: the family itself (not a histogram's, whose series all
// carry a suffix), or a histogram's _bucket, _sum or _count, or a summary's _sum or _count. bucket reports a
// _bucket series, which has the label le besides the family's.
func (x exports) resolve(name string) (f family, bucket bool, err error) {
	if e, ok := x[name]; ok {
		if e.kind == dto.MetricType_HISTOGRAM {
			return family{}, false, fmt.Errorf("%s is a histogram: its series are %[1]s_bucket, _sum and _count", name)
		}
		return e.family, false, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		e, ok := x[base]
		switch {
		case !ok:
		case e.kind == dto.MetricType_HISTOGRAM, e.kind == dto.MetricType_SUMMARY && suffix != "_bucket":
			return e.family, suffix == "_bucket", nil
		default:
			return family{}, false, fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, strings.ToLower(e.kind.String()), suffix)
		}
	}
	return family{}, false, fmt.Errorf("no binary exported %s", name)
}

// TestResolve: series names resolve to families by the exposition format's rules.
func TestResolve(t *testing.T) {
	t.Parallel()
	x := mergeScrapes([]scrape{{binary: "test", families: map[string]family{
		"flashgate_h": {kind: dto.MetricType_HISTOGRAM, labels: map[string]bool{"route": true}},
		"flashgate_c": {kind: dto.MetricType_COUNTER, labels: map[string]bool{}},
		"flashgate_s": {kind: dto.MetricType_SUMMARY, labels: map[string]bool{}},
	}}})
	for _, c := range []struct {
		name       string
		ok, bucket bool
	}{
		{"flashgate_h_bucket", true, true},
		{"flashgate_h_count", true, false},
		{"flashgate_h_sum", true, false},
		{"flashgate_h", false, false},
		{"flashgate_c", true, false},
		{"flashgate_c_count", false, false},
		{"flashgate_s", true, false},
		{"flashgate_s_count", true, false},
		{"flashgate_s_bucket", false, false},
		{"flashgate_missing", false, false},
	} {
		_, bucket, err := x.resolve(c.name)
		if (err == nil) != c.ok || bucket != c.bucket {
			t.Errorf("resolve(%s) = bucket %v, %v; want ok %v, bucket %v", c.name, bucket, err, c.ok, c.bucket)
		}
	}
}

// TestDashboardMetricsExported: every metric a query or variable of the dashboard names is one a running origin
// or edge exports at GET /metrics (with every labelled family given a series first: see runningStack), each
// label a selector matches is one of its metric's, and each label a query groups by is one of its metrics'.
func TestDashboardMetricsExported(t *testing.T) {
	t.Parallel()
	qs := queries(t, readDashboard(t))
	scrapes := runningStack(t)
	for _, s := range scrapes {
		// An empty or foreign scrape would make every name look missing, or hide why.
		if len(s.families) < 10 {
			t.Fatalf("the %s's /metrics has %d flashgate_ families, want the binary's dozens", s.binary, len(s.families))
		}
		t.Logf("the %s exports %d flashgate_ families", s.binary, len(s.families))
	}
	x := mergeScrapes(scrapes)

	missing := map[string][]string{} // metric → the queries that read it
	names := 0
	for _, q := range qs {
		r := readRefs(q.expr)
		names += len(r.metrics)
		readLabels := map[string]bool{}
		for _, name := range r.metrics {
			f, bucket, err := x.resolve(name)
			if err != nil {
				missing[err.Error()] = append(missing[err.Error()], q.where)
				continue
			}
			maps.Copy(readLabels, f.labels)
			if bucket {
				readLabels["le"] = true
			}
			for _, l := range r.matched[name] {
				if !f.labels[l] && !targetLabels[l] && (l != "le" || !bucket) {
					t.Errorf("%s: %s{%s=...}: %s has no label %s (its labels: %v)", q.where, name, l, name, l, slices.Sorted(maps.Keys(f.labels)))
				}
			}
		}
		for _, l := range r.grouped {
			if len(readLabels) > 0 && !readLabels[l] && !targetLabels[l] {
				t.Errorf("%s groups by %s, a label none of %v has", q.where, l, r.metrics)
			}
		}
	}
	if names == 0 {
		t.Fatalf("found no flashgate_ metric in the dashboard's %d queries", len(qs))
	}
	if len(missing) > 0 {
		var b strings.Builder
		for _, what := range slices.Sorted(maps.Keys(missing)) {
			fmt.Fprintf(&b, "\n  %s: read by %s", what, strings.Join(missing[what], "; "))
		}
		t.Errorf("%s reads %d names that are not series the running origin and edge export:%s", dashboardFile, len(missing), b.String())
	}
}
