package assets

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/valyala/fasthttp"
)

// TestPageSecurityHeaders: the page and its files carry a policy that runs
// only the page's own script, worker and style, keeps it out of frames and
// sends no referrer; an unknown path is ErrNotFound, for the caller's error
// table.
func TestPageSecurityHeaders(t *testing.T) {
	h, err := Handler(fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>sale</title>")},
		"app.js":     {Data: []byte("'use strict';")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/static/app.js"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		if err := h(&ctx); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		header := func(name string) string { return string(ctx.Response.Header.Peek(name)) }
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			t.Fatalf("GET %s = %d", path, ctx.Response.StatusCode())
		}
		csp := header("Content-Security-Policy")
		for _, directive := range []string{"default-src 'none'", "script-src 'self'", "worker-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, directive) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, directive)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline or eval'd script", path, csp)
		}
		if got := header("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", path, got)
		}
		if got := header("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("GET %s: Referrer-Policy %q, want no-referrer", path, got)
		}
		if got := header("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/static/missing.js")
	if err := h(&ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("GET /static/missing.js: %v, want ErrNotFound", err)
	}
}
