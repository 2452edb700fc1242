package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// saleNode starts a node on a stub origin that lists one open sale of 10
// units, its Config changed by tune (nil: as edgetest.Config makes it),
// and waits until the node serves the sale.
func saleNode(t *testing.T, sale string, tune func(*app.Config)) *edgetest.Node {
	t.Helper()
	origin := edgetest.NewStubOrigin(t)
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	if tune != nil {
		tune(&cfg)
	}
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	return n
}

// realOrigin starts a real origin on its own Redis prefix and Postgres
// schema, with a counting proxy on a 127.0.0.1 port in front of its public
// listener for the edge to dial.
func realOrigin(t *testing.T) (*origintest.Origin, *edgetest.CountingProxy) {
	t.Helper()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	return o, edgetest.NewCountingProxy(t, o.PublicLn.Dial)
}

// publicSnapshot is the edge's sale snapshot.
type publicSnapshot struct {
	SaleID      string    `json:"sale_id"`
	Status      string    `json:"status"`
	StartsAt    time.Time `json:"starts_at"`
	NowServing  int64     `json:"now_serving"`
	QueueLength int64     `json:"queue_length"`
	SoldOut     bool      `json:"sold_out"`
	Final       bool      `json:"final"`
	SKUs        []struct {
		SKU           string `json:"sku"`
		AvailableHint int64  `json:"available_hint"`
	} `json:"skus"`
	Draw struct {
		SeedSHA256 string `json:"seed_sha256"`
		Seed       string `json:"seed"`
		PreQueue   int64  `json:"pre_queue"`
		Algorithm  string `json:"algorithm"`
	} `json:"draw"`
}

func getSnapshot(t *testing.T, n *edgetest.Node, sale string) (*edgetest.Response, publicSnapshot) {
	t.Helper()
	res := n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
	var s publicSnapshot
	if res.Status == fasthttp.StatusOK {
		if err := json.Unmarshal(res.Body, &s); err != nil {
			t.Fatalf("snapshot %q: %v", res.Body, err)
		}
	}
	return res, s
}

// waitSnapshot polls the node's snapshot of sale until ok accepts it.
func waitSnapshot(t *testing.T, n *edgetest.Node, sale string, within time.Duration, ok func(publicSnapshot) bool) publicSnapshot {
	t.Helper()
	var got publicSnapshot
	testenv.Eventually(t, within, "snapshot of "+sale+" as expected", func() bool {
		res, s := getSnapshot(t, n, sale)
		got = s
		return res.Status == fasthttp.StatusOK && ok(s)
	})
	return got
}

// waitTicked waits until each node has finished a tick that read sale's
// line after the call began: whatever the line held then (a pause, a loss,
// a refused change) is in the node's reading.
func waitTicked(t *testing.T, sale string, nodes ...*edgetest.Node) {
	t.Helper()
	since := time.Now()
	for _, n := range nodes {
		// The first reading after since may come from a tick under way at
		// since; the one after it, from a tick begun later.
		var first time.Time
		testenv.Eventually(t, 5*time.Second, "a tick reading the line of "+sale, func() bool {
			st, _ := n.App.Admission.State(sale)
			if first.IsZero() {
				if st.ReadAt.After(since) {
					first = st.ReadAt
				}
				return false
			}
			return st.ReadAt.After(first)
		})
	}
}

// verifier checks queue and admission tokens with the keys the test nodes use.
var verifier = tokens.NewVerifier(tokenstest.KeySet(), tokens.VerifierOptions{})

// issuer signs tokens as a test node would.
var issuer = tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{})

func queueClaims(t *testing.T, token, sale string) tokens.QueueClaims {
	t.Helper()
	c, err := verifier.Queue(token, sale)
	if err != nil {
		t.Fatalf("queue token %q: %v", token, err)
	}
	return c
}

// settle runs the node's tick by hand until its line keeper has done all
// the sale needs for now — restored the line, read the seed, sealed the
// draw once started — and starts nothing more: where the node's own loops
// get within a few ticks.
func settle(t *testing.T, ctx context.Context, n *edgetest.Node, sale string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "the line of "+sale+" settling", func() bool {
		if !n.App.Line.Idle() {
			return false // what the last tick started is still under way
		}
		if err := n.App.Admission.Tick(ctx); err != nil {
			t.Fatalf("Tick = %v", err)
		}
		st, ok := n.App.Admission.State(sale)
		_, seeded := n.App.Line.Seed(sale)
		snap, _ := n.App.Snapshots.Get(sale)
		return ok && !st.Lost && seeded && (st.Drawn || st.RedisNow.Before(snap.StartsAt)) && n.App.Line.Idle()
	})
}

// joinWaiting joins account through the node's line keeper, as the join
// endpoint does, asking again while the line stays at its durable ceiling
// (the node raises it meanwhile), as a shopper told please_wait would.
func joinWaiting(ctx context.Context, n *edgetest.Node, sale string, startsAt time.Time, account string) (line.Place, error) {
	for {
		p, err := n.App.Line.Join(ctx, sale, startsAt, account)
		if !errors.Is(err, line.ErrWait) || ctx.Err() != nil {
			return p, err
		}
	}
}

// fillLine joins accounts a0 … a<n-1> through the nodes' Joiners, in
// turn, from 50 goroutines at once, and stops the test if any join fails.
func fillLine(t *testing.T, ctx context.Context, nodes []*edgetest.Node, sale string, startsAt time.Time, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 50 {
				if _, err := joinWaiting(ctx, nodes[i%len(nodes)], sale, startsAt, fmt.Sprintf("a%d", i)); err != nil {
					t.Errorf("Join(a%d) = %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func reserveBody(sku, key string) []byte {
	b, _ := json.Marshal(map[string]string{"sku": sku, "idempotency_key": key})
	return b
}
