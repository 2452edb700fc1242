package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
)

// propagation is how long a settings change may take to show in every
// node's cached State: one tick, plus slack for a round trip to a busy
// Redis and a scheduler under -race.
func propagation(tick time.Duration) time.Duration { return tick + 300*time.Millisecond }

// cursorReading is the cursor as Redis holds it, with Redis's own clock.
type cursorReading struct {
	serving, length int64
	lastMS          float64   // the instant admission has reached (unix ms)
	at              time.Time // Redis TIME
}

func readCursor(t *testing.T, r *edgetest.Redis, sale string) cursorReading {
	t.Helper()
	keys := line.NewKeys(r.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pipe := r.Client.TxPipeline()
	tm := pipe.Time(ctx)
	serving := pipe.HGet(ctx, keys.Cursor(sale), "now_serving")
	last := pipe.HGet(ctx, keys.Cursor(sale), "last_ms")
	pre := pipe.Get(ctx, keys.Pre(sale))
	post := pipe.Get(ctx, keys.Post(sale))
	_, _ = pipe.Exec(ctx)
	if err := tm.Err(); err != nil {
		t.Fatalf("read cursor of %s: %v", sale, err)
	}
	s, _ := serving.Int64()
	a, _ := pre.Int64()
	b, _ := post.Int64()
	l, _ := last.Float64()
	return cursorReading{serving: s, length: a + b, lastMS: l, at: tm.Val()}
}

// TestAdmissionRateAcrossNodes: three edge nodes sharing Redis, each
// running its tick loop, admit at the configured rate within ±5% over 10 s
// — never three times it. A rate change and a pause made on one node show
// in every node's cached state within a tick; while paused the cursor does
// not move, and it resumes at the rate without a burst for the pause.
func TestAdmissionRateAcrossNodes(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	origin := edgetest.NewStubOrigin(t)
	const sale = "rate"
	origin.SetSale(edgetest.OpenSale(sale, 1000))
	cfg := edgetest.Config(r, origin.URL)
	const rate = 200.0
	cfg.DefaultRatePerSecond = rate
	var nodes []*edgetest.Node
	for range 3 {
		nodes = append(nodes, edgetest.StartNode(t, cfg))
	}
	for _, n := range nodes {
		n.WaitSale(t, sale)
	}
	snap, _ := nodes[0].App.Snapshots.Get(sale)

	// A line much longer than the 22 s of admissions below, mostly
	// through the Joiner, a few through each node's HTTP join.
	const length = 8000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fillLine(t, ctx, nodes, sale, snap.StartsAt, length)
	for i, n := range nodes {
		if res, ans := n.JoinAgainWhileBusy(t, sale, fmt.Sprintf("http-%d", i)); res.Status != fasthttp.StatusAccepted || ans.Position <= length {
			t.Errorf("POST queue on node %d = %d %s, want 202 with a position behind the first %d", i, res.Status, res.Body, length)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	start := readCursor(t, r, sale)
	time.Sleep(10 * time.Second)
	end := readCursor(t, r, sale)
	if end.serving >= end.length {
		t.Fatalf("the whole line (%d) was admitted within the window; the test needs a longer line", end.length)
	}
	elapsed := end.at.Sub(start.at)
	want := rate * elapsed.Seconds()
	got := float64(end.serving - start.serving)
	t.Logf("admitted %v in %v (Redis clock) at %v/s from 3 nodes", got, elapsed, rate)
	if math.Abs(got-want) > 0.05*want {
		t.Errorf("admitted %v in %v = %.1f/s, want %v/s ± 5%% (%.0f..%.0f)", got, elapsed, got/elapsed.Seconds(), rate, 0.95*want, 1.05*want)
	}
	// No tick of any node counted a span another had already admitted: the
	// cursor moved exactly rate × the span its admission frontier moved.
	if span := (end.lastMS - start.lastMS) / 1000; math.Abs(got-rate*span) > 2 {
		t.Errorf("admitted %v over an admitted span of %.3fs, want exactly %.0f at %v/s", got, span, rate*span, rate)
	}

	// settle changes the admission settings on node 0 and waits for every
	// node's cached state to show them.
	settle := func(body string, ok func(line.State) bool) {
		t.Helper()
		res := nodes[0].DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/sales/" + sale + "/admission", Body: []byte(body)})
		if res.Status != fasthttp.StatusOK {
			t.Fatalf("PUT admission %s = %d %s, want 200", body, res.Status, res.Body)
		}
		changed := time.Now()
		limit := propagation(cfg.Tick)
		// What the handlers answer from is each node's view, rebuilt by
		// the tick right after it reads the cursor: wait for both.
		for i, n := range nodes {
			testenv.Eventually(t, limit-time.Since(changed), fmt.Sprintf("node %d's State and admission view showing PUT admission %s", i, body), func() bool {
				st, _ := n.App.Admission.State(sale)
				res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/admission"})
				var view struct {
					RatePerSecond float64 `json:"rate_per_s"`
					Paused        bool    `json:"paused"`
				}
				_ = json.Unmarshal(res.Body, &view)
				return ok(st) && ok(line.State{RatePerSecond: view.RatePerSecond, Paused: view.Paused})
			})
		}
		t.Logf("PUT admission %s showed on every node after %v", body, time.Since(changed))
	}

	const newRate = 400.0
	settle(`{"rate_per_s": 400}`, func(st line.State) bool { return st.RatePerSecond == newRate && !st.Paused })
	// The raise ramps from the old rate (and, with no reserve answered in
	// this test, stays there) for six seconds, then the bound on the
	// answers doubles every two seconds: the new rate from eight on.
	raised := readCursor(t, r, sale)
	time.Sleep(2 * time.Second)
	early := readCursor(t, r, sale)
	if got, span := float64(early.serving-raised.serving), early.at.Sub(raised.at).Seconds(); got < 0.9*rate*span || got > 0.9*newRate*span {
		t.Errorf("admitted %v in the %.2fs after the raise, want at least the old rate (%v/s) and below the new (%v/s)", got, span, rate, newRate)
	}
	time.Sleep(8500*time.Millisecond - early.at.Sub(raised.at))
	before := readCursor(t, r, sale)
	time.Sleep(2 * time.Second)
	after := readCursor(t, r, sale)
	// Over the span admission moved through, not the readings' span: a
	// reading sees the cursor as the last tick left it, a tick late on a
	// busy box (the 10 s above keep to the clock).
	span := (after.lastMS - before.lastMS) / 1000
	want = newRate * span
	if got := float64(after.serving - before.serving); span < 1 || math.Abs(got-want) > 0.1*want {
		t.Errorf("admitted %v over an admitted span of %.3fs from %v after the rate change, want %v/s ± 10%% (%.0f)", got, span, before.at.Sub(raised.at), newRate, want)
	}

	settle(`{"paused": true}`, func(st line.State) bool { return st.Paused })
	for i, n := range nodes {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/admission"})
		var got struct {
			RatePerSecond float64 `json:"rate_per_s"`
			Paused        bool    `json:"paused"`
		}
		if err := json.Unmarshal(res.Body, &got); res.Status != fasthttp.StatusOK || err != nil || !got.Paused || got.RatePerSecond != newRate {
			t.Errorf("GET admission on node %d = %d %s, want 200 paused at rate %v", i, res.Status, res.Body, newRate)
		}
	}
	pausedAt := readCursor(t, r, sale)
	time.Sleep(time.Second)
	stillPaused := readCursor(t, r, sale)
	if stillPaused.serving != pausedAt.serving {
		t.Errorf("cursor moved %d -> %d during 1 s of pause, want it still", pausedAt.serving, stillPaused.serving)
	}

	settle(`{"paused": false}`, func(st line.State) bool { return !st.Paused })
	resumed := readCursor(t, r, sale)
	time.Sleep(500 * time.Millisecond)
	later := readCursor(t, r, sale)
	moved := float64(later.serving - stillPaused.serving)
	max := newRate*later.at.Sub(stillPaused.at).Seconds() + 10
	if later.serving <= resumed.serving || moved > max {
		t.Errorf("cursor moved %d -> %d in %v after resuming, want it moving at %v/s (at most %.0f: no credit for the pause)",
			stillPaused.serving, later.serving, later.at.Sub(stillPaused.at), newRate, max)
	}
}
