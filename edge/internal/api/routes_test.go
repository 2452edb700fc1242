package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
	doc := readAPIDoc(t)
	public := readDocTable(t, doc, edgePublicHeading)
	admin := readDocTable(t, doc, edgeAdminHeading)
	if public.fallback == 0 {
		t.Errorf(`docs/API.md's %q table has no "anything else" row, but the public listener sends every request no route takes to the shop`, edgePublicHeading)
	}
	if admin.fallback != 0 {
		t.Errorf(`docs/API.md:%d: the %q table has an "anything else" row, but the admin listener answers 404 not_found to a request no route takes`, admin.fallback, edgeAdminHeading)
	}
	listeners := []struct {
		doc    docListener
		routes func(*Server) []route
	}{
		{docListener{
			name:   "edge public listener",
			where:  `docs/API.md's "` + edgePublicHeading + `" table or its "` + edgeAdminHeading + `" rows marked "also on the public listener"`,
			routes: append(public.routes, admin.publicToo()...),
		}, (*Server).publicRoutes},
		{docListener{
			name:   "edge admin listener",
			where:  `docs/API.md's "` + edgeAdminHeading + `" table`,
			routes: admin.routes,
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
			t.Run(l.doc.name+", "+name, func(t *testing.T) {
				checkServed(t, l.doc, l.routes(s), dev)
			})
		}
	}
}
