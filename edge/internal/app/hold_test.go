package app_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestAdmissionHoldsWhileTheCheckoutIsBehind: while every request to the
// origin takes longer than FLASHGATE_ADMISSION_HOLD_AFTER (a standing
// queue), the node's ticks admit no one and count it; once the origin
// answers quickly again the cursor moves again, slowly at first (the slow
// start restarts at the last hold) and at its rate from the twelfth second
// (no reserve is answered here: the bound on the answers fades from the
// sixth), with no burst for the held time.
func TestAdmissionHoldsWhileTheCheckoutIsBehind(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	origin := edgetest.NewStubOrigin(t)
	const sale = "hold"
	origin.SetSale(edgetest.OpenSale(sale, 1000))
	cfg := edgetest.Config(r, origin.URL)
	const rate = 200.0
	cfg.DefaultRatePerSecond = rate
	cfg.AdmissionHoldAfter = 100 * time.Millisecond
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	snap, _ := n.App.Snapshots.Get(sale)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const line = 3000 // longer than the test admits
	fillLine(t, ctx, []*edgetest.Node{n}, sale, snap.StartsAt, line)

	// The origin falls behind: shoppers' order reads, through the payments
	// pool, each take 300 ms.
	origin.SetDelay(300 * time.Millisecond)
	var stop atomic.Bool
	var readers sync.WaitGroup
	token := edgetest.UserToken(t, "reader")
	for range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/orders/o-1", Token: token})
			}
		}()
	}
	calm := heldTicks(t, n)
	testenv.Eventually(t, 5*time.Second, "a tick held for the slow origin", func() bool { return heldTicks(t, n) > calm })
	heldBefore := heldTicks(t, n)
	start := readCursor(t, r, sale)
	time.Sleep(time.Second)
	end := readCursor(t, r, sale)
	if moved, most := end.serving-start.serving, int64(0.1*rate*end.at.Sub(start.at).Seconds()); moved > most {
		t.Errorf("while the origin took 300 ms the cursor moved %d in %v, want at most %d (held)", moved, end.at.Sub(start.at), most)
	}
	if held := heldTicks(t, n) - heldBefore; held < 5 {
		t.Errorf("flashgate_edge_admission_held_ticks_total rose by %v in a second of 100 ms ticks while the origin was behind, want at least 5", held)
	}
	if end.serving >= end.length {
		t.Fatalf("the whole line (%d) was admitted; the test needs a longer line", end.length)
	}

	// It catches up: admission resumes, from an eighth of the rate.
	origin.SetDelay(0)
	stop.Store(true)
	readers.Wait()
	// The last slow answers are judged and forgotten: the cursor, which a
	// held tick leaves where it is, moves again.
	held := readCursor(t, r, sale).serving
	testenv.Eventually(t, 5*time.Second, "the cursor moving again once the origin caught up", func() bool {
		return readCursor(t, r, sale).serving > held
	})
	start = readCursor(t, r, sale)
	time.Sleep(time.Second)
	end = readCursor(t, r, sale)
	elapsed := end.at.Sub(start.at).Seconds()
	if moved := float64(end.serving - start.serving); moved < 0.08*rate*elapsed || moved > 0.5*rate*elapsed {
		t.Errorf("in the second after the origin caught up the cursor moved %.0f in %.2fs, want the slow start's 0.08 to 0.5 of %.0f", moved, elapsed, rate*elapsed)
	}
	// The slow start is over, and with no reserve answered here the
	// bound on the checkout's answers, doubling every two seconds from the
	// sixth, is gone from the twelfth.
	time.Sleep(11 * time.Second)
	start = readCursor(t, r, sale)
	time.Sleep(time.Second)
	end = readCursor(t, r, sale)
	elapsed = end.at.Sub(start.at).Seconds()
	if moved := float64(end.serving - start.serving); moved < 0.7*rate*elapsed || moved > 1.1*rate*elapsed {
		t.Errorf("twelve seconds after the origin caught up the cursor moved %.0f in %.2fs, want about %.0f (the rate, no catch-up burst)", moved, elapsed, rate*elapsed)
	}
}

var heldTicksLine = regexp.MustCompile(`(?m)^flashgate_edge_admission_held_ticks_total (\S+)$`)

// heldTicks reads flashgate_edge_admission_held_ticks_total from the node's metrics.
func heldTicks(t *testing.T, n *edgetest.Node) float64 {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
	if res.Status != fasthttp.StatusOK {
		t.Fatalf("GET /metrics = %d", res.Status)
	}
	m := heldTicksLine.FindSubmatch(res.Body)
	if m == nil {
		t.Fatal("GET /metrics has no flashgate_edge_admission_held_ticks_total")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("flashgate_edge_admission_held_ticks_total %q: %v", m[1], err)
	}
	return v
}

// TestReserveAnswersPaceTheSlowStart: every reserve the checkout answers —
// a hold, sold out — is counted into the sale's cursor at the next tick,
// where the slow start reads the checkout's pace; a please_wait is not an
// answer, nor is a reserve the edge refuses itself.
func TestReserveAnswersPaceTheSlowStart(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	origin := edgetest.NewStubOrigin(t)
	const sale = "answers"
	origin.SetSale(edgetest.OpenSale(sale, 100))
	n := edgetest.StartNode(t, edgetest.Config(r, origin.URL))
	n.WaitSale(t, sale)
	reserve := func(account string, want int) {
		t.Helper()
		token, _, err := issuer.Admission(sale, account, 1)
		if err != nil {
			t.Fatal(err)
		}
		res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: token, User: edgetest.Owner(t, token),
			Body: reserveBody("sku-1", "k-"+account)})
		if res.Status != want {
			t.Fatalf("reserve of %s = %d %s, want %d", account, res.Status, res.Body, want)
		}
	}
	for i := range 3 {
		reserve(fmt.Sprintf("held-%d", i), fasthttp.StatusCreated)
	}
	origin.SetReserveStatus(fasthttp.StatusConflict)
	reserve("late", fasthttp.StatusConflict)
	origin.SetReserveStatus(fasthttp.StatusServiceUnavailable)
	reserve("waiting-0", fasthttp.StatusServiceUnavailable)
	reserve("waiting-1", fasthttp.StatusServiceUnavailable)
	if res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Body: reserveBody("sku-1", "k-none")}); res.Status != fasthttp.StatusUnauthorized {
		t.Fatalf("reserve without an admission token = %d %s, want the edge's own 401", res.Status, res.Body)
	}

	keys := line.NewKeys(r.Prefix)
	testenv.Eventually(t, 5*time.Second, "the cursor's answered count reaching 4 (3 holds and a sold out)", func() bool {
		answered, _ := r.Client.HGet(context.Background(), keys.Cursor(sale), line.CursorAnswered).Int64()
		if answered > 4 {
			t.Fatalf("the cursor's answered count = %d, want 4 (3 holds and a sold out; no please_wait, no refusal at the edge)", answered)
		}
		return answered == 4
	})
}
