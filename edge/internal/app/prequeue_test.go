package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestPreQueueDraw: against a real origin and two edge nodes, 500
// shoppers join before the start and get pre-queue indexes 1..500; the
// snapshot commits to the draw with the seed's SHA-256 before the start
// and reveals the seed after it; every pre-queue shopper's polled position
// is the published shuffle of their index under that seed — the same on
// both nodes — the positions are exactly 1..500, and everyone who arrives
// after the start is behind all of them.
func TestPreQueueDraw(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	const sale = "prequeue"
	// The lead covers two nodes starting and 500 joins: 4 s was too little
	// for a loaded two-core box under the race detector.
	startsAt := time.Now().UTC().Add(10 * time.Second).Truncate(time.Millisecond)
	def := origintest.OpenSale(sale, 100, 600)
	def.StartsAt, def.EndsAt = startsAt, startsAt.Add(time.Hour)
	o.MustCreateSale(t, def)
	cfg := edgetest.Config(edgetest.NewRedis(t), counting.URL)
	cfg.DefaultRatePerSecond = 5
	a, b := edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)
	a.WaitSale(t, sale)
	b.WaitSale(t, sale)

	_, before := getSnapshot(t, a, sale)
	if before.Status != "upcoming" || len(before.Draw.SeedSHA256) != 64 || before.Draw.Seed != "" {
		t.Fatalf("snapshot before the start = status %q, draw %+v; want upcoming, a seed_sha256 and no seed", before.Status, before.Draw)
	}
	if _, other := getSnapshot(t, b, sale); other.Draw.SeedSHA256 != before.Draw.SeedSHA256 {
		t.Fatalf("nodes publish different commitments %s and %s, want one seed per sale", before.Draw.SeedSHA256, other.Draw.SeedSHA256)
	}

	const pre = 500
	tokens := make([]string, pre)
	var wg sync.WaitGroup
	for w := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < pre; i += 25 {
				n := a
				if i%2 == 1 {
					n = b
				}
				res, ans := n.JoinAgainWhileBusy(t, sale, fmt.Sprintf("early-%03d", i))
				if res.Status != fasthttp.StatusAccepted || !ans.PreQueue || ans.Position != 0 || ans.EstimatedWaitS <= 0 {
					t.Errorf("join early-%03d before the start = %d %s, want 202 in the pre-queue, no position yet, a wait until the start", i, res.Status, res.Body)
				}
				tokens[i] = ans.QueueToken
			}
		}()
	}
	wg.Wait()
	if time.Now().After(startsAt) {
		t.Fatalf("the pre-queue joins took until after the start; give the test more lead time")
	}
	if t.Failed() {
		t.FailNow()
	}
	indexes := make([]int64, pre)
	seen := map[int64]bool{}
	for i, tok := range tokens {
		c := queueClaims(t, tok, sale)
		if !c.Pre || c.Pos < 1 || c.Pos > pre || seen[c.Pos] {
			t.Fatalf("queue token of early-%03d = pre %v, index %d; want a pre-queue index of its own in 1..%d", i, c.Pre, c.Pos, pre)
		}
		seen[c.Pos] = true
		indexes[i] = c.Pos
	}
	if res, st := a.Status(t, sale, tokens[0]); res.Status != fasthttp.StatusOK || st.State != "waiting" || st.Position != 0 || !st.PreQueue {
		t.Errorf("status of a pre-queue shopper before the start = %d %s, want waiting, pre_queue, no position", res.Status, res.Body)
	}

	time.Sleep(time.Until(startsAt))
	after := waitSnapshot(t, a, sale, 5*time.Second, func(s publicSnapshot) bool { return s.Draw.Seed != "" })
	seed, err := hex.DecodeString(after.Draw.Seed)
	sum := sha256.Sum256(seed)
	if err != nil || hex.EncodeToString(sum[:]) != before.Draw.SeedSHA256 {
		t.Fatalf("revealed seed %q hashes to %x, want the commitment %s published before the start", after.Draw.Seed, sum, before.Draw.SeedSHA256)
	}
	if after.Draw.SeedSHA256 != before.Draw.SeedSHA256 || after.Draw.PreQueue != pre || after.Draw.Algorithm != "feistel-sha256-8" {
		t.Errorf("draw after the start = %+v, want the same commitment, pre_queue %d, algorithm feistel-sha256-8", after.Draw, pre)
	}

	const late = 30
	latePositions := map[int64]bool{}
	for i := range late {
		res, ans := b.JoinAgainWhileBusy(t, sale, fmt.Sprintf("late-%02d", i))
		if res.Status != fasthttp.StatusAccepted || ans.PreQueue || ans.Position <= pre {
			t.Fatalf("join late-%02d after the start = %d %s, want 202 with a position behind the %d of the pre-queue", i, res.Status, res.Body, pre)
		}
		latePositions[ans.Position] = true
	}
	for p := int64(pre + 1); p <= pre+late; p++ {
		if !latePositions[p] {
			t.Errorf("no late arrival got position %d, want positions %d..%d", p, pre+1, pre+late)
		}
	}

	draw := line.NewShuffle(seed, pre)
	positions := map[int64]bool{}
	unmoved := 0
	for i, tok := range tokens {
		want, _ := draw.Position(indexes[i])
		for name, n := range map[string]*edgetest.Node{"a": a, "b": b} {
			res, st := n.Status(t, sale, tok)
			if res.Status != fasthttp.StatusOK || st.Position != want {
				t.Fatalf("status of early-%03d (index %d) on node %s = %d %s, want position %d = Shuffle(seed, %d)(%d)",
					i, indexes[i], name, res.Status, res.Body, want, pre, indexes[i])
			}
		}
		if positions[want] {
			t.Fatalf("position %d drawn twice", want)
		}
		positions[want] = true
		if want == indexes[i] {
			unmoved++
		}
	}
	for p := int64(1); p <= pre; p++ {
		if !positions[p] {
			t.Errorf("pre-queue position %d drawn for nobody, want 1..%d", p, pre)
		}
	}
	if unmoved > 20 {
		t.Errorf("%d of %d pre-queue shoppers kept their join order, want a shuffle", unmoved, pre)
	}
}
