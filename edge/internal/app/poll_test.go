package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/commandlog"
)

// TestPollCostsNothing: with the node's loops stopped (its views built by
// one refresh and a few ticks run by hand), 1,000 status polls — waiting
// and admitted shoppers alike — and 100 snapshot reads issue no Redis
// command and no origin request.
func TestPollCostsNothing(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "polls"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	// The hand-run tick and the one refresh must stay fresh for the whole
	// test, however slow a busy machine makes it.
	cfg.StaleAfter, cfg.SnapshotStaleAfter = time.Minute, time.Minute
	n := edgetest.NewNode(t, cfg) // not started: no loops
	commands := commandlog.Attach(n.App.Redis())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.App.Snapshots.Refresh(ctx); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	settle(t, ctx, n, sale)

	// Hold admission while the line forms, then admit about half of it.
	paused, rate := true, 400.0
	if _, applied, err := n.App.Line.Settings(ctx, sale, line.Change{Paused: &paused}); err != nil || !applied {
		t.Fatalf("Settings(paused) = %v, in Redis %v; want nil, true", err, applied)
	}
	const shoppers = 20
	queueTokens := make([]string, shoppers)
	for i := range shoppers {
		res, ans := n.Join(t, sale, fmt.Sprintf("poller-%d", i))
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join = %d %s, want 202", res.Status, res.Body)
		}
		queueTokens[i] = ans.QueueToken
	}
	paused = false
	if _, applied, err := n.App.Line.Settings(ctx, sale, line.Change{RatePerSecond: &rate, Paused: &paused}); err != nil || !applied {
		t.Fatalf("Settings(resume) = %v, in Redis %v; want nil, true", err, applied)
	}
	// A resume ramps from an eighth of the rate (50/s), and the 10 units in
	// stock hold the pace to 20/s: about 4 admitted in 200 ms, from the
	// tick that first reads the resumed settings (the node's pace for them).
	settle(t, ctx, n, sale)
	time.Sleep(200 * time.Millisecond)
	settle(t, ctx, n, sale)
	if len(commands.Take()) == 0 {
		t.Fatalf("the command log saw nothing of a refresh, joins and ticks; it cannot vouch for the polls")
	}

	originBefore := origin.Count()
	states := map[string]int{}
	for i := range 1000 {
		res, st := n.Status(t, sale, queueTokens[i%shoppers])
		if res.Status != fasthttp.StatusOK {
			t.Fatalf("poll %d = %d %s, want 200", i, res.Status, res.Body)
		}
		states[st.State]++
	}
	for range 100 {
		if res, _ := getSnapshot(t, n, sale); res.Status != fasthttp.StatusOK {
			t.Fatalf("snapshot = %d %s, want 200", res.Status, res.Body)
		}
	}
	if states["admitted"] == 0 || states["waiting"] == 0 {
		t.Errorf("polls answered %v, want both admitted and waiting shoppers among them", states)
	}
	if got := commands.Take(); len(got) != 0 {
		t.Errorf("1,000 polls made %d Redis round trips %v, want none", len(got), got)
	}
	if got := origin.Count() - originBefore; got != 0 {
		t.Errorf("1,000 polls made %d origin requests, want 0", got)
	}

	// The counters are live: the next tick is counted.
	if err := n.App.Admission.Tick(ctx); err != nil {
		t.Fatalf("Tick = %v", err)
	}
	if len(commands.Take()) == 0 {
		t.Errorf("a tick made no Redis round trip the log saw")
	}
}
