// Package assets serves the embedded shopper page and its files with the
// contract's cache headers and strong ETags, so the CDN holds them and
// revalidation is a 304.
package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

type file struct {
	body        []byte
	etag        string
	contentType string
}

// ErrNotFound: there is no such file; nothing was written, the caller answers.
var ErrNotFound = errors.New("assets: no such file")

// Handler serves "/" as index.html and "/static/<name>" as the file name,
// from files read once at start-up.
func Handler(files fs.FS) (func(ctx *fasthttp.RequestCtx) error, error) {
	byPath := map[string]file{}
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(name, ".go") {
			return err
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		f := file{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		byPath["/static/"+name] = f
		if name == "index.html" {
			byPath["/"] = f
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("assets: %w", err)
	}
	if _, ok := byPath["/"]; !ok {
		return nil, fmt.Errorf("assets: no index.html")
	}
	return func(ctx *fasthttp.RequestCtx) error {
		f, ok := byPath[string(ctx.Path())]
		if !ok {
			return ErrNotFound
		}
		h := &ctx.Response.Header
		h.Set("Cache-Control", "public, max-age=300, stale-while-revalidate=60")
		h.Set("ETag", f.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		setPageSecurity(h)
		if string(ctx.Request.Header.Peek("If-None-Match")) == f.etag {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return nil
		}
		ctx.SetContentType(f.contentType)
		if !ctx.IsHead() {
			ctx.SetBody(f.body)
		}
		return nil
	}, nil
}

// contentSecurityPolicy lets the page load only its own script, style, Web
// Worker (static/challenge-worker.js) and API answers, so an injected script
// cannot read the shopper's tokens, and keeps the payment-bound page unframed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// setPageSecurity sets the headers that keep the page from being framed,
// running anything but its own files, or telling other sites which sale
// and order a shopper came from.
func setPageSecurity(h *fasthttp.ResponseHeader) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
	h.Set("Referrer-Policy", "no-referrer")
}
