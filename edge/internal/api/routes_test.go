package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/apidoc"

	"github.com/flashgate/flashgate/tokens"
)

const (
	edgePublicHeading = "## Edge (public, fronted by the CDN)"
	edgeAdminHeading  = "### Edge admin"
)

// TestRoutesMatchAPIDoc: each edge listener serves exactly the routes that
// docs/API.md's tables list for it, with dev mode and without: the public
// listener those of "## Edge (public, fronted by the CDN)" and the admin
// rows marked "also on the public listener", the admin listener those of
// "### Edge admin"; the dev login only in dev mode. The public table's
// "anything else" row is the fallback to the shop (Public), not a route.
func TestRoutesMatchAPIDoc(t *testing.T) {
	doc := apidoc.Read(t, apiDocPath)
	public := apidoc.ReadTable(t, doc, edgePublicHeading)
	admin := apidoc.ReadTable(t, doc, edgeAdminHeading)
	if public.Fallback == 0 {
		t.Errorf(`docs/API.md's %q table has no "anything else" row, but the public listener sends every request no route takes to the shop`, edgePublicHeading)
	}
	if admin.Fallback != 0 {
		t.Errorf(`docs/API.md:%d: the %q table has an "anything else" row, but the admin listener answers 404 not_found to a request no route takes`, admin.Fallback, edgeAdminHeading)
	}
	listeners := []struct {
		doc    apidoc.Listener
		routes func(*Server) []route
	}{
		{apidoc.Listener{
			Name:   "edge public listener",
			Where:  `docs/API.md's "` + edgePublicHeading + `" table or its "` + edgeAdminHeading + `" rows marked "also on the public listener"`,
			Routes: append(public.Routes, admin.PublicToo()...),
		}, (*Server).publicRoutes},
		{apidoc.Listener{
			Name:   "edge admin listener",
			Where:  `docs/API.md's "` + edgeAdminHeading + `" table`,
			Routes: admin.Routes,
		}, (*Server).adminRoutes},
	}
	for _, dev := range []bool{false, true} {
		deps := Deps{Registry: prometheus.NewRegistry()}
		name := "without dev mode"
		if dev {
			deps.DevUsers = tokens.NewDevUserIssuer(nil, "", 0, nil)
			name = "dev mode"
		}
		s := New(deps, Options{})
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
