package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/redisconn/redistest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// infoField reads one field of a Redis server's INFO replication.
func infoField(t *testing.T, c *redis.Client, field string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication = %v", err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}

// TestLineSurvivesFailoverToLaggingReplica: the edge's Redis fails over to
// a replica that missed the last writes — it holds the whole line, only
// older: fewer joins, an earlier cursor, an older rate and no pause. The
// replica's link is cut (it cannot authenticate to the primary any more)
// before ten more shoppers join and ops admit some of them and pause; then
// the primary is killed and the Sentinels promote the lagging replica.
// Afterwards: no position is handed to two accounts (new joiners, and a
// lost joiner joining again without its token, land after every earlier
// place; with its token it gets its place back); every shopper admitted
// before is still admitted and everyone keeps their position; and the
// pause and rate set before the failover hold.
func TestLineSurvivesFailoverToLaggingReplica(t *testing.T) {
	t.Parallel()
	f := redistest.StartFailover(t, redistest.Options{})
	origin := edgetest.NewStubOrigin(t)
	const sale = "lagging"
	origin.SetSale(edgetest.OpenSale(sale, 1000))
	r := &edgetest.Redis{URL: f.URL(), Prefix: "te" + edgetest.RandomID(t, 5) + ":", Client: f.Client(t)}
	cfg := edgetest.Config(r, origin.URL)
	cfg.RedisSentinels = f.SentinelList()
	cfg.RedisMasterName = f.MasterName
	cfg.DefaultRatePerSecond = 0.001 // nobody admitted until ops set a rate
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)

	primary := redis.NewClient(&redis.Options{Addr: f.Data[0].Addr, MaxRetries: -1})
	defer primary.Close()
	replica := redis.NewClient(&redis.Options{Addr: f.Data[1].Addr, MaxRetries: -1})
	defer replica.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tokens := map[string]string{}
	positions := map[int64]string{}
	join := func(account string) {
		t.Helper()
		res, ans := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %s = %d %s, want 202", account, res.Status, res.Body)
		}
		if other, dup := positions[ans.Position]; dup {
			t.Fatalf("join %s = position %d, already %s's", account, ans.Position, other)
		}
		tokens[account], positions[ans.Position] = ans.QueueToken, account
	}
	for i := range 10 {
		join(fmt.Sprintf("a-%d", i))
	}
	f.WaitReplicated(t, 5*time.Second)

	// Cut the replica off: it cannot authenticate to the primary (which has
	// no password), so it stays behind until it is promoted.
	if err := replica.ConfigSet(ctx, "masterauth", "not-the-password").Err(); err != nil {
		t.Fatalf("CONFIG SET masterauth on the replica = %v", err)
	}
	if err := primary.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica on the primary = %v", err)
	}
	testenv.Eventually(t, 5*time.Second, "the primary without a replica once its link was cut", func() bool {
		return infoField(t, primary, "connected_slaves") == "0"
	})

	// Writes the replica never sees: ten more joins, admissions, a pause.
	for i := range 10 {
		join(fmt.Sprintf("b-%d", i))
	}
	if res := putAdmission(t, n, sale, `{"rate_per_s": 50}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT rate 50 = %d %s, want 200", res.Status, res.Body)
	}
	waitAdmission(t, n, sale, 5*time.Second, func(x admission) bool { return x.NowServing >= 15 })
	if res := putAdmission(t, n, sale, `{"paused": true}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT paused = %d %s, want 200", res.Status, res.Body)
	}
	waitAdmission(t, n, sale, 2*time.Second, func(x admission) bool { return x.Paused })
	waitTicked(t, sale, n) // the last tick before the pause has landed
	_, held := getAdmission(t, n, sale)
	type heard struct {
		position int64
		state    string
	}
	was := map[string]heard{}
	admitted := 0
	for account, tok := range tokens {
		res, st := n.Status(t, sale, tok)
		if res.Status != fasthttp.StatusOK {
			t.Fatalf("status of %s before the failover = %d %s", account, res.Status, res.Body)
		}
		was[account] = heard{st.Position, st.State}
		if st.State == "admitted" {
			admitted++
		}
	}
	if admitted < 15 || admitted == len(tokens) {
		t.Fatalf("%d of %d shoppers admitted before the failover, want at least 15, not all", admitted, len(tokens))
	}
	if got := infoField(t, primary, "connected_slaves"); got != "0" {
		t.Fatalf("the replica reconnected (primary has %s replicas): it would not lag", got)
	}

	old := f.KillPrimary(t)
	if err := replica.ConfigSet(ctx, "masterauth", "").Err(); err != nil {
		t.Fatalf("CONFIG SET masterauth '' on the replica = %v", err)
	}
	if next := f.WaitPromotion(t, old, 20*time.Second); next != f.Data[1] {
		t.Fatalf("promoted %s, want the lagging replica data-1", next.Name)
	}

	promoted := time.Now()

	// Polls answer again once a tick has read the line from the new primary.
	testenv.Eventually(t, 15*time.Second, "status after the promotion answering 200 from a reading of the new primary", func() bool {
		res, _ := n.Status(t, sale, tokens["a-0"])
		st, _ := n.App.Admission.State(sale)
		return res.Status == fasthttp.StatusOK && !st.Lost && st.ReadAt.After(promoted)
	})
	for account, tok := range tokens {
		res, st := n.Status(t, sale, tok)
		w := was[account]
		switch {
		case res.Status != fasthttp.StatusOK:
			t.Errorf("status of %s after the failover = %d %s, want 200", account, res.Status, res.Body)
		case st.Position != w.position:
			t.Errorf("%s is at position %d after the failover, was %d", account, st.Position, w.position)
		case w.state == "admitted" && st.State != "admitted":
			t.Errorf("%s (position %d) was admitted before the failover and now hears %q, want admitted", account, st.Position, st.State)
		}
	}
	if _, a := getAdmission(t, n, sale); !a.Paused || a.RatePerSecond != 50 || a.NowServing < held.NowServing {
		t.Errorf("admission after the failover = %+v, want still paused at rate 50, now_serving at least %d", a, held.NowServing)
	}

	// b-1 shows its token and gets its place back; so does b-0 without
	// it, since its polls above claimed the place its token carries (an
	// account holds one place); new shoppers land after every place.
	res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue",
		Token: edgetest.UserToken(t, "b-1"), Header: map[string]string{"X-Queue-Token": tokens["b-1"]}})
	if res.Status != fasthttp.StatusAccepted || !strings.Contains(string(res.Body), fmt.Sprintf(`"position":%d`, was["b-1"].position)) {
		t.Errorf("b-1 joining again with its queue token = %d %s, want 202 at position %d", res.Status, res.Body, was["b-1"].position)
	}
	if res, ans := n.Join(t, sale, "b-0"); res.Status != fasthttp.StatusAccepted || ans.Position != was["b-0"].position {
		t.Errorf("b-0 joining again without its token, after polling with it = %d %s, want 202 at its position %d", res.Status, res.Body, was["b-0"].position)
	}
	for _, account := range []string{"c-0", "c-1", "c-2", "c-3"} {
		res, ans := n.Join(t, sale, account)
		if res.Status != fasthttp.StatusAccepted {
			t.Errorf("join %s after the failover = %d %s, want 202", account, res.Status, res.Body)
			continue
		}
		if other, dup := positions[ans.Position]; dup || ans.Position <= 20 {
			t.Errorf("join %s after the failover = position %d, want one of its own after every earlier place (20); already %q's", account, ans.Position, other)
		}
		positions[ans.Position] = account
	}
}
