package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	doc := readAPIDoc(t)
	public := readDocTable(t, doc, originPublicHeading)
	admin := readDocTable(t, doc, originAdminHeading)
	for _, table := range []docTable{public, admin} {
		if table.fallback != 0 {
			t.Errorf(`docs/API.md:%d: the %q table has an "anything else" row, but the origin answers 404 not_found to a request no route takes`, table.fallback, table.heading)
		}
	}
	listeners := []struct {
		doc    docListener
		routes func(*Server) []route
	}{
		{docListener{
			name:   "origin public listener",
			where:  `docs/API.md's "` + originPublicHeading + `" table or its "` + originAdminHeading + `" rows marked "also on the public listener"`,
			routes: append(public.routes, admin.publicToo()...),
		}, (*Server).publicRoutes},
		{docListener{
			name:   "origin admin listener",
			where:  `docs/API.md's "` + originAdminHeading + `" table`,
			routes: admin.routes,
		}, (*Server).adminRoutes},
	}
	for _, dev := range []bool{false, true} {
		name := "without dev mode"
		if dev {
			name = "dev mode"
		}
		s := New(Deps{Registry: prometheus.NewRegistry()}, Options{Dev: dev})
		for _, l := range listeners {
			t.Run(l.doc.name+", "+name, func(t *testing.T) {
				checkServed(t, l.doc, l.routes(s), dev)
			})
		}
	}
}
