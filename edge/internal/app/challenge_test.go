package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// challengeAnswer is a join's 403 challenge_required.
type challengeAnswer struct {
	Error          string `json:"error"`
	Challenge      string `json:"challenge"`
	DifficultyBits int    `json:"difficulty_bits"`
}

// TestJoinNeedsProofOfWorkWhenOpsAskForIt: with challenge_bits set by ops
// (recorded in the origin's copy with the other admission settings) a join
// without a solution, with a wrong one, or with another account's is
// answered 403 challenge_required with a challenge to solve; the solved
// challenge earns the place. Raising the difficulty refuses solutions of
// the easier one; 0 switches it off. The setting outlives Redis losing the
// line.
func TestJoinNeedsProofOfWorkWhenOpsAskForIt(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "pow"
	origin.SetSale(edgetest.OpenSale(sale, 100))
	r := edgetest.NewRedis(t)
	n := edgetest.StartNode(t, edgetest.Config(r, origin.URL))
	n.WaitSale(t, sale)

	join := func(account string, header map[string]string) (*edgetest.Response, challengeAnswer) {
		t.Helper()
		res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: edgetest.UserToken(t, account), Header: header})
		var ch challengeAnswer
		if res.Status == fasthttp.StatusForbidden {
			if err := json.Unmarshal(res.Body, &ch); err != nil {
				t.Fatalf("403 body %q: %v", res.Body, err)
			}
		}
		return res, ch
	}
	solved := func(ch challengeAnswer) map[string]string {
		t.Helper()
		s, ok := challenge.Solve(ch.Challenge, "", 1<<24)
		if !ok {
			t.Fatalf("Solve(%s) found nothing", ch.Challenge)
		}
		return map[string]string{"X-Challenge": ch.Challenge, "X-Challenge-Solution": s}
	}
	needs := func(what string, res *edgetest.Response, ch challengeAnswer, bits int) {
		t.Helper()
		if res.Status != fasthttp.StatusForbidden || ch.Error != "challenge_required" || ch.Challenge == "" || ch.DifficultyBits != bits {
			t.Fatalf("%s = %d %s, want 403 challenge_required with a challenge of %d bits", what, res.Status, res.Body, bits)
		}
	}

	if res, _ := join("free", nil); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join with no challenge asked = %d %s, want 202", res.Status, res.Body)
	}
	if res := putAdmission(t, n, sale, `{"challenge_bits": 8}`); res.Status != fasthttp.StatusOK || !json.Valid(res.Body) {
		t.Fatalf("PUT challenge_bits 8 = %d %s, want 200", res.Status, res.Body)
	}
	waitChallenge(t, n, sale, 8)
	res, ch := join("alice", nil)
	needs("join without a solution", res, ch, 8)
	if res, again := join("alice", map[string]string{"X-Challenge": ch.Challenge, "X-Challenge-Solution": "not-digits"}); res.Status != fasthttp.StatusForbidden || again.Challenge == "" {
		t.Errorf("join with a malformed solution = %d %s, want 403 with a fresh challenge", res.Status, res.Body)
	}
	headers := solved(ch)
	if res, _ := join("mallory", headers); res.Status != fasthttp.StatusForbidden {
		t.Errorf("join with alice's solved challenge as mallory = %d %s, want 403", res.Status, res.Body)
	}
	if res, _ := join("alice", headers); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join with the solved challenge = %d %s, want 202", res.Status, res.Body)
	}

	// A solution at 8 bits no longer passes once ops ask for 12.
	_, ch8 := join("bob", nil)
	easy := solved(ch8)
	if res := putAdmission(t, n, sale, `{"challenge_bits": 12}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits 12 = %d %s, want 200", res.Status, res.Body)
	}
	waitChallenge(t, n, sale, 12)
	res, ch12 := join("bob", easy)
	needs("join with an 8-bit solution after the raise to 12", res, ch12, 12)
	if res, _ := join("bob", solved(ch12)); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join with a 12-bit solution = %d %s, want 202", res.Status, res.Body)
	}

	// The setting is the origin's: it comes back with the line.
	if _, err := testenv.LoseKeys(context.Background(), r.Client, r.Prefix); err != nil {
		t.Fatal(err)
	}
	waitChallenge(t, n, sale, 12)
	// Until the line is restored a join is told to wait (503): on a busy
	// machine that outlasts the view's refresh.
	testenv.Eventually(t, 10*time.Second, "a join answered once the line is restored", func() bool {
		res, ch = join("carol", nil)
		return res.Status != fasthttp.StatusServiceUnavailable
	})
	needs("join after Redis lost the line", res, ch, 12)

	if res := putAdmission(t, n, sale, `{"challenge_bits": 0}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits 0 = %d %s, want 200", res.Status, res.Body)
	}
	waitChallenge(t, n, sale, 0)
	if res, _ := join("carol", nil); res.Status != fasthttp.StatusAccepted {
		t.Errorf("join with the challenge switched off = %d %s, want 202", res.Status, res.Body)
	}
	if res := putAdmission(t, n, sale, `{"challenge_bits": 33}`); res.Status != fasthttp.StatusBadRequest || !json.Valid(res.Body) {
		t.Errorf("PUT challenge_bits 33 = %d %s, want 400", res.Status, res.Body)
	}
}

// waitChallenge waits until the node's admin view shows challenge_bits.
func waitChallenge(t *testing.T, n *edgetest.Node, sale string, bits int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("admission of %s with challenge_bits %d", sale, bits), func() bool {
		res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/admission"})
		var a struct {
			ChallengeBits int `json:"challenge_bits"`
		}
		return res.Status == fasthttp.StatusOK && json.Unmarshal(res.Body, &a) == nil && a.ChallengeBits == bits
	})
}

// publishedChallenge is the challenge a sale's snapshot publishes; zero
// when it publishes none.
func publishedChallenge(t *testing.T, n *edgetest.Node, sale string) (ch challengeAnswer) {
	t.Helper()
	res := n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
	var snap struct {
		Challenge *struct {
			Value          string `json:"value"`
			DifficultyBits int    `json:"difficulty_bits"`
		} `json:"challenge"`
	}
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &snap) != nil {
		t.Fatalf("GET snapshot = %d %s", res.Status, res.Body)
	}
	if snap.Challenge != nil {
		ch.Challenge, ch.DifficultyBits = snap.Challenge.Value, snap.Challenge.DifficultyBits
	}
	return ch
}

// waitPublished waits until the sale's snapshot publishes a challenge of
// bits (none for 0), and returns it.
func waitPublished(t *testing.T, n *edgetest.Node, sale string, bits int) challengeAnswer {
	t.Helper()
	var ch challengeAnswer
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("snapshot of %s publishing %d bits", sale, bits), func() bool {
		ch = publishedChallenge(t, n, sale)
		return ch.DifficultyBits == bits && (ch.Challenge != "") == (bits > 0)
	})
	return ch
}

// solvesFor reports whether solution solves the published challenge ch for
// account: SHA-256(ch "~" account ":" solution) with its leading zero bits,
// as the package doc of challenge has it.
func solvesFor(ch challengeAnswer, account, solution string) bool {
	h := sha256.Sum256([]byte(ch.Challenge + "~" + account + ":" + solution))
	z := 0
	for _, b := range h {
		if b != 0 {
			z += bits.LeadingZeros8(b)
			break
		}
		z += 8
	}
	return z >= ch.DifficultyBits
}

// TestSnapshotPublishesTheChallenge: while a sale asks for a proof of work,
// its snapshot publishes a challenge, and a shopper who solved it for their
// account joins with one request — no 403 first. Another account cannot use
// that solution; an account the trust rules ask more of still gets its own
// harder challenge; with the setting off, the snapshot publishes none.
func TestSnapshotPublishesTheChallenge(t *testing.T) {
	t.Parallel()
	const sale = "published"
	n := saleNode(t, sale, nil)
	if ch := publishedChallenge(t, n, sale); ch.Challenge != "" {
		t.Fatalf("snapshot of a sale with no proof of work publishes %+v", ch)
	}
	if res := putAdmission(t, n, sale, `{"challenge_bits": 8}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits 8 = %d %s, want 200", res.Status, res.Body)
	}
	ch := waitPublished(t, n, sale, 8)
	join := func(token string, header map[string]string) *edgetest.Response {
		t.Helper()
		return n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: token, Header: header})
	}
	sol, ok := challenge.Solve(ch.Challenge, "alice", 1<<24)
	if !ok {
		t.Fatal("no solution found")
	}
	headers := map[string]string{"X-Challenge": ch.Challenge, "X-Challenge-Solution": sol}
	if !solvesFor(ch, "mallory", sol) {
		if res := join(edgetest.UserToken(t, "mallory"), headers); res.Status != fasthttp.StatusForbidden {
			t.Errorf("mallory's join with alice's solution = %d %s, want 403", res.Status, res.Body)
		}
	}
	if res := join(edgetest.UserToken(t, "alice"), headers); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("alice's first join with the published challenge solved = %d %s, want 202", res.Status, res.Body)
	}

	// A day-old account solves 6 bits more: the published 8 are not enough.
	putDefences(t, n, `{"trust": {"min_account_age_days": 7, "extra_challenge_bits": 6}}`)
	young := signedUser(t, "fresh", jwt.MapClaims{"account_created_at": time.Now().Add(-24 * time.Hour).Unix()})
	if got := publishedChallenge(t, n, sale); got.DifficultyBits != 8 {
		t.Errorf("published difficulty with trust rules set = %d, want the sale's 8", got.DifficultyBits)
	}
	sol, _ = challenge.Solve(ch.Challenge, "fresh", 1<<24)
	res := join(young, map[string]string{"X-Challenge": ch.Challenge, "X-Challenge-Solution": sol})
	var own challengeAnswer
	if res.Status != fasthttp.StatusForbidden || json.Unmarshal(res.Body, &own) != nil || own.DifficultyBits != 14 {
		t.Fatalf("young account's join with the published challenge solved = %d %s, want 403 with 14 bits", res.Status, res.Body)
	}

	if res := putAdmission(t, n, sale, `{"challenge_bits": 0}`); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT challenge_bits 0 = %d %s, want 200", res.Status, res.Body)
	}
	waitPublished(t, n, sale, 0)
}
