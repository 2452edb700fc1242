package app_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/redisconn/redistest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestEdgeFollowsARedisFailover: an edge node connected through Sentinels
// follows a promotion without restart. While there is no primary, joins
// answer 503 please_wait; within 15 s of the kill they are accepted again,
// by the promoted replica, after those who joined before, who keep their
// places. (The promoted replica might have lagged, so the line resumes at
// its durable ceilings: the next place is after the post ceiling's block,
// and the cursor may admit up to a serving block early.)
func TestEdgeFollowsARedisFailover(t *testing.T) {
	t.Parallel()
	f := redistest.StartFailover(t, redistest.Options{})
	origin := edgetest.NewStubOrigin(t)
	const sale = "failover"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	// The cluster is the test's own and goes with it: no keys to clean up.
	r := &edgetest.Redis{URL: f.URL(), Prefix: "te" + edgetest.RandomID(t, 5) + ":", Client: f.Client(t)}
	cfg := edgetest.Config(r, origin.URL)
	cfg.RedisSentinels = f.SentinelList()
	cfg.RedisMasterName = f.MasterName
	cfg.DefaultRatePerSecond = 0.001 // keep everyone waiting
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)

	const before = 5
	tokens := make([]string, before)
	for i := range before {
		res, ans := n.JoinAgainWhileBusy(t, sale, fmt.Sprintf("before-%d", i))
		if res.Status != fasthttp.StatusAccepted || ans.Position != int64(i+1) {
			t.Fatalf("join before-%d = %d %s, want 202 at position %d", i, res.Status, res.Body, i+1)
		}
		tokens[i] = ans.QueueToken
	}
	// Asynchronous replication may lose the last writes in a failover (the
	// origin's test covers that); here the line is replicated first.
	f.WaitReplicated(t, 5*time.Second)
	old := f.KillPrimary(t)
	killed := time.Now()

	refused := 0
	var after edgetest.QueueAnswer
	testenv.Eventually(t, 15*time.Second, "a join after the primary was killed answering 202", func() bool {
		res, ans := n.Join(t, sale, "after")
		if res.Status == fasthttp.StatusAccepted {
			after = ans
			return true
		}
		if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" {
			t.Fatalf("join during the failover = %d %s, want 202 or 503 please_wait", res.Status, res.Body)
		}
		refused++
		return false
	})
	t.Logf("joins accepted again %v after the kill, %d answered please_wait meanwhile", time.Since(killed).Round(time.Millisecond), refused)
	if refused == 0 {
		t.Errorf("no join answered please_wait: the kill went unnoticed")
	}
	if after.Position <= before || after.QueueToken == "" {
		t.Errorf("join after the failover = position %d, token %q; want a position after %d with a token", after.Position, after.QueueToken, before)
	}
	// Sentinels learn of the promotion one after another: ask until the one
	// asked has heard (bounded).
	var now *redistest.Server
	testenv.Eventually(t, 5*time.Second, "a sentinel naming a new primary", func() bool {
		now = f.Primary(t)
		return now != old
	})
	if now == old || now != f.Data[1] {
		t.Errorf("primary after the failover = %s, want data-1 (the killed one was %s)", now.Name, old.Name)
	}
	// Polls answer from the node's cached cursor, which is fresh again once a
	// tick has run against the new primary: wait for that (bounded).
	testenv.Eventually(t, 10*time.Second, "status after joins came back answering 200", func() bool {
		res, _ := n.Status(t, sale, tokens[0])
		return res.Status == fasthttp.StatusOK
	})
	for i, tok := range tokens {
		res, ans := n.Status(t, sale, tok)
		if res.Status != fasthttp.StatusOK || ans.Position != int64(i+1) || (ans.State != "waiting" && ans.State != "admitted") {
			t.Errorf("status of before-%d after the failover = %d %s, want 200 at position %d", i, res.Status, res.Body, i+1)
		}
	}
	// Joining again answers the same place: the dedupe key is on the new primary too.
	if res, ans := n.Join(t, sale, "before-0"); res.Status != fasthttp.StatusAccepted || ans.Position != 1 {
		t.Errorf("join before-0 again after the failover = %d %s, want 202 at position 1", res.Status, res.Body)
	}
}
