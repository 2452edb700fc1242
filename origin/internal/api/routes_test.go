package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/apidoc"
)

const (
	originPublicHeading = "## Origin (private; reached only through the edge)"
	originAdminHeading  = "### Origin admin"
)

// TestRoutesMatchAPIDoc: each origin listener serves exactly the routes that
// docs/API.md's tables list for it, with dev mode and without: the public
// listener those of "## Origin (private; reached only through the edge)"
// and the admin rows marked "also on the public listener", the admin
// listener those of "### Origin admin"; the dev admission token only in dev
// mode. Neither listener has a fallback: a request no route takes is 404
// (405 for a known path and another method).
func TestRoutesMatchAPIDoc(t *testing.T) {
	doc := apidoc.Read(t, apiDocPath)
	public := apidoc.ReadTable(t, doc, originPublicHeading)
	admin := apidoc.ReadTable(t, doc, originAdminHeading)
	for _, table := range []apidoc.Table{public, admin} {
		if table.Fallback != 0 {
			t.Errorf(`docs/API.md:%d: the %q table has an "anything else" row, but the origin answers 404 not_found to a request no route takes`, table.Fallback, table.Heading)
		}
	}
	listeners := []struct {
		doc    apidoc.Listener
		routes func(*Server) []route
	}{
		{apidoc.Listener{
			Name:   "origin public listener",
			Where:  `docs/API.md's "` + originPublicHeading + `" table or its "` + originAdminHeading + `" rows marked "also on the public listener"`,
			Routes: append(public.Routes, admin.PublicToo()...),
		}, (*Server).publicRoutes},
		{apidoc.Listener{
			Name:   "origin admin listener",
			Where:  `docs/API.md's "` + originAdminHeading + `" table`,
			Routes: admin.Routes,
		}, (*Server).adminRoutes},
	}
	for _, dev := range []bool{false, true} {
		name := "without dev mode"
		if dev {
			name = "dev mode"
		}
		s := New(Deps{Registry: prometheus.NewRegistry()}, Options{Dev: dev})
		for _, l := range listeners {
			t.Run(l.doc.Name+", "+name, func(t *testing.T) {
				apidoc.CheckServed(t, l.doc, docRoutes(l.routes(s)), dev)
			})
		}
	}
}

// apiDocPath is the public contract, from this package's folder.
const apiDocPath = "../../../docs/API.md"

// docRoutes are routes as apidoc takes them.
func docRoutes(rs []route) []apidoc.Route {
	out := make([]apidoc.Route, len(rs))
	for i, r := range rs {
		out[i] = apidoc.Route{Method: r.method, Pattern: r.pattern, Name: r.name}
	}
	return out
}
