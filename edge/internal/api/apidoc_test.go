package api

// This file reads the route tables of docs/API.md and holds them against a
// listener's routes. edge/internal/api and origin/internal/api each carry the
// same copy of it; keep the two alike.

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// apiDocPath is the public contract, from this package's folder.
const apiDocPath = "../../../docs/API.md"

// docRoute is one route that a row of a docs/API.md route table lists.
type docRoute struct {
	spelled    string // as the doc writes it: "GET /v1/sales/{sale_id}"
	key        string // as routeKey writes the route that serves it: "GET /v1/sales/*"
	line       int    // of docs/API.md
	devOnly    bool   // the row says "dev mode only"
	alsoPublic bool   // the row, in an admin table, says "also on the public listener"
}

// docTable is the route table under one heading of docs/API.md.
type docTable struct {
	heading  string
	routes   []docRoute
	fallback int // line of its "anything else" row (where requests no route takes go); 0: none
}

// publicToo are the table's routes whose rows say they are also on the
// public listener.
func (d docTable) publicToo() []docRoute {
	var out []docRoute
	for _, r := range d.routes {
		if r.alsoPublic {
			out = append(out, r)
		}
	}
	return out
}

// docListener is what docs/API.md says one listener serves.
type docListener struct {
	name   string // "edge public listener"
	where  string // the tables that say it, for messages
	routes []docRoute
}

func readAPIDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("read the contract: %v", err)
	}
	return string(b)
}

// readDocTable returns the first table after the heading of doc that is
// heading or begins with heading and a space. Its header's first cell must
// be "method and path", and each row's first cell names the row's routes
// (parseRouteCell); a row that names none fails the test unless its first
// cell is "anything else", the fallback.
func readDocTable(t *testing.T, doc, heading string) docTable {
	t.Helper()
	lines := strings.Split(doc, "\n")
	i := 0
	for ; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \r"); l == heading || strings.HasPrefix(l, heading+" ") {
			break
		}
	}
	if i == len(lines) {
		t.Fatalf("docs/API.md has no heading %q", heading)
	}
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "|"); i++ {
		if strings.HasPrefix(lines[i], "#") {
			t.Fatalf("docs/API.md:%d: heading %q has no table before the next heading", i+1, heading)
		}
	}
	if i+1 >= len(lines) || firstCell(lines[i]) != "method and path" || !strings.HasPrefix(lines[i+1], "|-") {
		t.Fatalf(`docs/API.md:%d: the table under %q does not start with a "method and path" header row`, i+1, heading)
	}
	table := docTable{heading: heading}
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cell := firstCell(lines[i])
		if cell == "anything else" {
			if table.fallback != 0 {
				t.Errorf(`docs/API.md:%d: a second "anything else" row under %q (first at line %d)`, i+1, heading, table.fallback)
			}
			table.fallback = i + 1
			continue
		}
		routes, err := parseRouteCell(cell)
		if err != nil {
			t.Errorf("docs/API.md:%d: %v", i+1, err)
			continue
		}
		if len(routes) == 0 {
			t.Errorf("docs/API.md:%d: the row %q under %q names no route (want `METHOD /path` in code spans, or \"anything else\")", i+1, cell, heading)
		}
		for _, r := range routes {
			r.line = i + 1
			table.routes = append(table.routes, r)
		}
	}
	return table
}

// firstCell is the first cell of the table row line, trimmed; a "|" inside
// a code span does not end it.
func firstCell(line string) string {
	line = strings.TrimPrefix(line, "|")
	inCode := false
	for i, c := range line {
		switch {
		case c == '`':
			inCode = !inCode
		case c == '|' && !inCode:
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

var (
	codeSpanRE   = regexp.MustCompile("`([^`]*)`")
	methodListRE = regexp.MustCompile(`^[A-Z]+(/[A-Z]+)*$`)
	httpMethods  = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}
)

// parseRouteCell returns the routes a row's first cell names: each code span
// that starts with a method, or methods joined by "/", and a space and a path,
// such as "`GET /v1/orders/{id}`" or "`GET/HEAD /`" ("`GET`/`HEAD /`" is
// read as the latter). Code spans that do not start with a method (a body
// such as "`{sku, idempotency_key}`") and prose between them are passed
// over, but for the phrases "dev mode only" and "also on the public listener",
// which mark every route of the cell.
func parseRouteCell(cell string) ([]docRoute, error) {
	cell = strings.ReplaceAll(cell, "`/`", "/")
	devOnly := strings.Contains(cell, "dev mode only")
	alsoPublic := strings.Contains(cell, "also on the public listener")
	var out []docRoute
	for _, m := range codeSpanRE.FindAllStringSubmatch(cell, -1) {
		methods, path, hasPath := strings.Cut(m[1], " ")
		if !methodListRE.MatchString(methods) {
			continue
		}
		if !hasPath {
			return nil, fmt.Errorf("`%s` names a method but no path", m[1])
		}
		key, err := docPathKey(path)
		if err != nil {
			return nil, fmt.Errorf("`%s`: %v", m[1], err)
		}
		for _, method := range strings.Split(methods, "/") {
			if !httpMethods[method] {
				return nil, fmt.Errorf("`%s`: %q is no HTTP method", m[1], method)
			}
			out = append(out, docRoute{spelled: method + " " + path, key: method + " " + key, devOnly: devOnly, alsoPublic: alsoPublic})
		}
	}
	return out, nil
}

// docPathKey writes a documented path as routeKey writes a pattern: a
// "{name}" segment is "*", a last "..." segment is "**".
func docPathKey(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("path %q does not start with /", path)
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		switch {
		case s == "..." && i == len(segs)-1:
			segs[i] = "**"
		case len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.ContainsAny(s[1:len(s)-1], "{}/"):
			segs[i] = "*"
		case strings.ContainsAny(s, "{}*") || strings.Contains(s, "..."):
			return "", fmt.Errorf("path %q: segment %q is neither a literal, a {parameter} nor a last ...", path, s)
		}
	}
	return "/" + strings.Join(segs, "/"), nil
}

// routeKey is a route as "METHOD /pattern", its segments joined by "/".
func routeKey(r route) string { return r.method + " /" + strings.Join(r.pattern, "/") }

// spellRoute is a route as the doc would write it: "*" as "{param}", "**"
// as "...".
func spellRoute(r route) string {
	segs := make([]string, len(r.pattern))
	for i, p := range r.pattern {
		switch p {
		case "*":
			segs[i] = "{param}"
		case "**":
			segs[i] = "..."
		default:
			segs[i] = p
		}
	}
	return r.method + " /" + strings.Join(segs, "/")
}

// checkServed fails the test once for every route of served that l's tables
// do not list, and once for every route they list that served lacks. dev
// says whether the server runs in dev mode, in which alone the routes of
// rows marked "dev mode only" are served.
func checkServed(t *testing.T, l docListener, served []route, dev bool) {
	t.Helper()
	mode := "without dev mode"
	if dev {
		mode = "in dev mode"
	}
	documented := make(map[string]docRoute, len(l.routes))
	for _, d := range l.routes {
		if first, dup := documented[d.key]; dup {
			t.Errorf("docs/API.md:%d lists %s for the %s a second time (first at line %d)", d.line, d.spelled, l.name, first.line)
			continue
		}
		documented[d.key] = d
	}
	seen := make(map[string]bool, len(served))
	for _, r := range served {
		k := routeKey(r)
		if seen[k] {
			t.Errorf("the %s has %s (route %q) twice; the second is never reached", l.name, spellRoute(r), r.name)
			continue
		}
		seen[k] = true
		d, ok := documented[k]
		switch {
		case !ok:
			t.Errorf("the %s serves %s (route %q) %s, but it is not in %s", l.name, spellRoute(r), r.name, mode, l.where)
		case d.devOnly && !dev:
			t.Errorf("the %s serves %s (route %q) without dev mode, but docs/API.md:%d says it is there in dev mode only", l.name, spellRoute(r), r.name, d.line)
		}
	}
	for _, d := range l.routes {
		if documented[d.key].line == d.line && !seen[d.key] && (dev || !d.devOnly) {
			hint := ""
			if !dev {
				hint = ` (a row whose routes are there in dev mode alone says "dev mode only")`
			}
			t.Errorf("docs/API.md:%d lists %s for the %s, which does not serve it %s%s", d.line, d.spelled, l.name, mode, hint)
		}
	}
}

// A row's first cell names its routes however the doc words it.
func TestParseRouteCell(t *testing.T) {
	tests := []struct {
		cell       string
		want       []string // spelled, key
		devOnly    bool
		alsoPublic bool
		err        bool
	}{
		{cell: "`POST /v1/orders`, `GET /v1/orders/{id}`, `GET /v1/reservations/{id}`",
			want: []string{"POST /v1/orders", "POST /v1/orders", "GET /v1/orders/{id}", "GET /v1/orders/*", "GET /v1/reservations/{id}", "GET /v1/reservations/*"}},
		{cell: "`GET /` and `GET /static/...`", want: []string{"GET /", "GET /", "GET /static/...", "GET /static/**"}},
		{cell: "`GET`/`HEAD /` and `GET/HEAD /static/...`",
			want: []string{"GET /", "GET /", "HEAD /", "HEAD /", "GET /static/...", "GET /static/**", "HEAD /static/...", "HEAD /static/**"}},
		{cell: "`GET /readyz`, `GET /healthz` (also on the public listener, no auth)",
			want: []string{"GET /readyz", "GET /readyz", "GET /healthz", "GET /healthz"}, alsoPublic: true},
		{cell: "`POST /v1/sales/{sale_id}/reserve` `{sku, idempotency_key}`",
			want: []string{"POST /v1/sales/{sale_id}/reserve", "POST /v1/sales/*/reserve"}},
		{cell: "`GET /v1/lines/{sale_id}`; `PUT /v1/lines/{sale_id}/settings` `{rate_per_s?, paused?}`",
			want: []string{"GET /v1/lines/{sale_id}", "GET /v1/lines/*", "PUT /v1/lines/{sale_id}/settings", "PUT /v1/lines/*/settings"}},
		{cell: "`POST /v1/dev/login` (dev mode only)", want: []string{"POST /v1/dev/login", "POST /v1/dev/login"}, devOnly: true},
		{cell: "a row about `FLASHGATE_DEV`", want: nil},
		{cell: "`FETCH /v1/sales`", err: true},
		{cell: "`GET` and `HEAD /`", err: true},
		{cell: "`GET /v1/sales/{sale_id`", err: true},
		{cell: "`GET /static/.../x`", err: true},
	}
	for _, tt := range tests {
		routes, err := parseRouteCell(tt.cell)
		if tt.err {
			if err == nil {
				t.Errorf("parseRouteCell(%q) = %v, want an error", tt.cell, routes)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseRouteCell(%q): %v", tt.cell, err)
			continue
		}
		var got []string
		for _, r := range routes {
			got = append(got, r.spelled, r.key)
			if r.devOnly != tt.devOnly || r.alsoPublic != tt.alsoPublic {
				t.Errorf("parseRouteCell(%q): %s devOnly=%v alsoPublic=%v, want %v %v", tt.cell, r.spelled, r.devOnly, r.alsoPublic, tt.devOnly, tt.alsoPublic)
			}
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("parseRouteCell(%q) = %q, want %q", tt.cell, got, tt.want)
		}
	}
}
