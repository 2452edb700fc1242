package app_test

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestSoldOutAnsweredAtEdge: against a real origin, two shoppers join,
// are admitted and reserve the sale's two units through the edge; once the
// edge's snapshot says sold out, a reserve with a valid admission token is
// answered 409 sold_out by the edge and never reaches the origin.
func TestSoldOutAnsweredAtEdge(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "soldout"
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 600))
	cfg := edgetest.Config(edgetest.NewRedis(t), counting.URL)
	cfg.DefaultRatePerSecond = 1000
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	reservePath := "/v1/sales/" + sale + "/reserve"

	for i := range 2 {
		account := fmt.Sprintf("buyer-%d", i)
		res, joined := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %s = %d %s, want 202", account, res.Status, res.Body)
		}
		var admitted edgetest.QueueAnswer
		testenv.Eventually(t, 5*time.Second, "status of "+account+" admitted", func() bool {
			_, admitted = n.Status(t, sale, joined.QueueToken)
			return admitted.State == "admitted"
		})
		res = n.Do(t, edgetest.Request{Method: "POST", Path: reservePath, Token: admitted.AdmissionToken, User: edgetest.Owner(t, admitted.AdmissionToken),
			Body: reserveBody("sku-1", "idem-"+account)})
		if res.Status != fasthttp.StatusCreated {
			t.Fatalf("reserve of %s through the edge = %d %s, want 201 from origin", account, res.Status, res.Body)
		}
	}
	if got := counting.CountMatching("POST", reservePath); got != 2 {
		t.Fatalf("origin saw %d reserves, want 2", got)
	}

	snap := waitSnapshot(t, n, sale, 5*time.Second, func(s publicSnapshot) bool { return s.SoldOut })
	if snap.Status != "sold_out" || snap.Final {
		t.Errorf("snapshot after selling out with both units held = status %q final %v, want sold_out, not final", snap.Status, snap.Final)
	}

	token, _, err := issuer.Admission(sale, "late-shopper", 3)
	if err != nil {
		t.Fatal(err)
	}
	before := counting.Count()
	for i := range 5 {
		res := n.Do(t, edgetest.Request{Method: "POST", Path: reservePath, Token: token, Body: reserveBody("sku-1", fmt.Sprint("late-", i))})
		if res.Status != fasthttp.StatusConflict || res.ErrorCode() != "sold_out" {
			t.Errorf("reserve after sold out = %d %s, want 409 sold_out", res.Status, res.Body)
		}
	}
	if got := counting.CountMatching("POST", reservePath); got != 2 {
		t.Errorf("origin saw %d reserves after sold out was cached, want still 2", got)
	}
	// Only the snapshot refresh loop may have talked to origin meanwhile.
	for _, r := range counting.Requests()[before:] {
		if r.Method != "GET" {
			t.Errorf("origin got %s %s while the edge answered sold out, want only snapshot refreshes", r.Method, r.Path)
		}
	}

	// A late shopper's poll says sold out, not yet final: held units may come back.
	res, joined := n.JoinAgainWhileBusy(t, sale, "late-shopper")
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join after sold out (not final) = %d %s, want 202", res.Status, res.Body)
	}
	res, st := n.Status(t, sale, joined.QueueToken)
	if res.Status != fasthttp.StatusOK || st.State != "sold_out" || st.Final == nil || *st.Final || st.AdmissionToken != "" {
		t.Errorf("status after sold out = %d %s, want sold_out with final false and no admission token", res.Status, res.Body)
	}
}

// TestOriginSoldOutRefreshesAtOnce: when the origin answers a reserve
// sold out while this node's snapshot still shows stock, the node fetches
// the snapshot again at once, so the line hears "sold out" within a tick
// rather than at the next period.
func TestOriginSoldOutRefreshesAtOnce(t *testing.T) {
	t.Parallel()
	const sale = "one-left"
	n, counting := newsNode(t, origintest.OpenSale(sale, 1, 600))
	reserve := reserveOf(t, n, sale)
	if res := reserve("first"); res.Status != fasthttp.StatusCreated {
		t.Fatalf("reserve of the last unit = %d %s, want 201", res.Status, res.Body)
	}
	fetches := counting.CountMatching("GET", "/v1/sales/"+sale)
	if res := reserve("second"); res.Status != fasthttp.StatusConflict || res.ErrorCode() != "sold_out" {
		t.Fatalf("reserve after the last unit = %d %s, want the origin's 409 sold_out", res.Status, res.Body)
	}
	testenv.Eventually(t, 5*time.Second, "the snapshot saying sold out", func() bool {
		res := n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
		return res.Status == fasthttp.StatusOK && bytes.Contains(res.Body, []byte(`"sold_out":true`))
	})
	if got := counting.CountMatching("GET", "/v1/sales/"+sale); got <= fetches {
		t.Errorf("snapshot fetches after the origin's sold out = %d, want more than the %d before", got, fetches)
	}
}

// TestSnapshotWatch: a snapshot read with ?at=<second> waits at the edge
// until that second ends, unless the sale has news first — then it is
// answered at once — and names the second to ask for next.
func TestSnapshotWatch(t *testing.T) {
	t.Parallel()
	const sale = "watched"
	n, _ := newsNode(t, origintest.OpenSale(sale, 1, 600))
	watch := func(at int64) *edgetest.Response {
		return n.Do(t, edgetest.Request{Method: "GET", Path: fmt.Sprintf("/v1/sales/%s?at=%d", sale, at)})
	}
	soldOut := func(r *edgetest.Response) bool { return bytes.Contains(r.Body, []byte(`"sold_out":true`)) }

	// No news: held to the end of its second, kept for it, the next named.
	at := time.Now().Unix()
	res := watch(at)
	if done := time.Now(); res.Status != fasthttp.StatusOK || done.Before(time.Unix(at+1, 0)) || soldOut(res) {
		t.Fatalf("watch of second %d = %d %s at %v; want 200, not sold out, not before the second's end", at, res.Status, res.Body, done)
	}
	if got, want := res.Get("Cache-Control"), "public, max-age=2"; got != want {
		t.Errorf("watch's Cache-Control = %q, want %q", got, want)
	}
	if got, want := res.Get("Flashgate-Next-At"), fmt.Sprint(at+1); got != want {
		t.Errorf("watch's Flashgate-Next-At = %q, want %q", got, want)
	}

	// News while held: answered then, not at the second's end.
	at = time.Now().Unix() + 1 // held for one to two seconds
	answered := make(chan *edgetest.Response, 1)
	go func() { answered <- watch(at) }()
	reserve := reserveOf(t, n, sale)
	if r := reserve("first"); r.Status != fasthttp.StatusCreated {
		t.Fatalf("reserve of the last unit = %d %s, want 201", r.Status, r.Body)
	}
	if r := reserve("second"); r.Status != fasthttp.StatusConflict {
		t.Fatalf("reserve after the last unit = %d %s, want 409", r.Status, r.Body)
	}
	res = <-answered
	if done := time.Now(); !soldOut(res) || !done.Before(time.Unix(at+1, 0)) {
		t.Errorf("watch of second %d held across the sell-out = %s at %v; want sold out, before the second's end", at, res.Body, done)
	}

	// Right after the news: the next second's watch is answered at once,
	// since the page's last answer may have been made before it.
	at = time.Now().Unix()
	if res := watch(at); !soldOut(res) || !time.Now().Before(time.Unix(at+1, 0)) {
		t.Errorf("watch of second %d right after the sell-out = %s; want sold out at once", at, res.Body)
	}

	// A page whose clock is ahead is answered at once, kept nowhere (kept,
	// it would be served unheld when that second comes), and told the
	// edge's second; one whose clock is behind, as a plain read.
	asked := time.Now()
	res = watch(asked.Unix() + 3600)
	next, _ := strconv.ParseInt(res.Get("Flashgate-Next-At"), 10, 64)
	if res.Status != fasthttp.StatusOK || res.Get("Cache-Control") != "no-store" || next < asked.Unix()+1 || next > time.Now().Unix()+1 {
		t.Errorf("watch of a second an hour ahead = %d, Cache-Control %q, next %d; want 200, no-store, the edge's next second",
			res.Status, res.Get("Cache-Control"), next)
	}
	if res := watch(asked.Unix() - 3600); res.Get("Cache-Control") != "public, max-age=1, stale-while-revalidate=2" {
		t.Errorf("watch of a second an hour behind: Cache-Control %q, want a plain read's", res.Get("Cache-Control"))
	}
	// A watch of a sale the node does not know is 404, like a plain read.
	if res := n.Do(t, edgetest.Request{Method: "GET", Path: fmt.Sprintf("/v1/sales/no-such-sale?at=%d", time.Now().Unix())}); res.Status != fasthttp.StatusNotFound {
		t.Errorf("watch of an unknown sale = %d %s, want 404", res.Status, res.Body)
	}
	if res := n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale + "?at=soon"}); res.Status != fasthttp.StatusBadRequest || res.ErrorCode() != "invalid_at" {
		t.Errorf("watch with ?at=soon = %d %s, want 400 invalid_at", res.Status, res.Body)
	}
}

// TestSnapshotWatchHoldCap: a node holds as many watches as it may at once;
// one more is answered at once and kept nowhere, its hold being the other's.
func TestSnapshotWatchHoldCap(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "watched-capped"
	o.MustCreateSale(t, origintest.OpenSale(sale, 5, 600))
	cfg := edgetest.Config(edgetest.NewRedis(t), counting.URL)
	cfg.MaxHeldSnapshots = 1
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	at := time.Now().Unix() + 1 // held for one to two seconds
	path := fmt.Sprintf("/v1/sales/%s?at=%d", sale, at)
	held := make(chan *edgetest.Response, 1)
	go func() { held <- n.Do(t, edgetest.Request{Method: "GET", Path: path}) }()
	testenv.Eventually(t, 5*time.Second, "the first watch held", func() bool {
		m := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
		return bytes.Contains(m.Body, []byte("\nflashgate_edge_snapshot_watches_held 1\n"))
	})
	// The second finds no place: answered at once, kept nowhere.
	res := n.Do(t, edgetest.Request{Method: "GET", Path: path})
	if res.Status != fasthttp.StatusOK || res.Get("Cache-Control") != "no-store" || !time.Now().Before(time.Unix(at+1, 0)) {
		t.Errorf("a second watch while one is held = %d, Cache-Control %q, at %v; want 200, no-store, at once", res.Status, res.Get("Cache-Control"), time.Now())
	}
	m := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
	if !bytes.Contains(m.Body, []byte("\nflashgate_edge_snapshot_watches_unheld_total 1\n")) {
		t.Errorf("metrics lack flashgate_edge_snapshot_watches_unheld_total 1")
	}
	if res := <-held; res.Get("Cache-Control") != "public, max-age=2" || time.Now().Before(time.Unix(at+1, 0)) {
		t.Errorf("the held watch = %q at %v; want kept for its second, answered when it ended", res.Get("Cache-Control"), time.Now())
	}
}

// TestSoldOutStampedeRefreshesOnce: a crowd of reserves answered sold out
// by the origin for a SKU the node still shows in stock makes a few
// snapshot fetches, not one each; once the node shows it sold out, none.
func TestSoldOutStampedeRefreshesOnce(t *testing.T) {
	t.Parallel()
	const sale = "two-skus"
	def := origintest.OpenSale(sale, 1, 600)
	def.SKUs = append(def.SKUs, origintest.SKU{SKU: "sku-2", Name: "Case", PriceMinor: 99900, Currency: "INR", Stock: 50})
	n, counting := newsNode(t, def)
	reserve := reserveOf(t, n, sale)
	if r := reserve("first"); r.Status != fasthttp.StatusCreated {
		t.Fatalf("reserve of sku-1's one unit = %d %s, want 201", r.Status, r.Body)
	}
	before := counting.CountMatching("GET", "/v1/sales/"+sale)
	began := time.Now()
	for i := range 200 {
		if r := reserve(fmt.Sprintf("late-%d", i)); r.Status != fasthttp.StatusConflict {
			t.Fatalf("reserve of sku-1 after its last unit = %d %s, want 409", r.Status, r.Body)
		}
	}
	fetches := counting.CountMatching("GET", "/v1/sales/"+sale) - before
	if most := int(time.Since(began)/(100*time.Millisecond)) + 2; fetches < 1 || fetches > most {
		t.Errorf("200 sold-out answers in %v made %d snapshot fetches, want 1 to %d (at most one a tick)", time.Since(began), fetches, most)
	}
}

// newsNode is an edge node in front of a real origin holding sale, whose
// snapshot period is too long to bring news in a test's time: news comes
// from the origin's sold out. counting sees what the node asks the origin.
func newsNode(t *testing.T, sale origintest.Sale) (*edgetest.Node, *edgetest.CountingProxy) {
	t.Helper()
	o, counting := realOrigin(t)
	o.MustCreateSale(t, sale)
	cfg := edgetest.Config(edgetest.NewRedis(t), counting.URL)
	cfg.SnapshotRefresh = 30 * time.Second
	cfg.SnapshotStaleAfter = 2 * time.Minute
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale.SaleID)
	return n, counting
}

// reserveOf reserves a unit of sale's sku-1 through n, for an account of
// its own admission token and idempotency key.
func reserveOf(t *testing.T, n *edgetest.Node, sale string) func(account string) *edgetest.Response {
	return func(account string) *edgetest.Response {
		_, admissionToken := saleTokens(t, sale, account)
		return n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: admissionToken,
			User: edgetest.Owner(t, admissionToken), Body: reserveBody("sku-1", "k-"+account)})
	}
}
