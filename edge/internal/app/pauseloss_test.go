package app_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// TestPauseAndRateHoldWhenRedisLosesTheLine: what shoppers hear on two edge
// nodes while their Redis loses the line, again and again: emptied
// (FLUSHALL), and killed and started from a snapshot saved before ops
// changed anything (a restart from an older file, in a new Redis history).
// One sale was paused before 30 shoppers joined: none of them is ever
// admitted, on either node, and its cursor stays at 0. Another, lowered
// from 100/s to 1/s before 60 joined, admits at 1/s throughout: each loss
// admits at most its serving block (2 positions) early. Each loss leaves
// at most one join block of places to nobody.
func TestPauseAndRateHoldWhenRedisLosesTheLine(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	srv := edgetest.StartRedisServer(t)
	const paused, slow = "pauseloss", "slowloss"
	for _, sale := range []string{paused, slow} {
		o.MustCreateSale(t, origintest.OpenSale(sale, 100, 600))
	}
	cfg := edgetest.Config(edgetest.NewRedisAt(t, srv.URL), counting.URL)
	cfg.DefaultRatePerSecond = 100
	a, b := edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)
	nodes := []*edgetest.Node{a, b}
	for _, n := range nodes {
		n.WaitSale(t, paused)
		n.WaitSale(t, slow)
	}
	for _, sale := range []string{paused, slow} {
		waitAdmission(t, a, sale, 5*time.Second, func(x admission) bool { return x.RatePerSecond == 100 })
	}
	// The snapshot a restart will load: both sales running at 100/s, their
	// serving ceilings two seconds of that ahead.
	saved := edgetest.NewRedisAt(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := saved.Client.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE = %v", err)
	}

	if res := putAdmission(t, a, paused, `{"paused": true}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT paused = %d %s, want 200", res.Status, res.Body)
	}
	if res := putAdmission(t, b, slow, `{"rate_per_s": 1}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT rate 1 = %d %s, want 200", res.Status, res.Body)
	}
	slowSince := time.Now()
	join := func(sale, prefix string, count int) []string {
		t.Helper()
		var tokens []string
		for i := range count {
			res, ans := nodes[i%2].JoinAgainWhileBusy(t, sale, fmt.Sprintf("%s-%02d", prefix, i))
			if res.Status != fasthttp.StatusAccepted {
				t.Fatalf("join %s-%02d = %d %s, want 202", prefix, i, res.Status, res.Body)
			}
			tokens = append(tokens, ans.QueueToken)
		}
		return tokens
	}
	waiting, slowLine := join(paused, "p", 30), join(slow, "s", 60)

	// admitted asks every shopper's status on both nodes and counts those
	// either node calls admitted; a node still restoring answers
	// please_wait, and is asked again.
	admitted := func(sale string, tokens []string) int {
		t.Helper()
		count := 0
		for _, tok := range tokens {
			in := false
			for _, n := range nodes {
				testenv.Eventually(t, 10*time.Second, "status on "+sale+" after a loss answering 200", func() bool {
					res, st := n.Status(t, sale, tok)
					in = in || res.Status == fasthttp.StatusOK && st.State == "admitted"
					return res.Status == fasthttp.StatusOK
				})
			}
			if in {
				count++
			}
		}
		return count
	}
	losses := 0
	check := func(what string) {
		t.Helper()
		for _, n := range nodes {
			waitAdmission(t, n, paused, 10*time.Second, func(x admission) bool { return x.QueueLength >= 30 && x.Paused })
			waitAdmission(t, n, slow, 10*time.Second, func(x admission) bool { return x.QueueLength >= 60 && x.RatePerSecond == 1 })
		}
		if n := admitted(paused, waiting); n != 0 {
			t.Errorf("%s: %d of 30 shoppers of the paused sale admitted, want none", what, n)
		}
		if _, x := getAdmission(t, a, paused); x.NowServing != 0 {
			t.Errorf("%s: the paused sale's now_serving = %d, want 0", what, x.NowServing)
		}
		// Each loss leaves at most a join block (256 places by default) to
		// nobody: the restore's jump to the ceiling is no rate of joins to
		// size the next blocks by.
		for _, sale := range []string{paused, slow} {
			if _, x := getAdmission(t, b, sale); x.QueueLength > int64(losses+1)*256 {
				t.Errorf("%s: %s's line is %d places long after %d losses, want at most a block of 256 more each", what, sale, x.QueueLength, losses)
			}
		}
		// 1/s since the rate was set, and a serving block of 2 per loss.
		bound := int(math.Ceil(time.Since(slowSince).Seconds())) + 2*losses + 1
		if n := admitted(slow, slowLine); n > bound {
			t.Errorf("%s: %d shoppers of the 1/s sale admitted %.1f s after the rate was set, want at most %d",
				what, n, time.Since(slowSince).Seconds(), bound)
		}
	}
	check("before any loss")
	for round := range 2 {
		flushAll(t, srv)
		losses++
		check(fmt.Sprintf("round %d, after FLUSHALL", round+1))
		srv.Stop()
		srv.Start() // loads the snapshot saved before the pause and the rate
		losses++
		check(fmt.Sprintf("round %d, after a restart from the older snapshot", round+1))
	}
}

// TestSupersededQueueTokenAfterLoss: after Redis loses the line, an
// account holds one place, not two. One that joined again without its
// queue token holds the new place; its old token, though admitted by
// position, is refused (409 queue_token_superseded) while the new one is
// admitted. One that kept polling with its old token claims that place:
// joining again afterwards without the token gives it back, not a second
// place.
func TestSupersededQueueTokenAfterLoss(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "superseded"
	origin.SetSale(edgetest.OpenSale(sale, 100))
	r := edgetest.NewRedis(t)
	cfg := edgetest.Config(r, origin.URL)
	cfg.DefaultRatePerSecond = 0.001 // nobody admitted until ops set a rate
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	joined := map[string]edgetest.QueueAnswer{}
	for _, account := range []string{"filler-1", "filler-2", "twice", "kept"} {
		res, ans := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %s = %d %s, want 202", account, res.Status, res.Body)
		}
		joined[account] = ans
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := testenv.LoseKeys(ctx, r.Client, r.Prefix); err != nil {
		t.Fatal(err)
	}
	var again edgetest.QueueAnswer
	testenv.Eventually(t, 10*time.Second, "join after the loss answering 202", func() bool {
		res, ans := n.Join(t, sale, "twice") // without its queue token
		again = ans
		return res.Status == fasthttp.StatusAccepted
	})
	if again.Position <= joined["twice"].Position {
		t.Fatalf("join again without the token after the loss = position %d, want a new place after %d", again.Position, joined["twice"].Position)
	}
	if res := putAdmission(t, n, sale, `{"rate_per_s": 1000}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT rate = %d %s, want 200", res.Status, res.Body)
	}
	waitAdmission(t, n, sale, 10*time.Second, func(x admission) bool { return x.NowServing >= again.Position })

	if res, _ := n.Status(t, sale, joined["twice"].QueueToken); res.Status != fasthttp.StatusConflict ||
		!strings.Contains(string(res.Body), `"queue_token_superseded"`) {
		t.Errorf("status with the token from before the loss, the account holding a new place = %d %s, want 409 queue_token_superseded", res.Status, res.Body)
	}
	if res, st := n.Status(t, sale, again.QueueToken); res.Status != fasthttp.StatusOK || st.State != "admitted" {
		t.Errorf("status with the new token = %d %s, want admitted", res.Status, res.Body)
	}
	if res, st := n.Status(t, sale, joined["kept"].QueueToken); res.Status != fasthttp.StatusOK || st.State != "admitted" {
		t.Errorf("status with the kept token from before the loss = %d %s, want admitted", res.Status, res.Body)
	}
	if res, ans := n.Join(t, sale, "kept"); res.Status != fasthttp.StatusAccepted || ans.Position != joined["kept"].Position {
		t.Errorf("join again without the token after polling with it = %d %s, want its place %d back", res.Status, res.Body, joined["kept"].Position)
	}
}
