package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// admission is the edge admin answer.
type admission struct {
	RatePerSecond float64 `json:"rate_per_s"`
	Paused        bool    `json:"paused"`
	NowServing    int64   `json:"now_serving"`
	QueueLength   int64   `json:"queue_length"`
}

func getAdmission(t *testing.T, n *edgetest.Node, sale string) (*edgetest.Response, admission) {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/admission"})
	var a admission
	if res.Status == fasthttp.StatusOK {
		if err := json.Unmarshal(res.Body, &a); err != nil {
			t.Fatalf("admission answer %q: %v", res.Body, err)
		}
	}
	return res, a
}

func putAdmission(t *testing.T, n *edgetest.Node, sale, body string) *edgetest.Response {
	t.Helper()
	return n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission", Body: []byte(body)})
}

// waitAdmission polls a node's admin answer until ok accepts it.
func waitAdmission(t *testing.T, n *edgetest.Node, sale string, within time.Duration, ok func(admission) bool) admission {
	t.Helper()
	var got admission
	testenv.Eventually(t, within, "admission of "+sale+" as expected", func() bool {
		res, a := getAdmission(t, n, sale)
		got = a
		return res.Status == fasthttp.StatusOK && ok(a)
	})
	return got
}

// flushAll empties the test's own Redis server, as a restart without
// persistence or an operator's FLUSHALL would.
func flushAll(t *testing.T, srv *edgetest.RedisServer) {
	t.Helper()
	r := edgetest.NewRedisAt(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL = %v", err)
	}
}

// TestLineSurvivesRedisLoss: a running sale on two edge nodes with a real
// origin — 20 shoppers in the pre-queue, 20 after the start, some admitted
// at a rate set by ops, then paused — and the edge's Redis loses
// everything (FLUSHALL). After the nodes restore the line from the
// origin's durable copy: admission is still paused at the same rate; the
// cursor has not gone back; every shopper admitted before still is; every
// pre-queue shopper has the same drawn position (the same seed and draw
// size); the published seed still matches the commitment made before the
// start, on both nodes and on a node started afterwards; and new joiners,
// and old ones joining again, get places behind every place handed out
// before — none twice.
func TestLineSurvivesRedisLoss(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	srv := edgetest.StartRedisServer(t)
	const sale = "lineloss"
	// Lead time for two nodes to start and take 20 joins before the start,
	// on a busy box under the race detector.
	startsAt := time.Now().UTC().Add(10 * time.Second).Truncate(time.Millisecond)
	def := origintest.OpenSale(sale, 100, 600)
	def.StartsAt, def.EndsAt = startsAt, startsAt.Add(time.Hour)
	o.MustCreateSale(t, def)
	cfg := edgetest.Config(edgetest.NewRedisAt(t, srv.URL), counting.URL)
	cfg.DefaultRatePerSecond = 0.001 // nobody admitted until ops set a rate
	a, b := edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)
	nodes := map[string]*edgetest.Node{"a": a, "b": b}
	a.WaitSale(t, sale)
	b.WaitSale(t, sale)
	_, before := getSnapshot(t, a, sale)
	committed := before.Draw.SeedSHA256
	if len(committed) != 64 {
		t.Fatalf("snapshot before the start = %+v, want a seed commitment", before.Draw)
	}

	const pre, post = 20, 20
	tokens := map[string]string{}
	for i := range pre {
		account := fmt.Sprintf("early-%02d", i)
		res, ans := []*edgetest.Node{a, b}[i%2].JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted || !ans.PreQueue {
			t.Fatalf("join %s before the start = %d %s, want 202 in the pre-queue", account, res.Status, res.Body)
		}
		tokens[account] = ans.QueueToken
	}
	if time.Now().After(startsAt) {
		t.Fatalf("the pre-queue joins took until after the start; give the test more lead time")
	}
	time.Sleep(time.Until(startsAt))
	drawn := waitSnapshot(t, a, sale, 5*time.Second, func(s publicSnapshot) bool { return s.Draw.Seed != "" })
	for i := range post {
		account := fmt.Sprintf("late-%02d", i)
		res, ans := []*edgetest.Node{a, b}[i%2].JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted || ans.Position <= pre {
			t.Fatalf("join %s after the start = %d %s, want 202 behind the pre-queue", account, res.Status, res.Body)
		}
		tokens[account] = ans.QueueToken
	}

	// Ops admit some, then pause.
	if res := putAdmission(t, a, sale, `{"rate_per_s": 10}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT rate 10 = %d %s, want 200", res.Status, res.Body)
	}
	waitAdmission(t, b, sale, 5*time.Second, func(x admission) bool { return x.NowServing >= 8 })
	if res := putAdmission(t, b, sale, `{"paused": true}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT paused = %d %s, want 200", res.Status, res.Body)
	}
	for _, n := range nodes {
		waitAdmission(t, n, sale, 2*time.Second, func(x admission) bool { return x.Paused && x.RatePerSecond == 10 })
	}
	waitTicked(t, sale, a, b) // the last tick before the pause has landed everywhere
	_, held := getAdmission(t, a, sale)

	// What every shopper hears before the loss.
	type heard struct {
		position int64
		state    string
	}
	was := map[string]heard{}
	var maxPosition int64
	admitted := 0
	for account, tok := range tokens {
		res, st := a.Status(t, sale, tok)
		if res.Status != fasthttp.StatusOK {
			t.Fatalf("status of %s before the loss = %d %s", account, res.Status, res.Body)
		}
		was[account] = heard{st.Position, st.State}
		maxPosition = max(maxPosition, st.Position)
		if st.State == "admitted" {
			admitted++
		}
	}
	if admitted < 8 || admitted == pre+post {
		t.Fatalf("%d of %d shoppers admitted before the loss, want some (at least 8), not all", admitted, pre+post)
	}

	flushAll(t, srv)
	// Restored: the counters resume at their ceilings, beyond the 40
	// places handed out, on every node's next reading.
	for name, n := range nodes {
		got := waitAdmission(t, n, sale, 10*time.Second, func(x admission) bool { return x.QueueLength > pre+post })
		if !got.Paused || got.RatePerSecond != 10 || got.NowServing < held.NowServing {
			t.Errorf("node %s after the loss: admission %+v, want still paused at rate 10, now_serving at least %d", name, got, held.NowServing)
		}
	}
	restored, _ := a.App.Admission.State(sale)
	time.Sleep(300 * time.Millisecond)
	if st, _ := a.App.Admission.State(sale); st.NowServing != restored.NowServing {
		t.Errorf("now_serving moved %d -> %d while paused after the restore, want it still", restored.NowServing, st.NowServing)
	}
	if line, err := o.App.Ledger.Line(context.Background(), sale); err != nil || restored.NowServing > line.ServingCeiling ||
		restored.PreQueue > line.PreCeiling || restored.Post > line.PostCeiling {
		t.Errorf("after the restore: state %+v, durable line %+v (%v); want nothing in Redis above its durable ceiling", restored, line, err)
	}

	late := edgetest.StartNode(t, cfg) // knows nothing from before the loss
	late.WaitSale(t, sale)
	nodes["late"] = late
	for name, n := range nodes {
		_, s := getSnapshot(t, n, sale)
		seed, err := hex.DecodeString(s.Draw.Seed)
		sum := sha256.Sum256(seed)
		if err != nil || s.Draw.SeedSHA256 != committed || hex.EncodeToString(sum[:]) != committed || s.Draw.Seed != drawn.Draw.Seed ||
			s.Draw.PreQueue != pre {
			t.Errorf("node %s after the loss publishes draw %+v, want the seed %s committed as %s, pre_queue %d", name, s.Draw, drawn.Draw.Seed, committed, pre)
		}
		for account, tok := range tokens {
			res, st := n.Status(t, sale, tok)
			w := was[account]
			switch {
			case res.Status != fasthttp.StatusOK:
				t.Errorf("node %s: status of %s after the loss = %d %s, want 200", name, account, res.Status, res.Body)
			case st.Position != w.position:
				t.Errorf("node %s: %s is at position %d after the loss, was %d: want the same draw and place", name, account, st.Position, w.position)
			case w.state == "admitted" && st.State != "admitted":
				t.Errorf("node %s: %s was admitted before the loss and now hears %q, want admitted", name, account, st.State)
			}
		}
	}

	// Places after the loss: new joiners and old ones joining again (their
	// Redis record is gone) all come after every place before, once each.
	seen := map[int64]string{}
	for i := range 10 {
		account := fmt.Sprintf("after-%02d", i)
		if i%3 == 0 {
			account = fmt.Sprintf("late-%02d", i) // an old shopper joining again
		}
		n := []*edgetest.Node{a, b, late}[i%3]
		res, ans := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted || ans.Position <= maxPosition {
			t.Errorf("join %s after the loss = %d %s, want 202 with a position after every earlier place (%d)", account, res.Status, res.Body, maxPosition)
		}
		if other, dup := seen[ans.Position]; dup {
			t.Errorf("position %d given to %s and %s after the loss", ans.Position, other, account)
		}
		seen[ans.Position] = account
	}
}

// TestLineLostWhileOriginDown: while the origin cannot be reached, an admin
// PUT answers 503 and changes nothing anywhere; joins stop exactly at the
// durable ceiling (503 beyond it, never a place past it); and once Redis
// has lost the line, joins and status polls answer 503 please_wait with
// Retry-After — never a place from zero — until the origin is back and the
// line is restored, after which places resume behind every earlier one.
func TestLineLostWhileOriginDown(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "origindown"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	srv := edgetest.StartRedisServer(t)
	r := edgetest.NewRedisAt(t, srv.URL)
	cfg := edgetest.Config(r, origin.URL)
	cfg.DefaultRatePerSecond = 0.001
	cfg.LineMinBlock = 16
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	res, first := n.JoinAgainWhileBusy(t, sale, "first")
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join = %d %s, want 202", res.Status, res.Body)
	}

	pleaseWait := func(what string, res *edgetest.Response) {
		t.Helper()
		retry, err := strconv.Atoi(res.Get("Retry-After"))
		if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" || err != nil || retry < 1 {
			t.Errorf("%s = %d %s (Retry-After %q), want 503 please_wait with Retry-After", what, res.Status, res.Body, res.Get("Retry-After"))
		}
	}

	origin.SetLinesDown(true)
	pleaseWait("PUT paused with the origin down", putAdmission(t, n, sale, `{"paused": true, "rate_per_s": 7}`))
	waitTicked(t, sale, n)
	if _, got := getAdmission(t, n, sale); got.Paused || got.RatePerSecond != 0.001 {
		t.Errorf("admission after a refused PUT = %+v, want unchanged (running at 0.001)", got)
	}
	if l, _ := origin.Line(sale); l.Paused || l.RatePerSecond != 0.001 || l.SettingsVersion != 0 {
		t.Errorf("durable line after a refused PUT = %+v, want unchanged", l)
	}

	// Joins fill up to the durable ceiling and no further.
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	l, _ := origin.Line(sale)
	// At once: a join at the ceiling waits up to a second for a raise
	// that cannot come.
	var placed, waited atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _ := n.Join(t, sale, fmt.Sprintf("fill-%02d", i))
			switch res.Status {
			case fasthttp.StatusAccepted:
				placed.Add(1)
			case fasthttp.StatusServiceUnavailable:
				waited.Add(1)
			default:
				t.Errorf("join fill-%02d with the origin down = %d %s, want 202 or 503", i, res.Status, res.Body)
			}
		}()
	}
	wg.Wait()
	postCount, _ := r.Client.Get(ctx, keys.Post(sale)).Int64()
	if l2, _ := origin.Line(sale); postCount != l.PostCeiling || l2.PostCeiling != l.PostCeiling || waited.Load() == 0 || placed.Load()+1 != l.PostCeiling {
		t.Errorf("40 joins with the origin down: %d placed, %d waited, post counter %d; durable post ceiling %d then %d: want places up to the ceiling exactly, the rest please_wait",
			placed.Load(), waited.Load(), postCount, l.PostCeiling, l2.PostCeiling)
	}

	flushAll(t, srv)
	waitTicked(t, sale, n)
	for range 2 {
		res, _ := n.Join(t, sale, "during")
		pleaseWait("join after the loss, origin down", res)
		res, _ = n.Status(t, sale, first.QueueToken)
		pleaseWait("status after the loss, origin down", res)
		time.Sleep(100 * time.Millisecond)
	}
	// The roster's beat (the nodes hash) comes back each second: it is no
	// part of the line.
	keysLeft, _ := r.Client.Keys(ctx, r.Prefix+"*").Result()
	keysLeft = slices.DeleteFunc(keysLeft, func(k string) bool { return k == r.Prefix+"nodes" })
	if len(keysLeft) != 0 {
		t.Errorf("Redis holds %v after the loss with the origin down, want nothing of the line started from zero", keysLeft)
	}

	origin.SetLinesDown(false)
	testenv.Eventually(t, 10*time.Second, "a join after the origin came back answering 202", func() bool {
		res, ans := n.Join(t, sale, "after")
		if res.Status != fasthttp.StatusAccepted {
			return false
		}
		if ans.Position <= l.PostCeiling {
			t.Errorf("first join after the restore = position %d, want after every place before (the ceiling %d)", ans.Position, l.PostCeiling)
		}
		return true
	})
	if res, st := n.Status(t, sale, first.QueueToken); res.Status != fasthttp.StatusOK || st.Position != first.Position {
		t.Errorf("status of the first shopper after the restore = %d %s, want 200 at position %d", res.Status, res.Body, first.Position)
	}
	if res := putAdmission(t, n, sale, `{"paused": true, "rate_per_s": 7}`); res.Status != fasthttp.StatusOK {
		t.Errorf("PUT paused with the origin back = %d %s, want 200", res.Status, res.Body)
	}
	if l, _ := origin.Line(sale); !l.Paused || l.RatePerSecond != 7 {
		t.Errorf("durable line after the PUT = %+v, want paused at 7", l)
	}
}
