package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

func putDefences(t *testing.T, n *edgetest.Node, body string) defence.Settings {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(body)})
	var st defence.Settings
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("PUT /admin/defences %s = %d %s, want 200", body, res.Status, res.Body)
	}
	return st
}

// pollUntilServed waits until the node behind c has moved its cursor past
// the shopper's place, then polls the shopper's status from c.
func pollUntilServed(t *testing.T, n *edgetest.Node, c *edgetest.Client, sale, queueToken string) edgetest.QueueAnswer {
	t.Helper()
	pos := queueClaims(t, queueToken, sale).Pos
	waitAdmission(t, n, sale, 5*time.Second, func(a admission) bool { return a.NowServing >= pos })
	res, a := c.Status(t, sale, queueToken)
	if res.Status != fasthttp.StatusOK {
		t.Fatalf("status = %d %s", res.Status, res.Body)
	}
	return a
}

// TestTarpitKeepsMisbehavingShoppersWaiting: an account that floods joins,
// and the accounts that joined from an address too many accounts joined
// from, are told they wait — an answer of the usual shape — and never
// admitted, on every node, wherever they poll from, while honest shoppers
// are admitted as ever; ops list and release them, and switching the
// tarpit off lets everyone through.
func TestTarpitKeepsMisbehavingShoppersWaiting(t *testing.T) {
	t.Parallel()
	const sale = "tarpit"
	origin := edgetest.NewStubOrigin(t)
	origin.SetSale(edgetest.OpenSale(sale, 100))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.LimitJoinAccount = "1-M" // a second join within the minute is an offence
	a := edgetest.StartNode(t, cfg)
	b := edgetest.StartNode(t, cfg)
	a.WaitSale(t, sale)
	b.WaitSale(t, sale)
	putDefences(t, a, `{"tarpit": {"offences": 3, "accounts_per_address": 4}}`)

	honest, flood, crowded := a.Client("192.0.2.10"), a.Client("198.51.100.5"), a.Client("203.0.113.9")
	_, alice := honest.Join(t, sale, "alice")
	_, mallory := flood.Join(t, sale, "mallory")
	for range 3 {
		if res, _ := flood.Join(t, sale, "mallory"); res.Status != fasthttp.StatusTooManyRequests {
			t.Fatalf("mallory's repeated join = %d %s, want 429", res.Status, res.Body)
		}
	}
	var shared []string
	for i := range 5 {
		res, q := crowded.Join(t, sale, fmt.Sprintf("sock-%d", i))
		if res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join from the shared address = %d %s", res.Status, res.Body)
		}
		shared = append(shared, q.QueueToken)
	}
	if got := pollUntilServed(t, a, honest, sale, alice.QueueToken); got.State != "admitted" || got.AdmissionToken == "" {
		t.Fatalf("alice = %+v, want admitted", got)
	}
	kept := func(n *edgetest.Node, c *edgetest.Client, who, token string) {
		t.Helper()
		got := pollUntilServed(t, n, c, sale, token)
		if got.State != "waiting" || got.AdmissionToken != "" || got.NowServing >= got.Position || got.EstimatedWaitS <= 0 {
			t.Fatalf("%s, tarpitted, = %+v; want an ordinary waiting answer", who, got)
		}
	}
	kept(a, flood, "mallory", mallory.QueueToken)
	kept(a, crowded, "sock-0", shared[0])

	// The other node learns of both at its next sync.
	for _, n := range []*edgetest.Node{a, b} {
		if err := n.App.Defences.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	kept(b, b.Client("198.51.100.5"), "mallory on the other node", mallory.QueueToken)
	kept(b, b.Client("198.51.100.77"), "sock-1 on the other node, from elsewhere", shared[1])

	res := a.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/tarpit"})
	var list struct{ Entries []defence.Entry }
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &list) != nil || len(list.Entries) != 6 {
		t.Fatalf("GET /admin/tarpit = %d %s, want mallory and the 5 socks", res.Status, res.Body)
	}
	for _, e := range list.Entries {
		want := defence.ReasonAccountsPerAddress
		if e.Account == "mallory" {
			want = defence.ReasonOffences
		}
		if e.Reason != want {
			t.Errorf("tarpit entry %+v, want reason %s", e, want)
		}
	}
	if _, q := crowded.Join(t, sale, "neighbour-later"); pollUntilServed(t, a, crowded, sale, q.QueueToken).State != "admitted" {
		t.Error("an account joining from the address after its crowd was caught is held")
	}

	if res := b.DoAdmin(t, edgetest.Request{Method: "DELETE", Path: "/admin/tarpit?account=mallory"}); res.Status != fasthttp.StatusOK {
		t.Fatalf("release mallory = %d %s", res.Status, res.Body)
	}
	if res := b.DoAdmin(t, edgetest.Request{Method: "DELETE", Path: "/admin/tarpit?account=mallory"}); res.Status != fasthttp.StatusNotFound || res.ErrorCode() != "not_tarpitted" {
		t.Fatalf("second release = %d %s, want 404 not_tarpitted", res.Status, res.Body)
	}
	if err := a.App.Defences.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := pollUntilServed(t, a, flood, sale, mallory.QueueToken); got.State != "admitted" {
		t.Fatalf("mallory after the release = %+v, want admitted", got)
	}
	putDefences(t, a, `{"tarpit": {"enabled": false}}`)
	if got := pollUntilServed(t, a, crowded, sale, shared[4]); got.State != "admitted" {
		t.Fatalf("sock-2 with the tarpit off = %+v, want admitted", got)
	}
}

// signedUser is a user token for account with the shop's signals claims.
func signedUser(t *testing.T, account string, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"sub": account, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(tokenstest.UserSecret())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLowTrustAccountsSolveHarder: with trust thresholds set, an account
// the shop's signals mark (a day old) solves a harder proof of work — one
// even when the sale asks none — while an old account, and one whose token
// says nothing, join as before.
func TestLowTrustAccountsSolveHarder(t *testing.T) {
	t.Parallel()
	const sale = "trust"
	n := saleNode(t, sale, nil)
	putDefences(t, n, `{"trust": {"min_account_age_days": 7, "extra_challenge_bits": 6}}`)
	join := func(token string, header map[string]string) (*edgetest.Response, challengeAnswer) {
		t.Helper()
		res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: token, Header: header})
		var ch challengeAnswer
		if res.Status == fasthttp.StatusForbidden {
			_ = json.Unmarshal(res.Body, &ch)
		}
		return res, ch
	}
	young := signedUser(t, "fresh", jwt.MapClaims{"account_created_at": time.Now().Add(-24 * time.Hour).Unix()})
	old := signedUser(t, "veteran", jwt.MapClaims{"account_created_at": time.Now().AddDate(-2, 0, 0).Unix(), "phone_verified": false})
	for name, tok := range map[string]string{"old account": old, "no signals": edgetest.UserToken(t, "quiet")} {
		if res, _ := join(tok, nil); res.Status != fasthttp.StatusAccepted {
			t.Errorf("%s: join = %d %s, want 202", name, res.Status, res.Body)
		}
	}
	res, ch := join(young, nil)
	if res.Status != fasthttp.StatusForbidden || ch.DifficultyBits != 6 {
		t.Fatalf("young account's join = %d %s, want 403 challenge_required of 6 bits", res.Status, res.Body)
	}
	sol, ok := challenge.Solve(ch.Challenge, "fresh", 1<<24)
	if !ok {
		t.Fatal("no solution found")
	}
	if res, _ := join(young, map[string]string{"X-Challenge": ch.Challenge, "X-Challenge-Solution": sol}); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("young account's solved join = %d %s, want 202", res.Status, res.Body)
	}

	// The sale asks 4 bits of everyone: the young account 10.
	if res := putAdmission(t, n, sale, `{"challenge_bits": 4}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits = %d %s", res.Status, res.Body)
	}
	waitChallenge(t, n, sale, 4)
	if _, ch := join(signedUser(t, "fresh-2", jwt.MapClaims{"account_created_at": time.Now().Unix()}), nil); ch.DifficultyBits != 10 {
		t.Errorf("young account's challenge = %d bits, want 10", ch.DifficultyBits)
	}
	if _, ch := join(old, nil); ch.DifficultyBits != 4 {
		t.Errorf("old account's challenge = %d bits, want 4", ch.DifficultyBits)
	}
}

// TestNetworkLimitsTunedLive: ops set, change and switch off the
// per-network join limit at run time, and every node obeys.
func TestNetworkLimitsTunedLive(t *testing.T) {
	t.Parallel()
	const sale = "netlimits"
	n := saleNode(t, sale, func(c *app.Config) { c.LimitJoinSubnet = "" })
	joinFrom := func(i int) *edgetest.Response {
		res, _ := n.Client(fmt.Sprintf("192.0.2.%d", 10+i)).Join(t, sale, fmt.Sprintf("net-%d", i))
		return res
	}
	for i := range 3 {
		if res := joinFrom(i); res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %d with no network limit = %d %s", i, res.Status, res.Body)
		}
	}
	putDefences(t, n, `{"limits": {"join_subnet": "2-M"}}`)
	for i := 3; i < 5; i++ {
		if res := joinFrom(i); res.Status != fasthttp.StatusAccepted {
			t.Fatalf("join %d within the new limit = %d %s", i, res.Status, res.Body)
		}
	}
	if res := joinFrom(5); res.Status != fasthttp.StatusTooManyRequests {
		t.Fatalf("third join from the /24 under 2-M = %d %s, want 429", res.Status, res.Body)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(`{"limits": {"join_subnet": "lots"}}`)}); res.Status != fasthttp.StatusBadRequest || res.ErrorCode() != "invalid_defences" {
		t.Fatalf("PUT a bad rate = %d %s, want 400 invalid_defences", res.Status, res.Body)
	}
	putDefences(t, n, `{"limits": {"join_subnet": ""}}`)
	if res := joinFrom(6); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join with the limit off again = %d %s", res.Status, res.Body)
	}
}

// TestChallengeRampsWithJoinRate: with the ramp set, a burst of joins makes
// the sale's proof of work harder, up to the ramp's most, and it eases
// again when joins slow down.
func TestChallengeRampsWithJoinRate(t *testing.T) {
	t.Parallel()
	const sale = "ramp"
	n := saleNode(t, sale, nil)
	putDefences(t, n, `{"challenge_ramp": {"joins_per_s": 10, "max_extra_bits": 3}}`)
	if res := putAdmission(t, n, sale, `{"challenge_bits": 4}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits = %d %s", res.Status, res.Body)
	}
	waitChallenge(t, n, sale, 4)
	bits := func(account string) int {
		t.Helper()
		res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: edgetest.UserToken(t, account)})
		var ch challengeAnswer
		if res.Status != fasthttp.StatusForbidden || json.Unmarshal(res.Body, &ch) != nil {
			t.Fatalf("join = %d %s, want 403 challenge_required", res.Status, res.Body)
		}
		return ch.DifficultyBits
	}
	if got := bits("calm"); got != 4 {
		t.Fatalf("challenge before any burst = %d bits, want 4", got)
	}
	snap, _ := n.App.Snapshots.Get(sale)
	fillLine(t, context.Background(), []*edgetest.Node{n}, sale, snap.StartsAt, 400) // far above 10 a second
	if got := bits("in-the-burst"); got != 7 {
		t.Fatalf("challenge in a burst = %d bits, want 4 + 3", got)
	}
	waitPublished(t, n, sale, 7) // the snapshot's challenge, which pages solve first, ramps too
	testenv.Eventually(t, 15*time.Second, "the challenge easing after the burst", func() bool { return bits("after") == 4 })
}
