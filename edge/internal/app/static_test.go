package app_test

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/static"
)

// TestStaticFiles: the page at / and every embedded file under /static/
// are served with the contract's Cache-Control and an ETag, and a request
// that names that ETag gets 304 with no body.
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	n := edgetest.NewNode(t, edgetest.Config(edgetest.NewRedis(t), edgetest.NewStubOrigin(t).URL))
	paths := []string{"/"}
	for _, name := range static.Names() {
		paths = append(paths, "/static/"+name)
	}
	if len(paths) < 4 {
		t.Fatalf("static.Names() = %v, want the page, its script and its style", static.Names())
	}
	const cacheControl = "public, max-age=300, stale-while-revalidate=60"
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			res := n.Do(t, edgetest.Request{Method: "GET", Path: path})
			etag := res.Get("ETag")
			if res.Status != fasthttp.StatusOK || len(res.Body) == 0 {
				t.Fatalf("GET %s = %d (%d bytes), want 200 with the file", path, res.Status, len(res.Body))
			}
			if got := res.Get("Cache-Control"); got != cacheControl {
				t.Errorf("GET %s Cache-Control = %q, want %q", path, got, cacheControl)
			}
			if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Errorf("GET %s ETag = %q, want a quoted strong ETag", path, etag)
			}
			res = n.Do(t, edgetest.Request{Method: "GET", Path: path, Header: map[string]string{"If-None-Match": etag}})
			if res.Status != fasthttp.StatusNotModified || len(res.Body) != 0 || res.Get("ETag") != etag {
				t.Errorf("GET %s If-None-Match %s = %d (%d bytes, ETag %q), want 304, no body, the same ETag", path, etag, res.Status, len(res.Body), res.Get("ETag"))
			}
			res = n.Do(t, edgetest.Request{Method: "GET", Path: path, Header: map[string]string{"If-None-Match": `"stale"`}})
			if res.Status != fasthttp.StatusOK {
				t.Errorf("GET %s with another ETag = %d, want 200", path, res.Status)
			}
		})
	}
	if res := n.Do(t, edgetest.Request{Method: "GET", Path: "/static/missing.js"}); res.Status != fasthttp.StatusNotFound ||
		res.ErrorCode() != "not_found" || res.Get("X-Request-Id") == "" {
		t.Errorf("GET /static/missing.js = %d %s, want 404 not_found with a request id", res.Status, res.Body)
	}
	if res := n.Do(t, edgetest.Request{Method: "GET", Path: "/"}); res.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET / Content-Type = %q, want text/html; charset=utf-8", res.Get("Content-Type"))
	}
}

// TestSnapshotCaching: the snapshot is served with a one-second
// Cache-Control and an ETag that revalidates to 304; once the sale is
// finally sold out it may be cached longer; an unknown sale is 404
// unknown_sale.
func TestSnapshotCaching(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "cached"
	origin.SetSale(edgetest.OpenSale(sale, 3))
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), origin.URL))
	n.WaitSale(t, sale)

	res, snap := getSnapshot(t, n, sale)
	if got, want := res.Get("Cache-Control"), "public, max-age=1, stale-while-revalidate=2"; got != want {
		t.Errorf("snapshot Cache-Control = %q, want %q", got, want)
	}
	if snap.SaleID != sale || snap.Status != "open" || len(snap.SKUs) != 1 || snap.SKUs[0].AvailableHint != 3 {
		t.Errorf("snapshot = %s, want the origin's sale, open, with sku-1's hint 3", res.Body)
	}
	etag := res.Get("ETag")
	res = n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale, Header: map[string]string{"If-None-Match": etag}})
	// The cursor may have been re-read meanwhile; an unchanged view revalidates.
	if res.Status != fasthttp.StatusNotModified && res.Get("ETag") == etag {
		t.Errorf("snapshot with If-None-Match of the current ETag = %d, want 304", res.Status)
	}

	res = n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/no-such-sale"})
	if res.Status != fasthttp.StatusNotFound || res.ErrorCode() != "unknown_sale" {
		t.Errorf("snapshot of an unknown sale = %d %s, want 404 unknown_sale", res.Status, res.Body)
	}

	final := edgetest.OpenSale(sale, 0)
	final.StartsAt, final.EndsAt = snap.StartsAt, snap.StartsAt.Add(2*time.Hour)
	final.Status, final.SoldOut, final.Final = "sold_out", true, true
	origin.SetSale(final)
	waitSnapshot(t, n, sale, 5*time.Second, func(s publicSnapshot) bool { return s.SoldOut && s.Final })
	res, _ = getSnapshot(t, n, sale)
	if got := res.Get("Cache-Control"); got != "public, max-age=30, stale-while-revalidate=60" {
		t.Errorf("snapshot of a finally sold-out sale Cache-Control = %q, want a longer max-age", got)
	}
}
