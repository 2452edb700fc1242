package cdntest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/internal/testenv"
)

// stack is a stand-in origin (behind a counting proxy that can slow its
// paths down), one edge node trusting X-Forwarded-For from 127.0.0.1 (the
// CDN) only, and nginx with the reference configuration in front of it.
// The test client, nginx and the edge all use 127.0.0.1: the client's own
// address is one the edge trusts, so an X-Forwarded-For that nginx passed
// on or appended to would be believed, and the tests tell replacing it
// from either.
type stack struct {
	Origin      *edgetest.StubOrigin
	OriginFront *edgetest.CountingProxy // between the edge and Origin
	Edge        *Edge
	CDN         *CDN
}

// startStack serves sales from the stub origin and starts the edge (its
// Config adjusted by adjust, when not nil) and the CDN; it waits until the
// edge serves every sale.
func startStack(t *testing.T, adjust func(*app.Config), sales ...snapshot.Sale) *stack {
	t.Helper()
	o := edgetest.NewStubOrigin(t)
	for _, s := range sales {
		o.SetSale(s)
	}
	originAddr := strings.TrimPrefix(o.URL, "http://")
	front := edgetest.NewCountingProxy(t, func() (net.Conn, error) { return net.DialTimeout("tcp", originAddr, 2*time.Second) })
	cfg := edgetest.Config(edgetest.NewRedis(t), front.URL)
	cfg.TrustedProxies = "127.0.0.1/32" // the CDN's address, and no other
	cfg.DefaultRatePerSecond = 1000
	if adjust != nil {
		adjust(&cfg)
	}
	e := StartEdge(t, cfg)
	for _, s := range sales {
		e.Node.WaitSale(t, s.SaleID)
	}
	return &stack{Origin: o, OriginFront: front, Edge: e, CDN: StartCDN(t, e.Addr)}
}

// soldOutSale is an open sale's snapshot once it sold out for good: no
// unit left and none held that could come back.
func soldOutSale(id string) snapshot.Sale {
	s := edgetest.OpenSale(id, 0)
	s.Status, s.SoldOut, s.Final = "sold_out", true, true
	return s
}

// snapshotBody is what a test reads of a snapshot.
type snapshotBody struct {
	SaleID  string `json:"sale_id"`
	Status  string `json:"status"`
	SoldOut bool   `json:"sold_out"`
}

func decodeSnapshot(t testing.TB, a Answer) snapshotBody {
	t.Helper()
	var b snapshotBody
	if err := json.Unmarshal(a.Body, &b); err != nil {
		t.Errorf("snapshot body %q: %v", a.Body, err)
	}
	return b
}

// loadStats counts answers by X-Cache-Status.
type loadStats struct {
	mu       sync.Mutex // guards the rest
	total    int
	byStatus map[string]int
	bad      []string // answers that were not 200 with the sale's snapshot, the first few
}

func (s *loadStats) add(a Answer, sale string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byStatus == nil {
		s.byStatus = map[string]int{}
	}
	s.total++
	s.byStatus[a.CacheStatus()]++
	var b snapshotBody
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &b) != nil || b.SaleID != sale {
		if len(s.bad) < 5 {
			s.bad = append(s.bad, fmt.Sprintf("%d %s %q", a.Status, a.CacheStatus(), a.Body))
		}
	}
}

// fromCache is how many answers nginx gave from its cache.
func (s *loadStats) fromCache() int {
	return s.byStatus["HIT"] + s.byStatus["STALE"] + s.byStatus["UPDATING"] + s.byStatus["REVALIDATED"]
}

// maxFetches is the most edge fetches a cache that honours max-age=1 may
// make in elapsed: nginx keeps time in whole seconds, an entry fetched in
// second k stays fresh through second k+1, so two fetches are more than a
// second apart.
func maxFetches(elapsed time.Duration) int { return int(elapsed.Seconds()) + 1 }

// TestSnapshotLoadsCollapse: four hundred shoppers loading the snapshot at
// once through the CDN cost the edge one fetch; under steady load the edge
// sees at most one fetch per max-age window, and at least one every couple
// of seconds (the CDN keeps the open sale's snapshot no longer than the
// edge said); a query on the path neither splits the cache nor reaches the
// edge.
func TestSnapshotLoadsCollapse(t *testing.T) {
	const sale = "cdn-burst"
	// Cold entries for the burst, one per attempt (see below), and the sale
	// the steady load reads.
	const attempts = 3
	sales := []snapshot.Sale{edgetest.OpenSale(sale, 100)}
	for i := range attempts {
		sales = append(sales, edgetest.OpenSale(fmt.Sprintf("%s-%d", sale, i), 100))
	}
	s := startStack(t, nil, sales...)
	path := "/v1/sales/" + sale
	// Four hundred: a thousand at once took 3.2-5.2 s to answer on a
	// loaded two-core box under the race detector, past the window below
	// in all three tries.
	const shoppers = 400
	c := NewClient(t, s.CDN, shoppers)

	// All at once on a cold cache: the lock lets one through. The
	// entry serves (fresh, then stale while one refresh runs) for max-age
	// plus stale-while-revalidate, 3 s; past that nginx collapses nothing
	// (its lock covers new entries only). A burst that a loaded machine
	// could not finish within that window says nothing of the lock, so it
	// is tried again on a fresh entry, up to three times.
	const window = 3 * time.Second
	measured := false
	for i := 0; i < attempts && !measured; i++ {
		burstPath := fmt.Sprintf("%s-%d", path, i)
		var burst loadStats
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range shoppers {
			wg.Go(func() {
				<-start
				burst.add(c.Get(t, burstPath), fmt.Sprintf("%s-%d", sale, i))
			})
		}
		began := time.Now()
		close(start)
		wg.Wait()
		burstTime := time.Since(began)
		burstFetches := s.Edge.Fetches("GET", burstPath)
		t.Logf("cdn: %d concurrent snapshot loads in %v: %d edge fetches, answers by X-Cache-Status %v",
			shoppers, burstTime.Round(time.Millisecond), burstFetches, burst.byStatus)
		if len(burst.bad) > 0 {
			t.Errorf("burst: answers that are not the snapshot: %v", burst.bad)
		}
		if burst.total != shoppers {
			t.Errorf("burst: %d answers, want %d", burst.total, shoppers)
		}
		if burstTime >= window {
			t.Logf("burst %d took %v, past the entry's %v window; trying a fresh entry", i+1, burstTime.Round(time.Millisecond), window)
			continue
		}
		measured = true
		if want := maxFetches(burstTime); burstFetches < 1 || burstFetches > want {
			t.Errorf("burst: %d concurrent loads in %v made %d edge fetches of %s, want 1 to %d (proxy_cache_lock collapses a cold miss)",
				shoppers, burstTime, burstFetches, burstPath, want)
		}
	}
	if !measured {
		t.Errorf("burst: none of %d bursts of %d loads finished within %v; the machine is too loaded to measure the collapse", attempts, shoppers, window)
	}
	var wg sync.WaitGroup

	// Steady load: 64 shoppers loading again and again for 5 s, some with
	// a query of their own.
	const workers, steady = 64, 5 * time.Second
	var load loadStats
	before := s.Edge.Fetches("GET", path)
	began := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Since(began) < steady && i < 100000; i++ {
				p := path
				if w%4 == 0 {
					p += fmt.Sprintf("?nocache=%d-%d&utm_source=x", w, i)
				}
				load.add(c.Get(t, p), sale)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	fetches := s.Edge.Fetches("GET", path) - before
	t.Logf("cdn: %d snapshot loads over %v by %d shoppers: %d edge fetches (max-age=1), %d answered from the cache (%.3f%%), by X-Cache-Status %v",
		load.total, elapsed.Round(time.Millisecond), workers, fetches, load.fromCache(),
		100*float64(load.fromCache())/float64(max(load.total, 1)), load.byStatus)
	if len(load.bad) > 0 {
		t.Errorf("steady load: answers that are not the snapshot: %v", load.bad)
	}
	if want := maxFetches(elapsed); fetches > want {
		t.Errorf("steady load: %d loads in %v made %d edge fetches, want at most %d (one per max-age window)", load.total, elapsed, fetches, want)
	}
	if fetches < 2 {
		t.Errorf("steady load: %d edge fetches in %v, want at least 2: an open sale's snapshot (max-age=1) must not be kept for seconds", fetches, elapsed)
	}
	for _, r := range s.Edge.Requests() {
		if strings.HasPrefix(r.URI, path+"?") {
			t.Errorf("a query reached the edge: %s %s (the cache key and the edge's request are the path alone)", r.Method, r.URI)
			break
		}
	}
}

// TestPageServedFromCache: the page and its files come from the cache once
// fetched, with the edge's headers, whatever the query (the page's own
// ?sale=... and a campaign's utm_ parameters).
func TestPageServedFromCache(t *testing.T) {
	s := startStack(t, nil, edgetest.OpenSale("cdn-page", 10))
	c := NewClient(t, s.CDN, 4)
	for _, p := range []string{"/", "/static/app.js"} {
		first := c.Get(t, p)
		if first.Status != http.StatusOK {
			t.Fatalf("GET %s = %d %q, want 200", p, first.Status, first.Body)
		}
		for _, q := range []string{"", "?sale=cdn-page", "?sale=cdn-page&utm_source=mail"} {
			a := c.Get(t, p+q)
			if a.Status != http.StatusOK || a.CacheStatus() != "HIT" {
				t.Errorf("GET %s again = %d, X-Cache-Status %q, want 200 HIT", p+q, a.Status, a.CacheStatus())
			}
			if got, want := a.Header.Get("Cache-Control"), "public, max-age=300, stale-while-revalidate=60"; got != want {
				t.Errorf("GET %s: Cache-Control %q, want the edge's %q", p+q, got, want)
			}
			if a.Header.Get("Content-Security-Policy") == "" || a.Header.Get("ETag") != first.Header.Get("ETag") {
				t.Errorf("GET %s from the cache lost the edge's headers: CSP %q, ETag %q (first %q)", p+q,
					a.Header.Get("Content-Security-Policy"), a.Header.Get("ETag"), first.Header.Get("ETag"))
			}
		}
		if n := s.Edge.Fetches("GET", p); n != 1 {
			t.Errorf("edge fetches of %s = %d, want 1", p, n)
		}
	}
}

// TestCacheKeyHasSchemeAndHost: what one host's request stored is never
// served for another host's: the page fetched for shop-a is a HIT for
// shop-a and a MISS, fetched from the edge again, for shop-b. Every
// proxy_cache_key in the template keys on the scheme and the host too (one
// listener here speaks http only, so the scheme is read from the file).
func TestCacheKeyHasSchemeAndHost(t *testing.T) {
	s := startStack(t, nil, edgetest.OpenSale("cdn-host", 10))
	c := NewClient(t, s.CDN, 4)
	for _, p := range []string{"/", "/static/app.js"} {
		for i, step := range []struct {
			host, want string
			fetches    int
		}{
			{"shop-a.example", "MISS", 1},
			{"shop-a.example", "HIT", 1},
			{"SHOP-A.example:80", "HIT", 1}, // nginx's $host: lower-cased, without the port
			{"shop-b.example", "MISS", 2},
			{"shop-b.example", "HIT", 2},
		} {
			a := c.Get(t, p, "Host", step.host)
			if a.Status != http.StatusOK || a.CacheStatus() != step.want {
				t.Errorf("step %d: GET %s (Host %s) = %d, X-Cache-Status %q, want 200 %s", i, p, step.host, a.Status, a.CacheStatus(), step.want)
			}
			if n := s.Edge.Fetches("GET", p); n != step.fetches {
				t.Errorf("step %d: GET %s (Host %s): edge fetches %d, want %d", i, p, step.host, n, step.fetches)
			}
		}
	}

	// After the stack: a failure here would stop fillTemplate from filling it.
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`(?m)^\s*proxy_cache_key\s+([^;]*);`).FindAllStringSubmatch(string(b), -1)
	if len(keys) == 0 {
		t.Fatalf("%s has no proxy_cache_key", templatePath)
	}
	for _, k := range keys {
		if !strings.Contains(k[1], "$scheme") || !strings.Contains(k[1], "$host") {
			t.Errorf("%s: proxy_cache_key %s, want the scheme and host in it ($scheme://$host...)", templatePath, k[1])
		}
	}
}

// TestPersonalRoutesReachTheEdge: joins, status polls, reserves, orders,
// reservations and webhooks each reach the edge, however alike, and come
// back with the shopper's own answer; nothing with a shopper's token is
// answered from or stored in the cache, even on the snapshot's path.
func TestPersonalRoutesReachTheEdge(t *testing.T) {
	const sale = "cdn-personal"
	s := startStack(t, nil, edgetest.OpenSale(sale, 1000))
	c := NewClient(t, s.CDN, 8)
	base := "/v1/sales/" + sale
	notCached := func(what string, a Answer) {
		t.Helper()
		if a.FromCache() {
			t.Errorf("%s: X-Cache-Status %q, answered from the cache", what, a.CacheStatus())
		}
	}

	const shoppers = 12
	type shopper struct {
		account, user, queue string
		position             int64
	}
	var all []*shopper
	for i := range shoppers {
		sh := &shopper{account: fmt.Sprintf("cdn-shopper-%02d", i)}
		sh.user = edgetest.UserToken(t, sh.account)
		a := c.Do(t, http.MethodPost, base+"/queue", nil, "Authorization", "Bearer "+sh.user)
		notCached("join", a)
		var q edgetest.QueueAnswer
		if a.Status != http.StatusAccepted || json.Unmarshal(a.Body, &q) != nil || q.QueueToken == "" {
			t.Fatalf("join of %s = %d %q, want 202 with a queue token", sh.account, a.Status, a.Body)
		}
		sh.queue, sh.position = q.QueueToken, q.Position
		all = append(all, sh)
	}
	if n := s.Edge.Fetches(http.MethodPost, base+"/queue"); n != shoppers {
		t.Errorf("joins that reached the edge = %d, want %d", n, shoppers)
	}

	// Every shopper polls until admitted (the sale admits 1000 a second):
	// each poll reaches the edge and answers that shopper's place.
	admission := map[string]string{}
	polls := 0
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("all %d shoppers admitted", shoppers), func() bool {
		for _, sh := range all {
			if admission[sh.account] != "" {
				continue
			}
			a := c.Get(t, base+"/queue/status", "Authorization", "Bearer "+sh.queue, "X-User-Token", sh.user)
			polls++
			notCached("status", a)
			var q edgetest.QueueAnswer
			if a.Status != http.StatusOK || json.Unmarshal(a.Body, &q) != nil {
				t.Fatalf("status of %s = %d %q, want 200", sh.account, a.Status, a.Body)
			}
			if q.Position != sh.position {
				t.Errorf("status of %s: position %d, want its own %d", sh.account, q.Position, sh.position)
			}
			if q.State == "admitted" {
				if got := edgetest.Subject(q.AdmissionToken); got != sh.account {
					t.Errorf("status of %s: admission token for %q, want its own", sh.account, got)
				}
				admission[sh.account] = q.AdmissionToken
			}
		}
		return len(admission) == shoppers
	})
	if n := s.Edge.Fetches(http.MethodGet, base+"/queue/status"); n != polls {
		t.Errorf("status polls that reached the edge = %d, want all %d", n, polls)
	}

	// A poll repeated at once still reaches the edge.
	sh := all[0]
	before := s.Edge.Fetches(http.MethodGet, base+"/queue/status")
	for range 3 {
		notCached("repeated status", c.Get(t, base+"/queue/status", "Authorization", "Bearer "+sh.queue, "X-User-Token", sh.user))
	}
	if n := s.Edge.Fetches(http.MethodGet, base+"/queue/status") - before; n != 3 {
		t.Errorf("3 identical polls at once: %d reached the edge, want 3", n)
	}

	for _, sh := range all {
		body := []byte(`{"sku":"sku-1","idempotency_key":"k-` + sh.account + `"}`)
		a := c.Do(t, http.MethodPost, base+"/reserve", body, "Authorization", "Bearer "+admission[sh.account], "X-User-Token", sh.user)
		notCached("reserve", a)
		if a.Status != http.StatusCreated {
			t.Errorf("reserve of %s = %d %q, want the origin's 201", sh.account, a.Status, a.Body)
		}
	}
	if n := s.Edge.Fetches(http.MethodPost, base+"/reserve"); n != shoppers {
		t.Errorf("reserves that reached the edge = %d, want %d", n, shoppers)
	}
	if n := s.Origin.CountMatching(http.MethodPost, base+"/reserve"); n != shoppers {
		t.Errorf("reserves that reached the origin = %d, want %d", n, shoppers)
	}

	// Orders, reservations and the webhook pass through, twice each.
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/orders/o_cdn"}, {http.MethodGet, "/v1/reservations/r_cdn"},
		{http.MethodPost, "/v1/orders"}, {http.MethodPost, "/v1/payments/webhook"},
	} {
		var body []byte
		if r.method == http.MethodPost {
			body = []byte(`{}`)
		}
		for range 2 {
			notCached(r.method+" "+r.path, c.Do(t, r.method, r.path, body, "Authorization", "Bearer "+sh.user))
		}
		if n := s.Edge.Fetches(r.method, r.path); n != 2 {
			t.Errorf("%s %s twice: %d reached the edge, want 2", r.method, r.path, n)
		}
	}

	// The snapshot's own path with a shopper's token: passed by the cache
	// and not stored, so the next plain load is still a miss.
	for _, h := range [][]string{{"Authorization", "Bearer " + sh.user}, {"X-User-Token", sh.user}} {
		other := "cdn-personal-" + strings.ToLower(h[0])
		s.Origin.SetSale(edgetest.OpenSale(other, 5))
		s.Edge.Node.WaitSale(t, other)
		p := "/v1/sales/" + other
		for range 2 {
			if a := c.Get(t, p, h...); a.Status != http.StatusOK || a.CacheStatus() != "BYPASS" {
				t.Errorf("GET %s with %s = %d, X-Cache-Status %q, want 200 BYPASS", p, h[0], a.Status, a.CacheStatus())
			}
		}
		if a := c.Get(t, p); a.CacheStatus() != "MISS" {
			t.Errorf("GET %s plain after loads with %s: X-Cache-Status %q, want MISS (nothing stored)", p, h[0], a.CacheStatus())
		}
		if n := s.Edge.Fetches(http.MethodGet, p); n != 3 {
			t.Errorf("edge fetches of %s = %d, want 3 (two with %s, one plain)", p, n, h[0])
		}
	}

	// Everything above, one request after another, came on a few kept-alive
	// connections (a couple per nginx worker), not on one each.
	reqs, conns := len(s.Edge.Requests()), s.Edge.Conns()
	t.Logf("cdn: %d requests reached the edge on %d connections", reqs, conns)
	if reqs < 40 || conns > 4 {
		t.Errorf("%d requests reached the edge on %d connections, want at least 40 on at most 4 (upstream keepalive)", reqs, conns)
	}
}

// TestSoldOutSnapshotCachedLonger: once a sale sells out for good the edge
// says max-age=30, the CDN shows sold out within seconds and then holds it
// without asking the edge again, while an open sale's snapshot beside it
// keeps being fetched.
func TestSoldOutSnapshotCachedLonger(t *testing.T) {
	const open, selling = "cdn-open", "cdn-selling"
	s := startStack(t, nil, edgetest.OpenSale(open, 10), edgetest.OpenSale(selling, 1))
	c := NewClient(t, s.CDN, 4)
	openPath, sellingPath := "/v1/sales/"+open, "/v1/sales/"+selling
	for _, p := range []string{openPath, sellingPath} {
		if a := c.Get(t, p); a.Status != http.StatusOK || a.Header.Get("Cache-Control") != "public, max-age=1, stale-while-revalidate=2" {
			t.Fatalf("GET %s = %d, Cache-Control %q, want 200 with max-age=1", p, a.Status, a.Header.Get("Cache-Control"))
		}
	}

	s.Origin.SetSale(soldOutSale(selling))
	testenv.Eventually(t, 5*time.Second, "the edge serves "+selling+" sold out", func() bool {
		r := s.Edge.Node.Do(t, edgetest.Request{Method: http.MethodGet, Path: sellingPath})
		return strings.Contains(string(r.Body), `"sold_out":true`)
	})
	edgeSoldOut := time.Now()
	var shown time.Duration
	testenv.Eventually(t, 8*time.Second, "the CDN serves "+selling+" sold out", func() bool {
		a := c.Get(t, sellingPath)
		shown = time.Since(edgeSoldOut)
		return a.Status == http.StatusOK && decodeSnapshot(t, a).SoldOut
	})
	t.Logf("cdn: sold out shown through the CDN %v after the edge said it", shown.Round(time.Millisecond))
	// max-age=1 is fresh up to 2 s in nginx's whole seconds, then stale up to 2 s more.
	if shown > 5*time.Second {
		t.Errorf("sold out reached shoppers %v after the edge said it, want within 5 s (max-age=1, stale-while-revalidate=2)", shown)
	}

	a := c.Get(t, sellingPath)
	if got, want := a.Header.Get("Cache-Control"), "public, max-age=30, stale-while-revalidate=60"; got != want {
		t.Errorf("sold-out snapshot's Cache-Control through the CDN = %q, want %q", got, want)
	}
	soldFetches, openFetches := s.Edge.Fetches("GET", sellingPath), s.Edge.Fetches("GET", openPath)
	notHit := 0
	for began := time.Now(); time.Since(began) < 3500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		if a := c.Get(t, sellingPath); a.CacheStatus() != "HIT" || !decodeSnapshot(t, a).SoldOut {
			notHit++
			t.Errorf("sold-out snapshot: %d, X-Cache-Status %q, body %q, want HIT sold out", a.Status, a.CacheStatus(), a.Body)
		}
		c.Get(t, openPath)
	}
	time.Sleep(200 * time.Millisecond) // a background update started by the last load
	if n := s.Edge.Fetches("GET", sellingPath) - soldFetches; n != 0 || notHit > 0 {
		t.Errorf("sold-out snapshot over 3.5 s: %d edge fetches, %d answers not HIT, want 0 and 0 (max-age=30)", n, notHit)
	}
	if n := s.Edge.Fetches("GET", openPath) - openFetches; n < 1 {
		t.Errorf("open snapshot over 3.5 s: %d edge fetches, want at least 1 (max-age=1)", n)
	}
}

// TestPleaseWaitNotHiddenByTheCache: when the edge cannot vouch for a
// sale's snapshot (its origin fetches stall) and answers 503 please_wait,
// the CDN stops serving its stale copy within stale-while-revalidate, as
// the edge's Cache-Control allows, rather than for as long as the edge
// keeps failing.
func TestPleaseWaitNotHiddenByTheCache(t *testing.T) {
	const sale = "cdn-stall"
	path := "/v1/sales/" + sale
	s := startStack(t, func(c *app.Config) { c.SnapshotStaleAfter = 500 * time.Millisecond }, edgetest.OpenSale(sale, 10))
	c := NewClient(t, s.CDN, 4)
	for began := time.Now(); time.Since(began) < 1500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		if a := c.Get(t, path); a.Status != http.StatusOK {
			t.Fatalf("GET %s = %d %q before the stall, want 200", path, a.Status, a.Body)
		}
	}

	s.OriginFront.Delay(path, 2*time.Second)
	t.Cleanup(func() { s.OriginFront.Delay(path, 0) }) // before the node stops: its last fetches end within 2 s
	testenv.Eventually(t, 5*time.Second, "the edge answers please_wait", func() bool {
		r := s.Edge.Node.Do(t, edgetest.Request{Method: http.MethodGet, Path: path})
		return r.Status == http.StatusServiceUnavailable && r.ErrorCode() == "please_wait"
	})
	edgeWaits := time.Now()
	var stale loadStats
	var passed time.Duration
	testenv.Eventually(t, 10*time.Second, "the CDN passes the edge's please_wait on", func() bool {
		a := c.Get(t, path)
		passed = time.Since(edgeWaits)
		if a.Status == http.StatusServiceUnavailable && strings.Contains(string(a.Body), `"please_wait"`) {
			if a.FromCache() {
				t.Errorf("please_wait answered from the cache (X-Cache-Status %q): the edge marks it no-store", a.CacheStatus())
			}
			return true
		}
		stale.add(a, sale)
		time.Sleep(100 * time.Millisecond)
		return false
	})
	t.Logf("cdn: edge's please_wait passed on %v after it began; meanwhile %d loads answered from the cache %v",
		passed.Round(time.Millisecond), stale.total, stale.byStatus)
	if passed > 5*time.Second {
		t.Errorf("the CDN served its copy %v after the edge began answering please_wait, want within 5 s (max-age=1, stale-while-revalidate=2)", passed)
	}
}

// TestForwardedForIsTheCDNsPeer: the edge, trusting the CDN's address
// alone, sees the address the CDN saw, never one a client wrote into
// X-Forwarded-For: the shop hears it, and the per-address limit counts
// every forged address as the one client it is.
func TestForwardedForIsTheCDNsPeer(t *testing.T) {
	const sale = "cdn-xff"
	shop := edgetest.NewShop(t)
	s := startStack(t, func(c *app.Config) {
		c.ShopURL = shop.URL
		c.LimitJoinIP = "3-M"
	}, edgetest.OpenSale(sale, 10))
	c := NewClient(t, s.CDN, 4)

	forged := []string{"X-Forwarded-For", "203.0.113.7", "X-Real-IP", "203.0.113.8", "True-Client-IP", "203.0.113.9",
		"Forwarded", "for=203.0.113.10"}
	if a := c.Get(t, "/account/orders?page=1", forged...); a.Status != http.StatusOK {
		t.Fatalf("GET a shop path through the CDN = %d %q, want the shop's 200", a.Status, a.Body)
	}
	reqs := shop.Requests()
	if len(reqs) != 1 {
		t.Fatalf("shop requests = %d, want 1", len(reqs))
	}
	if got := reqs[0].Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("the shop heard X-Forwarded-For %q, want 127.0.0.1, the address nginx saw", got)
	}
	for name, vals := range reqs[0].Header {
		for _, v := range vals {
			if strings.Contains(v, "203.0.113.") {
				t.Errorf("the shop heard the forged address in %s: %q", name, v)
			}
		}
	}
	edgeReqs := s.Edge.Requests()
	if got := edgeReqs[len(edgeReqs)-1].XFF; got != "127.0.0.1" {
		t.Errorf("nginx sent the edge X-Forwarded-For %q, want 127.0.0.1 (replaced, not appended to)", got)
	}

	// Four joins from one client, each naming another address: the limit
	// of three per address holds.
	for i := range 4 {
		user := edgetest.UserToken(t, fmt.Sprintf("cdn-xff-%d", i))
		a := c.Do(t, http.MethodPost, "/v1/sales/"+sale+"/queue", nil, "Authorization", "Bearer "+user,
			"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		want := http.StatusAccepted
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if a.Status != want {
			t.Errorf("join %d with a forged X-Forwarded-For = %d %q, want %d", i+1, a.Status, a.Body, want)
		}
	}

	// The control: the edge believes what its trusted proxy says, so the
	// same forged header sent straight to it from 127.0.0.1 is believed.
	// Only the CDN replacing it keeps it out.
	direct := &CDN{URL: "http://" + s.Edge.Addr}
	NewClient(t, direct, 1).Get(t, "/account/orders", "X-Forwarded-For", "203.0.113.7")
	reqs = shop.Requests()
	if got := reqs[len(reqs)-1].Get("X-Forwarded-For"); got != "203.0.113.7" {
		t.Errorf("straight to the edge from its trusted address, X-Forwarded-For 203.0.113.7 reached the shop as %q; "+
			"the control is meant to show the edge believing it", got)
	}
}

// TestSnapshotWatchCollapses: a crowd of pages watching the same second
// (?at=) through the CDN is one request at the edge, held until the second
// ends and answered to all of them then, with the second to ask for next;
// a second outside the CDN's ten is dropped, and the edge sees a plain read.
func TestSnapshotWatchCollapses(t *testing.T) {
	const sale = "cdn-watch"
	s := startStack(t, nil, edgetest.OpenSale(sale, 100))
	const pages = 200
	c := NewClient(t, s.CDN, pages)
	at := watchableSecond(0)
	watch := fmt.Sprintf("/v1/sales/%s?at=%d", sale, at)

	answers := make([]Answer, pages)
	var wg sync.WaitGroup
	for i := range pages {
		wg.Go(func() { answers[i] = c.Get(t, watch) })
	}
	wg.Wait()
	done := time.Now()
	if done.Before(time.Unix(at+1, 0)) {
		t.Errorf("%d watches of second %d answered by %v, before the second ended", pages, at, done)
	}
	for i, a := range answers {
		if a.Status != http.StatusOK || decodeSnapshot(t, a).SaleID != sale {
			t.Fatalf("watch %d = %d %q, want the snapshot", i, a.Status, a.Body)
		}
		if got, want := a.Header.Get("Flashgate-Next-At"), fmt.Sprint(at+1); got != want {
			t.Errorf("watch %d: Flashgate-Next-At %q, want %q", i, got, want)
		}
	}
	if n := s.Edge.Fetches("GET", watch); n != 1 {
		t.Errorf("%d watches of one second made %d edge requests of %s, want 1 (the lock collapses them)", pages, n, watch)
	}

	far := fmt.Sprintf("/v1/sales/%s?at=%d", sale, at+3600)
	if a := c.Get(t, far); a.Status != http.StatusOK {
		t.Errorf("watch of a second an hour on = %d %q, want the snapshot", a.Status, a.Body)
	}
	for _, r := range s.Edge.Requests() {
		if strings.Contains(r.URI, fmt.Sprint(at+3600)) {
			t.Errorf("a second outside the CDN's ten reached the edge: %s %s", r.Method, r.URI)
		}
	}
}

// TestSnapshotWatchAheadNotKept: a watch of a second still to come is
// answered at once and kept nowhere, so when that second comes the pages'
// watches of it are held at the edge, not answered from a copy made early.
func TestSnapshotWatchAheadNotKept(t *testing.T) {
	const sale = "cdn-watch-ahead"
	s := startStack(t, nil, edgetest.OpenSale(sale, 100))
	c := NewClient(t, s.CDN, 4)
	// A watch answered only once its second had come (a loaded machine)
	// tells nothing of one still ahead: the test asks of a later second.
	var now int64
	var ahead string
	for try := 1; ; try++ {
		now = watchableSecond(2)
		ahead = fmt.Sprintf("/v1/sales/%s?at=%d", sale, now+2)
		a := c.Get(t, ahead)
		if time.Now().Before(time.Unix(now+2, 0)) {
			if a.Status != http.StatusOK || a.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("watch of a second two ahead = %d, Cache-Control %q; want 200 no-store", a.Status, a.Header.Get("Cache-Control"))
			}
			break
		}
		if try == 3 {
			t.Fatalf("three watches of a second two ahead each answered only after it came: held at the edge, or a machine too slow for this test")
		}
	}
	untilSecond(now + 2)
	a := c.Get(t, ahead)
	if done := time.Now(); a.Status != http.StatusOK || done.Before(time.Unix(now+3, 0)) || a.FromCache() {
		t.Errorf("watch of second %d when it came = %d, X-Cache-Status %q, answered at %v; want held until it ended, not from the cache",
			now+2, a.Status, a.CacheStatus(), done)
	}
	if n := s.Edge.Fetches("GET", ahead); n != 2 {
		t.Errorf("edge requests of %s = %d, want 2 (the early one, kept nowhere, and the held one)", ahead, n)
	}
}

// watchableSecond is the current second, or a later one the test waits
// for, such that it and the spare seconds after it fall in one of nginx's
// ten-second windows: the CDN passes a watch's second on only within its
// own window (deploy/cdn), and nginx's clock is the wall clock, which a test
// cannot set.
func watchableSecond(spare int64) int64 {
	now := time.Now().Unix()
	if now%10+spare > 8 { // the request could reach nginx as the window turns
		now += 10 - now%10
		untilSecond(now)
	}
	return now
}

// untilSecond waits until the wall clock reaches unix second s.
func untilSecond(s int64) {
	time.Sleep(time.Until(time.Unix(s, 0)))
}
