package cdntest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// TestAdmissionLogAlwaysCached: a sale's admission log is the same for
// everyone, so the CDN answers it from its cache and stores it whatever a
// request carries — a shopper's tokens, no-cache — and passes none of the
// tokens on, while the edge still hears the client address, host and
// request id the CDN gives every request. An edge (here a stand-in that
// records what reaches it) is asked once per log.
func TestAdmissionLogAlwaysCached(t *testing.T) {
	edge := edgetest.NewUpstream(t, func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "public, max-age=86400")
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"sale_id":"s","entries":[]}`)
	})
	cdn := StartCDN(t, strings.TrimPrefix(edge.URL, "http://"))
	c := NewClient(t, cdn, 4)
	personal := []string{"Authorization", "Bearer admission", "X-User-Token", "user", "X-Queue-Token", "queue",
		"Cache-Control", "no-cache", "Pragma", "no-cache", "X-Forwarded-For", "203.0.113.7", "X-Request-Id", "mine",
		"Host", "shop.example"}
	for _, tc := range []struct {
		name, sale string
		first      []string // the first request's headers; every later one is personal
	}{
		{"a shopper's request first", "s1", personal},
		{"an anonymous request first", "s2", []string{"Host", "shop.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/sales/" + tc.sale + "/admission-log"
			for i := range 3 {
				headers := personal
				if i == 0 {
					headers = tc.first
				}
				a := c.Get(t, path, headers...)
				want := "HIT"
				if i == 0 {
					want = "MISS"
				}
				if a.Status != http.StatusOK || a.CacheStatus() != want || !strings.Contains(string(a.Body), `"sale_id":"s"`) {
					t.Errorf("GET %s #%d = %d, X-Cache-Status %q, %q; want 200 %s with the log", path, i+1, a.Status, a.CacheStatus(), a.Body, want)
				}
			}
			var fetches int
			for _, r := range edge.Requests() {
				if r.Path != path {
					continue
				}
				fetches++
				for _, h := range []string{"Authorization", "X-User-Token", "X-Queue-Token"} {
					if v := r.Get(h); v != "" {
						t.Errorf("the edge was sent %s: %q, want none", h, v)
					}
				}
				if r.Get("X-Forwarded-For") != "127.0.0.1" || r.Get("Host") != "shop.example" || r.Get("X-Request-Id") == "" || r.Get("X-Request-Id") == "mine" {
					t.Errorf("the edge was sent X-Forwarded-For %q, Host %q, X-Request-Id %q; want the CDN's peer 127.0.0.1, shop.example and the CDN's own id",
						r.Get("X-Forwarded-For"), r.Get("Host"), r.Get("X-Request-Id"))
				}
			}
			if fetches != 1 {
				t.Errorf("the edge was asked for %s %d times, want once", path, fetches)
			}
		})
	}
}
