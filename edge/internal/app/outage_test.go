package app_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestRedisOutage: when the edge's Redis goes away, joins and status polls
// answer 503 please_wait with Retry-After once the cursor reading is stale,
// while the shop's paths still answer; when Redis is back on the same
// address, joins work again without restarting the edge.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	srv := edgetest.StartRedisServer(t)
	origin := edgetest.NewStubOrigin(t)
	const sale = "outage"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	shop := edgetest.NewShop(t)
	cfg := edgetest.Config(edgetest.NewRedisAt(t, srv.URL), origin.URL)
	cfg.ShopURL = shop.URL
	cfg.StaleAfter = 300 * time.Millisecond
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	res, joined := n.JoinAgainWhileBusy(t, sale, "before")
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join with Redis up = %d %s, want 202", res.Status, res.Body)
	}

	pleaseWait := func(what string, res *edgetest.Response) {
		t.Helper()
		retry, err := strconv.Atoi(res.Get("Retry-After"))
		if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" || err != nil || retry < 1 {
			t.Errorf("%s with Redis down = %d %s (Retry-After %q), want 503 please_wait with Retry-After", what, res.Status, res.Body, res.Get("Retry-After"))
		}
	}
	srv.Stop()
	stopped := time.Now()
	time.Sleep(cfg.StaleAfter + 2*cfg.Tick)
	res, _ = n.Join(t, sale, "during")
	pleaseWait("join", res)
	res, _ = n.Status(t, sale, joined.QueueToken)
	pleaseWait("status", res)
	if _, ok := n.App.Admission.State(sale); !ok {
		t.Errorf("the node forgot the sale's state during the outage")
	}
	res = n.Do(t, edgetest.Request{Method: "GET", Path: "/account/orders?page=2"})
	if res.Status != fasthttp.StatusOK || string(res.Body) != "shop ok" {
		t.Errorf("shop path with Redis down = %d %q, want 200 \"shop ok\"", res.Status, res.Body)
	}
	t.Logf("edge said please_wait %v after Redis stopped", time.Since(stopped))

	srv.Start()
	testenv.Eventually(t, 10*time.Second, "a join after Redis came back answering 202", func() bool {
		res, ans := n.Join(t, sale, "after")
		if res.Status != fasthttp.StatusAccepted {
			return false
		}
		if ans.Position < 1 || ans.QueueToken == "" {
			t.Errorf("join after Redis came back = %s, want a position and a queue token", res.Body)
		}
		return true
	})
	if res, _ := n.Status(t, sale, joined.QueueToken); res.Status != fasthttp.StatusOK {
		t.Errorf("status after Redis came back = %d %s, want 200", res.Status, res.Body)
	}
}
