package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestSaleOnRedisCluster: the edge and the origin on go-redis's cluster
// client, against a local Redis Cluster of three primaries, run two sales
// whose keys land on different nodes: each shopper joins through the edge,
// is admitted and reserves (201), the order writer carries the hold into
// Postgres, and every key of a sale is on the node of its hash tag. Every
// script's keys share one tag per sale ({q:sale} for the line, {s:sale} for
// the stock), so none is refused with CROSSSLOT.
func TestSaleOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := redisserver.StartCluster(ctx, redisserver.ClusterOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Kill)

	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env, origintest.OnRedisCluster(cluster.List()))
	counting := edgetest.NewCountingProxy(t, o.PublicLn.Dial)
	edgePrefix := "te" + testenv.RandomHex(5) + ":"
	cfg := edgetest.Config(&edgetest.Redis{URL: "redis://127.0.0.1/0", Prefix: edgePrefix}, counting.URL)
	cfg.RedisCluster = cluster.List()
	cfg.DefaultRatePerSecond = 1000
	n := edgetest.StartNode(t, cfg)

	// Two sales whose stock lives on different nodes.
	stockNode := func(sale string) *redisserver.Server {
		t.Helper()
		s, err := cluster.NodeOf(ctx, env.Prefix+"{s:"+sale+"}:meta")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var sales []string
	for i := 0; len(sales) < 2 && i < 100; i++ {
		sale := fmt.Sprintf("cluster-%d", i)
		if len(sales) == 0 || stockNode(sale) != stockNode(sales[0]) {
			sales = append(sales, sale)
		}
	}
	if len(sales) < 2 {
		t.Fatalf("no two of 100 sale ids land on different nodes")
	}

	for _, sale := range sales {
		o.MustCreateSale(t, origintest.OpenSale(sale, 2, 600))
		n.WaitSale(t, sale)
		account := "shopper-" + sale
		res, joined := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %s = %d %s, want 202", sale, res.Status, res.Body)
		}
		var admitted edgetest.QueueAnswer
		testenv.Eventually(t, 10*time.Second, "status in "+sale+" admitted", func() bool {
			_, admitted = n.Status(t, sale, joined.QueueToken)
			return admitted.State == "admitted"
		})
		res = n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: admitted.AdmissionToken,
			User: edgetest.Owner(t, admitted.AdmissionToken), Body: reserveBody("sku-1", "idem-"+account)})
		if res.Status != fasthttp.StatusCreated {
			t.Fatalf("reserve in %s through the edge = %d %s, want 201", sale, res.Status, res.Body)
		}

		// The sale's keys are on the node of its tag, the line's on the
		// node of its own.
		node := stockNode(sale)
		rdb := node.Client()
		keys, err := rdb.Keys(ctx, env.Prefix+"{s:"+sale+"}:*").Result()
		rdb.Close()
		if err != nil || len(keys) < 5 {
			t.Errorf("keys of sale %s on its node %s = %v, %v; want its inventory, account, reservation, holds and meta", sale, node.Name, keys, err)
		}
		lineNode, err := cluster.NodeOf(ctx, edgePrefix+"{q:"+sale+"}:cursor")
		if err != nil {
			t.Fatal(err)
		}
		rdb = lineNode.Client()
		cursor, err := rdb.Exists(ctx, edgePrefix+"{q:"+sale+"}:cursor").Result()
		rdb.Close()
		if err != nil || cursor != 1 {
			t.Errorf("the cursor of %s on its node %s: exists %d, %v; want it there", sale, lineNode.Name, cursor, err)
		}
	}

	// The order writer read both sales' streams off their nodes.
	for _, sale := range sales {
		testenv.Eventually(t, 10*time.Second, "ledger of "+sale+" with one hold in Redis and Postgres, no drift", func() bool {
			l := o.Ledger(t, sale)["sku-1"]
			return l.DB.Held == 1 && l.Redis.Held == 1 && l.Drift == (origintest.Counts{})
		})
	}
}
