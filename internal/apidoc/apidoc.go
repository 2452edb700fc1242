// Package apidoc reads the route tables of docs/API.md, the public contract,
// and holds them against the routes a listener serves, for the tests of
// both tiers' HTTP packages: a route served but not documented, or
// documented but not served, fails the test.
package apidoc

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Route is a route as a listener serves it.
type Route struct {
	Method  string
	Pattern []string // "*" matches one segment, "**" the rest
	Name    string
}

// DocRoute is one route that a row of a docs/API.md route table lists.
type DocRoute struct {
	spelled    string // as the doc writes it: "GET /v1/sales/{sale_id}"
	key        string // as routeKey writes the route that serves it: "GET /v1/sales/*"
	line       int    // of docs/API.md
	devOnly    bool   // the row says "dev mode only"
	alsoPublic bool   // the row, in an admin table, says "also on the public listener"
}

// Spelled is the route as docs/API.md writes it: "GET /v1/sales/{sale_id}".
func (d DocRoute) Spelled() string { return d.spelled }

// Table is the route table under one heading of docs/API.md.
type Table struct {
	Heading  string
	Routes   []DocRoute
	Fallback int // line of its "anything else" row (where requests no route takes go); 0: none
}

// PublicToo are the table's routes whose rows say they are also on the
// public listener.
func (d Table) PublicToo() []DocRoute {
	var out []DocRoute
	for _, r := range d.Routes {
		if r.alsoPublic {
			out = append(out, r)
		}
	}
	return out
}

// Listener is what docs/API.md says one listener serves.
type Listener struct {
	Name   string // "edge public listener"
	Where  string // the tables that say it, for messages
	Routes []DocRoute
}

// Read returns the contract at path (docs/API.md, from the calling test's
// folder).
func Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the contract: %v", err)
	}
	return string(b)
}

// ReadTable returns the first table after the heading of doc that is
// heading or begins with heading and a space. Its header's first cell must
// be "method and path", and each row's first cell names the row's routes
// (parseRouteCell); a row that names none fails the test unless its first
// cell is "anything else", the fallback.
func ReadTable(t testing.TB, doc, heading string) Table {
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
	table := Table{Heading: heading}
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cell := firstCell(lines[i])
		if cell == "anything else" {
			if table.Fallback != 0 {
				t.Errorf(`docs/API.md:%d: a second "anything else" row under %q (first at line %d)`, i+1, heading, table.Fallback)
			}
			table.Fallback = i + 1
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
			table.Routes = append(table.Routes, r)
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
func parseRouteCell(cell string) ([]DocRoute, error) {
	cell = strings.ReplaceAll(cell, "`/`", "/")
	devOnly := strings.Contains(cell, "dev mode only")
	alsoPublic := strings.Contains(cell, "also on the public listener")
	var out []DocRoute
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
			out = append(out, DocRoute{spelled: method + " " + path, key: method + " " + key, devOnly: devOnly, alsoPublic: alsoPublic})
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
func routeKey(r Route) string { return r.Method + " /" + strings.Join(r.Pattern, "/") }

// spellRoute is a route as the doc would write it: "*" as "{param}", "**"
// as "...".
func spellRoute(r Route) string {
	segs := make([]string, len(r.Pattern))
	for i, p := range r.Pattern {
		switch p {
		case "*":
			segs[i] = "{param}"
		case "**":
			segs[i] = "..."
		default:
			segs[i] = p
		}
	}
	return r.Method + " /" + strings.Join(segs, "/")
}

// CheckServed fails the test once for every route of served that l's tables
// do not list, and once for every route they list that served lacks. dev
// says whether the server runs in dev mode, in which alone the routes of
// rows marked "dev mode only" are served.
func CheckServed(t testing.TB, l Listener, served []Route, dev bool) {
	t.Helper()
	mode := "without dev mode"
	if dev {
		mode = "in dev mode"
	}
	documented := make(map[string]DocRoute, len(l.Routes))
	for _, d := range l.Routes {
		if first, dup := documented[d.key]; dup {
			t.Errorf("docs/API.md:%d lists %s for the %s a second time (first at line %d)", d.line, d.spelled, l.Name, first.line)
			continue
		}
		documented[d.key] = d
	}
	seen := make(map[string]bool, len(served))
	for _, r := range served {
		k := routeKey(r)
		if seen[k] {
			t.Errorf("the %s has %s (route %q) twice; the second is never reached", l.Name, spellRoute(r), r.Name)
			continue
		}
		seen[k] = true
		d, ok := documented[k]
		switch {
		case !ok:
			t.Errorf("the %s serves %s (route %q) %s, but it is not in %s", l.Name, spellRoute(r), r.Name, mode, l.Where)
		case d.devOnly && !dev:
			t.Errorf("the %s serves %s (route %q) without dev mode, but docs/API.md:%d says it is there in dev mode only", l.Name, spellRoute(r), r.Name, d.line)
		}
	}
	for _, d := range l.Routes {
		if documented[d.key].line == d.line && !seen[d.key] && (dev || !d.devOnly) {
			hint := ""
			if !dev {
				hint = ` (a row whose routes are there in dev mode alone says "dev mode only")`
			}
			t.Errorf("docs/API.md:%d lists %s for the %s, which does not serve it %s%s", d.line, d.spelled, l.Name, mode, hint)
		}
	}
}
