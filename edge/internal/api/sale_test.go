package api

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestWriteSnapshot: a sale's snapshot is JSON, never to be sniffed as
// anything else, with its etag and cache lifetime, on a 200 as on a 304.
func TestWriteSnapshot(t *testing.T) {
	const body, etag = `{"sale_id":"s1"}`, `"e1"`
	for _, tc := range []struct {
		name        string
		ifNoneMatch string
		long        bool
		wantStatus  int
		wantCache   string
		wantBody    string
	}{
		{name: "fresh", wantStatus: fasthttp.StatusOK, wantCache: "public, max-age=1, stale-while-revalidate=2", wantBody: body},
		{name: "final", long: true, wantStatus: fasthttp.StatusOK, wantCache: "public, max-age=30, stale-while-revalidate=60", wantBody: body},
		{name: "another etag", ifNoneMatch: `"e0"`, wantStatus: fasthttp.StatusOK, wantCache: "public, max-age=1, stale-while-revalidate=2", wantBody: body},
		{name: "not modified", ifNoneMatch: etag, wantStatus: fasthttp.StatusNotModified, wantCache: "public, max-age=1, stale-while-revalidate=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			if tc.ifNoneMatch != "" {
				ctx.Request.Header.Set("If-None-Match", tc.ifNoneMatch)
			}
			cache := snapshotShortCache
			if tc.long {
				cache = snapshotLongCache
			}
			writeSnapshot(&ctx, []byte(body), etag, cache)
			h := &ctx.Response.Header
			if got := ctx.Response.StatusCode(); got != tc.wantStatus {
				t.Errorf("status = %d, want %d", got, tc.wantStatus)
			}
			if got := string(h.Peek("X-Content-Type-Options")); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
			if got := string(h.Peek("Cache-Control")); got != tc.wantCache {
				t.Errorf("Cache-Control = %q, want %q", got, tc.wantCache)
			}
			if got := string(h.Peek("ETag")); got != etag {
				t.Errorf("ETag = %q, want %q", got, etag)
			}
			if got := string(ctx.Response.Body()); got != tc.wantBody {
				t.Errorf("body = %q, want %q", got, tc.wantBody)
			}
			if tc.wantBody != "" && string(h.ContentType()) != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", h.ContentType())
			}
		})
	}
}
