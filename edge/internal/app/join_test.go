package app_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// TestHTTPJoinsUniqueAndIdempotent: 400 shoppers join at once over HTTP,
// spread over two edge nodes, after the start: their positions are exactly
// 1..400, each queue token names its shopper's position, and joining again
// — on either node — answers the same position. A join the edge answers
// 503 please_wait (its Redis budget spent on a loaded machine) is sent
// again, as the page does (without the page's wait: the answer took the
// budget already).
func TestHTTPJoinsUniqueAndIdempotent(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "joins"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.DefaultRatePerSecond = 0.001 // keep everyone waiting
	nodes := []*edgetest.Node{edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)}
	for _, n := range nodes {
		n.WaitSale(t, sale)
	}

	const shoppers = 400
	positions := make([]int64, shoppers)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			account := fmt.Sprintf("shopper-%03d", i)
			res, ans := nodes[i%2].JoinAgainWhileBusy(t, sale, account)
			if res.Status != fasthttp.StatusAccepted {
				t.Errorf("join %s = %d %s, want 202", account, res.Status, res.Body)
				return
			}
			if c, err := verifier.Queue(ans.QueueToken, sale); err != nil || c.Subject != account || c.Pos != ans.Position || c.Pre {
				t.Errorf("queue token of %s = %+v, %v; want sub %s, pos %d, not pre", account, c, err, account, ans.Position)
			}
			positions[i] = ans.Position
		}()
	}
	close(gate)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	owner := map[int64]int{}
	for i, p := range positions {
		if j, dup := owner[p]; dup {
			t.Errorf("position %d given to shopper-%03d and shopper-%03d", p, j, i)
		}
		owner[p] = i
	}
	for p := int64(1); p <= shoppers; p++ {
		if _, ok := owner[p]; !ok {
			t.Errorf("position %d given to nobody, want 1..%d", p, shoppers)
		}
	}

	for i := 0; i < shoppers; i += 37 {
		account := fmt.Sprintf("shopper-%03d", i)
		for k, n := range nodes {
			res, ans := n.JoinAgainWhileBusy(t, sale, account)
			if res.Status != fasthttp.StatusAccepted || ans.Position != positions[i] {
				t.Errorf("join %s again on node %d = %d %s, want 202 with its position %d", account, k, res.Status, res.Body, positions[i])
			}
		}
	}
	if res, ans := nodes[0].Join(t, sale, "newcomer"); ans.Position != shoppers+1 {
		t.Errorf("join newcomer = %d %s, want position %d", res.Status, res.Body, shoppers+1)
	}
}
