package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/overview"})
		if err := json.Unmarshal(res.Body, &ov); res.Status != 200 || err != nil {
			t.Fatalf("GET overview = %d %s (%v)", res.Status, res.Body, err)
		}
		if len(ov.Nodes) == 1 && ov.Nodes[0].Ready || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	deadline = time.Now().Add(20 * time.Second)
	for {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/books"})
		if res.Status == fasthttp.StatusServiceUnavailable && res.ErrorCode() == "please_wait" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET books with the origin gone = %d %s, want 503 please_wait", res.Status, res.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
