package app_test

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// TestAdminAuthenticatesBeforeRouting: without the admin token every path
// and method of the admin listener answers the same 401, so an outsider
// cannot map the routes; the probes stay open; an address that keeps
// failing is answered 429 until its minute is over, yet the token still
// gets through from it.
func TestAdminAuthenticatesBeforeRouting(t *testing.T) {
	t.Parallel()
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), edgetest.NewStubOrigin(t).URL))
	const wrong = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, r := range []edgetest.Request{
		{Method: "GET", Path: "/admin/sales/s1/admission"},
		{Method: "GET", Path: "/admin/no-such-route"},
		{Method: "DELETE", Path: "/admin/sales/s1/admission"},
		{Method: "GET", Path: "/metrics", Token: wrong},
	} {
		if r.Token == "" {
			r.Token = wrong // DoAdmin would send the right one
		}
		res := n.DoAdmin(t, r)
		if res.Status != fasthttp.StatusUnauthorized || res.ErrorCode() != "unauthorized" {
			t.Errorf("%s %s with a wrong token = %d %s, want 401 unauthorized", r.Method, r.Path, res.Status, res.Body)
		}
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/healthz", Token: wrong}); res.Status != fasthttp.StatusOK {
		t.Errorf("GET /healthz = %d, want 200 without the token", res.Status)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/no-such-route"}); res.Status != fasthttp.StatusNotFound {
		t.Errorf("GET /admin/no-such-route with the token = %d, want 404", res.Status)
	}
	for i := 0; i < 10; i++ {
		n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics", Token: wrong})
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics", Token: wrong}); res.Status != fasthttp.StatusTooManyRequests || res.Get("Retry-After") == "" {
		t.Errorf("GET /metrics with a wrong token after many failures = %d (Retry-After %q), want 429 with Retry-After", res.Status, res.Get("Retry-After"))
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"}); res.Status != fasthttp.StatusOK {
		t.Errorf("GET /metrics with the token after many failures = %d, want 200: the token is never throttled", res.Status)
	}
}
