package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// The ops dashboard's routes on a real edge and origin: the page and its
// files need no token (they hold nothing), every read does; the overview
// shows the sale with its admission and this node's state; a change made
// through the admin route is kept by the origin with who made it (the
// token's fingerprint, never the token, the address and the operator's
// name) and read back newest first; the books are the origin's ledger.
func TestOpsRoutes(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "opsroutes"
	o.MustCreateSale(t, origintest.OpenSale(sale, 25, 600))
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), counting.URL))
	n.WaitSale(t, sale)

	for path, want := range map[string]string{
		"/admin/dashboard":               "text/html",
		"/admin/dashboard/dashboard.js":  "text/javascript",
		"/admin/dashboard/dashboard.css": "text/css",
	} {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: path, Token: "-"})
		if res.Status != 200 || !strings.HasPrefix(res.Get("Content-Type"), want) || len(res.Body) == 0 ||
			!strings.Contains(res.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("GET %s without the token = %d %q %q (%d bytes), want 200 %s with a CSP", path, res.Status,
				res.Get("Content-Type"), res.Get("Content-Security-Policy"), len(res.Body), want)
		}
	}
	for _, path := range []string{"/admin/overview", "/admin/sales/" + sale + "/changes", "/admin/sales/" + sale + "/books", "/admin/dashboard/nope.js"} {
		if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: path, Token: "-"}); res.Status != fasthttp.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token = %d, want 401", path, res.Status)
		}
	}

	var ov struct {
		Node struct {
			Ready, OriginOK, RedisOK bool
		} `json:"node"`
		Sales []struct {
			SaleID    string `json:"sale_id"`
			Available int64  `json:"available"`
			Current   bool   `json:"current"`
			Fresh     bool   `json:"fresh"`
			Admission *struct {
				RatePerSecond float64 `json:"rate_per_s"`
				Paused        bool    `json:"paused"`
			} `json:"admission"`
		} `json:"sales"`
		Counters map[string]float64 `json:"counters"`
		Nodes    []struct {
			ID    string `json:"id"`
			This  bool   `json:"this"`
			Ready bool   `json:"ready"`
		} `json:"nodes"`
	}
	// The roster says ready from the node's first beat after it became
	// ready (a beat a second).
	testenv.Eventually(t, 10*time.Second, "the overview listing this node ready", func() bool {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/overview"})
		if err := json.Unmarshal(res.Body, &ov); res.Status != 200 || err != nil {
			t.Fatalf("GET overview = %d %s (%v)", res.Status, res.Body, err)
		}
		return len(ov.Nodes) == 1 && ov.Nodes[0].Ready
	})
	if len(ov.Sales) != 1 || ov.Sales[0].SaleID != sale || ov.Sales[0].Available != 25 || !ov.Sales[0].Current ||
		!ov.Sales[0].Fresh || ov.Sales[0].Admission == nil || ov.Sales[0].Admission.Paused {
		t.Errorf("overview sales = %+v, want %s with 25 available, running", ov.Sales, sale)
	}
	if len(ov.Nodes) != 1 || !ov.Nodes[0].This || !ov.Nodes[0].Ready || ov.Nodes[0].ID != n.App.Roster.ID() {
		t.Errorf("overview nodes = %+v, want this node (%s), ready", ov.Nodes, n.App.Roster.ID())
	}
	if _, ok := ov.Counters["joins_total"]; !ok {
		t.Errorf("overview counters = %v, want joins_total among them", ov.Counters)
	}

	res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission",
		Body: []byte(`{"rate_per_s": 7}`), Header: map[string]string{"X-Operator": "priya"}})
	if res.Status != 200 {
		t.Fatalf("PUT admission = %d %s", res.Status, res.Body)
	}
	if res := putAdmission(t, n, sale, `{"paused": true}`); res.Status != 200 {
		t.Fatalf("PUT paused = %d %s", res.Status, res.Body)
	}
	if res := putAdmission(t, n, sale, `{"paused": true, "actor": "mallory"}`); res.Status != fasthttp.StatusBadRequest {
		t.Errorf("PUT admission naming its own actor = %d %s, want 400 (the edge names who)", res.Status, res.Body)
	}
	var changes struct {
		Changes []struct {
			Actor  string `json:"actor"`
			Before struct {
				Rate   float64 `json:"rate_per_s"`
				Paused bool    `json:"paused"`
			} `json:"before"`
			After struct {
				Rate   float64 `json:"rate_per_s"`
				Paused bool    `json:"paused"`
			} `json:"after"`
		} `json:"changes"`
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/changes"})
	if err := json.Unmarshal(res.Body, &changes); res.Status != 200 || err != nil || len(changes.Changes) != 2 {
		t.Fatalf("GET changes = %d %s (%v), want the two changes", res.Status, res.Body, err)
	}
	pause, rate := changes.Changes[0], changes.Changes[1]
	if !strings.HasPrefix(rate.Actor, "admin token ") || !strings.HasSuffix(rate.Actor, " (priya)") ||
		strings.Contains(rate.Actor, edgetest.AdminToken) || rate.After.Rate != 7 || rate.Before.Rate == 7 {
		t.Errorf("rate change = %+v, want the token's fingerprint, the operator, and the rate before and after", rate)
	}
	if strings.Contains(pause.Actor, "(") || !pause.After.Paused || pause.Before.Paused || pause.Before.Rate != 7 {
		t.Errorf("pause change = %+v, want no operator named, paused after", pause)
	}

	var books struct {
		SKUs []struct {
			Total int64 `json:"total"`
			Redis struct {
				Available int64 `json:"available"`
			} `json:"redis"`
		} `json:"skus"`
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/books"})
	if err := json.Unmarshal(res.Body, &books); res.Status != 200 || err != nil || len(books.SKUs) != 1 || books.SKUs[0].Total != 25 {
		t.Errorf("GET books = %d %s (%v), want one SKU of 25", res.Status, res.Body, err)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/no-such-sale/books"}); res.Status != fasthttp.StatusNotFound {
		t.Errorf("GET books of an unknown sale = %d %s, want 404", res.Status, res.Body)
	}

	// The origin gone: the reads the origin answers are please_wait, the
	// overview still answers (from what this node knows), saying so soon.
	o.Stop()
	testenv.Eventually(t, 20*time.Second, "GET books with the origin gone answering 503 please_wait", func() bool {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/books"})
		return res.Status == fasthttp.StatusServiceUnavailable && res.ErrorCode() == "please_wait"
	})
	res = n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/overview"})
	if err := json.Unmarshal(res.Body, &ov); res.Status != 200 || err != nil || len(ov.Sales) != 1 {
		t.Errorf("GET overview with the origin gone = %d %s (%v), want 200 with the sale", res.Status, res.Body, err)
	}
}

// Autotune switched on through the edge's admin route, with its bounds,
// shows in the admission answer and the overview; bounds that do not make
// sense are refused at the edge; a rate set by hand switches it off.
func TestAutotuneThroughTheEdge(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "autotuneedge"
	o.MustCreateSale(t, origintest.OpenSale(sale, 25, 600))
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), counting.URL))
	n.WaitSale(t, sale)
	for _, body := range []string{`{"autotune": true}`, `{"autotune": true, "autotune_min_rate_per_s": 5}`,
		`{"autotune": true, "autotune_min_rate_per_s": 50, "autotune_max_rate_per_s": 5}`} {
		if res := putAdmission(t, n, sale, body); res.Status != fasthttp.StatusBadRequest || res.ErrorCode() != "invalid_autotune" {
			t.Errorf("PUT %s = %d %s, want 400 invalid_autotune", body, res.Status, res.Body)
		}
	}
	type answer struct {
		RatePerSecond float64 `json:"rate_per_s"`
		Autotune      *struct {
			On      bool    `json:"on"`
			MinRate float64 `json:"min_rate_per_s"`
			MaxRate float64 `json:"max_rate_per_s"`
		} `json:"autotune"`
	}
	res := putAdmission(t, n, sale, `{"autotune": true, "autotune_min_rate_per_s": 20, "autotune_max_rate_per_s": 400}`)
	var a answer
	if err := json.Unmarshal(res.Body, &a); res.Status != 200 || err != nil || a.Autotune == nil || !a.Autotune.On ||
		a.Autotune.MinRate != 20 || a.Autotune.MaxRate != 400 {
		t.Fatalf("PUT autotune on = %d %s (%v), want it on, 20 to 400", res.Status, res.Body, err)
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/admission"})
	if err := json.Unmarshal(res.Body, &a); err != nil || a.Autotune == nil || !a.Autotune.On {
		t.Errorf("GET admission = %s, want autotune on", res.Body)
	}
	res = putAdmission(t, n, sale, `{"rate_per_s": 33}`)
	a = answer{}
	if err := json.Unmarshal(res.Body, &a); res.Status != 200 || err != nil || a.Autotune == nil || a.Autotune.On || a.RatePerSecond != 33 {
		t.Errorf("PUT rate by hand = %d %s, want 33 with autotune off", res.Status, res.Body)
	}
}

// overviewSale and overviewReserves are the parts of GET /admin/overview
// the reserve and rebuild test reads.
type overviewSale struct {
	SaleID     string     `json:"sale_id"`
	Rebuilding bool       `json:"rebuilding"`
	RestoredAt *time.Time `json:"restored_at"`
}

type overviewReserves struct {
	Answers map[string]uint64 `json:"answers"`
	Origin  map[string]uint64 `json:"origin"`
	Latency *struct {
		WindowS float64  `json:"window_s"`
		Count   uint64   `json:"count"`
		P50S    *float64 `json:"p50_s"`
		P99S    *float64 `json:"p99_s"`
	} `json:"latency"`
}

type reserveOverview struct {
	Sales    []overviewSale     `json:"sales"`
	Counters map[string]float64 `json:"counters"`
	Reserves overviewReserves   `json:"reserves"`
}

func getOverview(t *testing.T, n *edgetest.Node) reserveOverview {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/overview"})
	var ov reserveOverview
	if err := json.Unmarshal(res.Body, &ov); res.Status != 200 || err != nil {
		t.Fatalf("GET overview = %d %s (%v)", res.Status, res.Body, err)
	}
	return ov
}

// waitOverviewSale polls the overview until ok accepts the sale in it.
func waitOverviewSale(t *testing.T, n *edgetest.Node, sale, what string, within time.Duration, ok func(overviewSale) bool) reserveOverview {
	t.Helper()
	var ov reserveOverview
	testenv.Eventually(t, within, "overview with "+what, func() bool {
		ov = getOverview(t, n)
		for _, s := range ov.Sales {
			if s.SaleID == sale && ok(s) {
				return true
			}
		}
		return false
	})
	return ov
}

// The overview counts the reserves this edge answered, by status, and the
// ones it sent on to the origin, with the origin's answer time, as a test
// drives them through a real edge and origin: a refused token, two units
// reserved, a repeat, and sold-out answers from the edge's snapshot. Then
// the sale's line keys are deleted from Redis, and with the origin's copy
// held back the overview says the line is being rebuilt; let through, the
// line is restored and the overview says when.
func TestOverviewReservesAndRebuild(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "opsreserves"
	o.MustCreateSale(t, origintest.OpenSale(sale, 2, 600))
	r := edgetest.NewRedis(t)
	cfg := edgetest.Config(r, counting.URL)
	cfg.DefaultRatePerSecond = 1000
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	reservePath := "/v1/sales/" + sale + "/reserve"

	first := getOverview(t, n)
	if first.Reserves.Latency != nil || len(first.Reserves.Answers) != 0 {
		t.Errorf("first overview's reserves = %+v, want no answers and no latency yet (nothing to measure from)", first.Reserves)
	}
	restoresBefore := first.Counters["line_restores_total"]

	// Every reserve the origin answers takes 30 ms or more: its
	// quantiles are known to within a bucket.
	const originDelay = 30 * time.Millisecond
	counting.Delay(reservePath, originDelay)
	if res := n.Do(t, edgetest.Request{Method: "POST", Path: reservePath, Token: "not-a-token", Body: reserveBody("sku-1", "idem-x")}); res.Status != fasthttp.StatusUnauthorized {
		t.Fatalf("reserve with a bad token = %d %s, want 401", res.Status, res.Body)
	}
	reserve := func(token, key string, want int) {
		t.Helper()
		res := n.Do(t, edgetest.Request{Method: "POST", Path: reservePath, Token: token, User: edgetest.Owner(t, token),
			Body: reserveBody("sku-1", key)})
		if res.Status != want {
			t.Fatalf("reserve %s = %d %s, want %d", key, res.Status, res.Body, want)
		}
	}
	buyer0 := n.Admit(t, sale, "buyer-0", 5*time.Second)
	reserve(buyer0, "idem-0", fasthttp.StatusCreated)
	reserve(buyer0, "idem-0", fasthttp.StatusOK) // the same key: the same reservation again
	reserve(n.Admit(t, sale, "buyer-1", 5*time.Second), "idem-1", fasthttp.StatusCreated)
	waitSnapshot(t, n, sale, 5*time.Second, func(s publicSnapshot) bool { return s.SoldOut })
	late, _, err := issuer.Admission(sale, "late-shopper", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res := n.Do(t, edgetest.Request{Method: "POST", Path: reservePath, Token: late, Body: reserveBody("sku-1", fmt.Sprint("late-", i))})
		if res.Status != fasthttp.StatusConflict || res.ErrorCode() != "sold_out" {
			t.Fatalf("reserve after sold out = %d %s, want 409 sold_out", res.Status, res.Body)
		}
	}
	forwarded := uint64(counting.CountMatching("POST", reservePath))
	if forwarded != 3 {
		t.Fatalf("origin saw %d reserves, want 3 (two reserved, one repeat)", forwarded)
	}

	ov := getOverview(t, n)
	wantAnswers := map[string]uint64{"401": 1, "201": 2, "200": 1, "409": 3}
	if !maps.Equal(ov.Reserves.Answers, wantAnswers) {
		t.Errorf("overview reserve answers = %v, want %v", ov.Reserves.Answers, wantAnswers)
	}
	// The edge's own answers among them, as the counters name them.
	if got := ov.Counters; got["rejections.sold_out"] != 3 || got["rejections.invalid_token"] != 1 {
		t.Errorf("overview counters = %v, want rejections.sold_out 3 and rejections.invalid_token 1", got)
	}
	if want := map[string]uint64{"ok": forwarded}; !maps.Equal(ov.Reserves.Origin, want) {
		t.Errorf("overview reserves sent to the origin = %v, want %v", ov.Reserves.Origin, want)
	}
	l := ov.Reserves.Latency
	switch {
	case l == nil || l.Count != forwarded || l.P50S == nil || l.P99S == nil:
		t.Errorf("overview origin latency = %+v, want the %d answers since the first overview", l, forwarded)
	case *l.P50S < originDelay.Seconds()-0.005 || *l.P50S > *l.P99S || *l.P99S > 5 || l.WindowS <= 0:
		t.Errorf("overview origin latency = p50 %v s, p99 %v s over %v s, want p50 at least %v, p99 no less and at most 5 s",
			*l.P50S, *l.P99S, l.WindowS, originDelay.Seconds())
	}
	counting.Delay(reservePath, 0)

	// Redis loses the line, and the origin's copy is held back: the
	// restore cannot finish (it gives up after the line keeper's timeout
	// and tries again each tick).
	linePath := "/v1/lines/" + sale
	counting.Delay(linePath, time.Minute)
	keys := line.NewKeys(r.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lostAt := time.Now()
	if err := r.Client.Del(ctx, keys.Pre(sale), keys.Post(sale), keys.Places(sale), keys.Seed(sale), keys.Cursor(sale),
		keys.Steps(sale), keys.Line(sale)).Err(); err != nil {
		t.Fatalf("delete the line's keys: %v", err)
	}
	held := waitOverviewSale(t, n, sale, "the line rebuilding, never restored before", 5*time.Second, func(s overviewSale) bool {
		return s.Rebuilding && s.RestoredAt == nil
	})
	// Rebuilding shows before the first restore is sent: hold the copy
	// back until one restore has timed out, or it may never be tried
	// while held.
	failedBefore := held.Counters["line_failures.restore"]
	testenv.Eventually(t, 15*time.Second, "a restore timing out while the origin's copy is held back", func() bool {
		return getOverview(t, n).Counters["line_failures.restore"] > failedBefore
	})
	counting.Delay(linePath, 0)
	ov = waitOverviewSale(t, n, sale, "the line restored, with its time", 15*time.Second, func(s overviewSale) bool {
		return !s.Rebuilding && s.RestoredAt != nil
	})
	for _, s := range ov.Sales {
		if s.SaleID == sale && (s.RestoredAt.Before(lostAt.Add(-time.Second)) || s.RestoredAt.After(time.Now().Add(time.Second))) {
			t.Errorf("overview restored_at = %v, want after the keys were deleted (%v) and before now", s.RestoredAt, lostAt)
		}
	}
	// The keeper counts a restore just after Redis has it, so an overview
	// may show the restored line a moment before the count.
	testenv.Eventually(t, 5*time.Second, "line_restores_total counting the restore", func() bool {
		ov = getOverview(t, n)
		return ov.Counters["line_restores_total"] > restoresBefore
	})
	if got := ov.Counters["line_restores_total"]; got != restoresBefore+1 {
		t.Errorf("overview line_restores_total = %v, want %v: the one restore", got, restoresBefore+1)
	}
	if got := ov.Counters["line_failures.restore"]; got < 1 {
		t.Errorf("overview line_failures.restore = %v, want the restores that timed out while the origin's copy was held back", got)
	}
}
