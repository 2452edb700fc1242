package pagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/assets"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/static"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// workerBudget bounds everything the browser does in TestChallengeWorker,
// on a box that may be busy with other tests (Chromium hashed 5–8k/s
// beside the lab's others here, 50–120k/s alone).
const workerBudget = 90 * time.Second

// cheapTries bounds the work of each default-difficulty solve in
// TestChallengeWorker: the test picks challenges whose smallest solution
// takes at most this many tries (half the average at 17 bits, about 2 in
// 5 challenges), so its browser's work is bounded, not chance's: 2^17
// tries on average and 1 in 100 solves 4.6 times that. The rate is per
// try, so the pick leaves it as it is.
const cheapTries = 1 << 16

// The golden challenge of edge/internal/challenge's TestGolden (acct-42 in
// spring-drop, 12 bits, issued at tokenstest.Start() with an all-zero
// nonce) and its documented solution: the smallest s that solves it.
const (
	goldenChallenge = "v1.test1.spring-drop.1893499200.12.AAAAAAAAAAAAAAAAAAAAAA.rJvbi7rX_yYfV6CtGgXO_vp5Yo6UhX-MV2hgPbLjM34"
	goldenSolution  = "12483"
)

// The golden published challenge of edge/internal/challenge's
// TestPublicGolden (spring-drop, 12 bits, the minute of tokenstest.Start())
// and its documented smallest solutions for two accounts.
const goldenPublished = "p1.test1.spring-drop.1893499200.12.yRgY_DJktdiicMA-U6Pe3GuPuh2SdnGnsWnXUuFeuk4"

var goldenPublishedSolutions = map[string]string{"acct-42": "1853", "acct-43": "6309"}

// TestChallengeWorker: the page's proof-of-work worker
// (static/challenge-worker.js), loaded by the page under the page's own
// Content-Security-Policy in headless Chromium, finds the documented
// solutions of the golden challenges, personal and published, and solves
// real ones at the default difficulty, which the edge's Verify takes: a
// published challenge for the account it is given (any UTF-8 text), as
// challenge.Solve does. It logs the solve times and hash rate at 17 bits,
// the figure the difficulty table in edge/internal/challenge/doc.go
// estimates for phones.
func TestChallengeWorker(t *testing.T) {
	t.Parallel()
	base := serveAssets(t)
	ctx, cancel := context.WithTimeout(t.Context(), workerBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	p := newPage(t, browser)
	// The page itself, for its origin and its policy; it finds no sale here, which does not matter.
	p.do("open the page", chromedp.Navigate(base+"/?sale=worker"))
	p.waitUntil("the page's script", `document.getElementById('notice').textContent !== ''`, 10*time.Second)

	t.Run("golden", func(t *testing.T) {
		got := solveInWorker(t, p, goldenChallenge, 12, "")
		if got.Solution != goldenSolution || got.Tries != 12484 {
			t.Errorf("worker's solution of the golden challenge = %q after %d tries, want %q after 12484 (challenge.TestGolden)",
				got.Solution, got.Tries, goldenSolution)
		}
		c, err := challenge.New(tokenstest.KeySet(), challenge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Verify("acct-42", "spring-drop", goldenChallenge, got.Solution, 12, tokenstest.Start()); err != nil {
			t.Errorf("Verify(golden, worker's %q) = %v, want nil", got.Solution, err)
		}
		t.Logf("golden challenge (12 bits) in headless Chromium: %d tries in %.0f ms, %.0f hashes/s", got.Tries, got.MS, got.rate())
	})

	t.Run("default_difficulty", func(t *testing.T) {
		// A solve's length is chance (geometric, 2^bits tries on average),
		// so the rate is taken over several.
		const account, sale, solves = "shopper-pow", "spring-drop", 4
		bits := challenge.DefaultDifficultyBits
		c, err := challenge.New(tokenstest.KeySet(), challenge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tries int64
		var ms float64
		for i := range solves {
			now := time.Now()
			ch := cheapChallenge(t, func() (challenge.Challenge, error) { return c.Issue(account, sale, bits, now) }, account)
			got := solveInWorker(t, p, ch.Value, bits, account)
			if err := c.Verify(account, sale, ch.Value, got.Solution, bits, now); err != nil {
				t.Errorf("Verify(%s, worker's %q) = %v, want nil", ch.Value, got.Solution, err)
			}
			if want, ok := challenge.Solve(ch.Value, account, uint64(got.Tries)); !ok || want != got.Solution {
				t.Errorf("worker's solution = %q, want %q, the smallest (challenge.Solve)", got.Solution, want)
			}
			t.Logf("%d bits in headless Chromium, solve %d: %d tries (%.2f times the average) in %.0f ms, %.0f hashes/s",
				bits, i+1, got.Tries, float64(got.Tries)/float64(uint64(1)<<bits), got.MS, got.rate())
			tries += got.Tries
			ms += got.MS
		}
		rate := float64(tries) / (ms / 1000)
		t.Logf("%d bits in headless Chromium, %d solves: %d tries in %.0f ms, %.0f hashes/s; the average solve (2^%d tries) at this rate: %.2f s",
			bits, solves, tries, ms, rate, bits, float64(uint64(1)<<bits)/rate)
	})

	t.Run("golden_published", func(t *testing.T) {
		c, err := challenge.New(tokenstest.KeySet(), challenge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, account := range []string{"acct-42", "acct-43"} {
			want := goldenPublishedSolutions[account]
			got := solveInWorker(t, p, goldenPublished, 12, account)
			if got.Solution != want || strconv.FormatInt(got.Tries-1, 10) != want {
				t.Errorf("worker's solution of the golden published challenge for %s = %q after %d tries, want %q, the smallest (challenge.TestPublicGolden)",
					account, got.Solution, got.Tries, want)
			}
			if err := c.Verify(account, "spring-drop", goldenPublished, got.Solution, 12, tokenstest.Start().Add(30*time.Second)); err != nil {
				t.Errorf("Verify(golden published, %s, worker's %q) = %v, want nil", account, got.Solution, err)
			}
			t.Logf("golden published challenge (12 bits) for %s in headless Chromium: %d tries in %.0f ms, %.0f hashes/s",
				account, got.Tries, got.MS, got.rate())
		}
	})

	t.Run("published_default_difficulty", func(t *testing.T) {
		// One published challenge, the same for every shopper of the sale,
		// worked for several accounts: each solution is the account's own
		// (the smallest challenge.Solve finds for it) and Verify takes it
		// for that account only. One account is not ASCII: the worker hashes
		// its UTF-8 bytes, as the edge does.
		const sale = "spring-drop"
		bits := challenge.DefaultDifficultyBits
		c, err := challenge.New(tokenstest.KeySet(), challenge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		accounts := []string{"shopper-pow-1", "shopper-pow-2", "shöpper-東京-🛒", strings.Repeat("é", challenge.MaxAccountLen/2)}
		// The minute published for, such that every account's solution is
		// cheap (about 1 minute in 40).
		now := time.Now()
		var ch challenge.Challenge
		for minute := 0; ; minute++ {
			if minute == 1000 {
				t.Fatalf("no minute of the next 1000 publishes a challenge every account solves within %d tries", cheapTries)
			}
			now = now.Add(time.Minute)
			if ch, err = c.Publish(sale, bits, now); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(accounts, func(a string) bool { _, ok := challenge.Solve(ch.Value, a, cheapTries); return !ok }) {
				break
			}
		}
		solutions := map[string]string{}
		var tries int64
		var ms float64
		for i, account := range accounts {
			got := solveInWorker(t, p, ch.Value, bits, account)
			if err := c.Verify(account, sale, ch.Value, got.Solution, bits, now); err != nil {
				t.Errorf("Verify(%s, account %q, worker's %q) = %v, want nil", ch.Value, account, got.Solution, err)
			}
			if want, ok := challenge.Solve(ch.Value, account, uint64(got.Tries)); !ok || want != got.Solution {
				t.Errorf("worker's solution for %q = %q, want %q, the smallest (challenge.Solve)", account, got.Solution, want)
			}
			solutions[account] = got.Solution
			t.Logf("%d bits published in headless Chromium, account %d (%d bytes): %d tries (%.2f times the average) in %.0f ms, %.0f hashes/s",
				bits, i+1, len(account), got.Tries, float64(got.Tries)/float64(uint64(1)<<bits), got.MS, got.rate())
			tries += got.Tries
			ms += got.MS
		}
		// The work binds the account: another account's solution is not
		// this one's (unless by the chance of 2^-bits it solves both).
		for i, account := range accounts {
			other := accounts[(i+1)%len(accounts)]
			if solutions[other] == solutions[account] {
				continue
			}
			if err := c.Verify(account, sale, ch.Value, solutions[other], bits, now); err == nil {
				t.Errorf("Verify(account %q, the solution worked for %q) = nil, want a refusal", account, other)
			}
		}
		rate := float64(tries) / (ms / 1000)
		t.Logf("%d bits published in headless Chromium, %d solves: %d tries in %.0f ms, %.0f hashes/s; the average solve (2^%d tries) at this rate: %.2f s",
			bits, len(accounts), tries, ms, rate, bits, float64(uint64(1)<<bits)/rate)
	})

	t.Run("published_needs_account", func(t *testing.T) {
		// The edge takes a published solution only for an account of 1 to
		// 256 bytes: the worker refuses to work without one.
		for name, account := range map[string]any{
			"none": nil, "empty": "", "not text": 42, "257 bytes": strings.Repeat("a", challenge.MaxAccountLen+1),
			"129 two-byte characters": strings.Repeat("é", challenge.MaxAccountLen/2+1),
		} {
			if msg := workerRefusal(t, p, goldenPublished, 12, account); !strings.Contains(msg, "account") {
				t.Errorf("%s: worker's answer = %q, want an error about the account", name, msg)
			}
		}
		// A personal challenge's work has no account in it: the worker
		// needs none, and one given changes nothing.
		if got := solveInWorker(t, p, goldenChallenge, 12, "acct-42"); got.Solution != goldenSolution {
			t.Errorf("worker's solution of the golden personal challenge, given an account = %q, want %q", got.Solution, goldenSolution)
		}
	})
}

// cheapChallenge returns a challenge from issue whose smallest solution
// for account takes at most cheapTries tries, issuing again until one does.
func cheapChallenge(t *testing.T, issue func() (challenge.Challenge, error), account string) challenge.Challenge {
	t.Helper()
	for range 100 {
		ch, err := issue()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := challenge.Solve(ch.Value, account, cheapTries); ok {
			return ch
		}
	}
	t.Fatalf("100 challenges issued, none solved within %d tries", cheapTries)
	return challenge.Challenge{}
}

// workerAnswer is the worker's answer to one challenge.
type workerAnswer struct {
	Solution string  `json:"solution"`
	Tries    int64   `json:"tries"`
	MS       float64 `json:"ms"` // time spent solving, by the worker's clock
}

// rate is the worker's hashes a second.
func (a workerAnswer) rate() float64 { return float64(a.Tries) / (a.MS / 1000) }

// solveInWorker starts the page's worker in p, posts it the challenge, its
// difficulty and the account (none when ""), and waits for its answer.
func solveInWorker(t *testing.T, p *page, value string, bits int, account string) workerAnswer {
	t.Helper()
	var a any
	if account != "" {
		a = account
	}
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[workerAnswer](workerJS(value, bits, a), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("solve %s for %q in the worker: %v\npage: %s", value, account, err, p.state())
	}
	return got
}

// workerRefusal posts the page's worker in p a message it must refuse, with
// account as given (any JSON value), and returns the worker's error.
func workerRefusal(t *testing.T, p *page, value string, bits int, account any) string {
	t.Helper()
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[workerAnswer](workerJS(value, bits, account), chromedp.EvalAwaitPromise))
	if err == nil {
		t.Fatalf("worker's answer to %s for %v = %+v, want an error", value, account, got)
	}
	return err.Error()
}

// workerJS is a script that starts the page's worker, posts it {challenge,
// bits, account} (account left out when nil) and settles with its answer,
// or fails with its error.
func workerJS(value string, bits int, account any) string {
	msg := map[string]any{"challenge": value, "bits": bits}
	if account != nil {
		msg["account"] = account
	}
	b, err := json.Marshal(msg)
	if err != nil {
		panic(err) // strings, ints and nil only
	}
	return fmt.Sprintf(`(async (msg) => {
  const w = new Worker('/static/challenge-worker.js');
  try {
    return await new Promise((ok, fail) => {
      w.onmessage = (e) => {
        if (e.data.error) fail(new Error('worker: ' + e.data.error));
        else if (typeof e.data.solution === 'string') ok(e.data);
      };
      w.onerror = (e) => fail(new Error('worker did not run: ' + (e.message || 'blocked or not found')));
      w.postMessage(msg);
    });
  } finally { w.terminate(); }
})(%s)`, b)
}

// serveAssets serves the embedded page as the edge does (assets.Handler,
// with its headers and policy) on a real 127.0.0.1 port, for tests that need
// the page's origin but no sale; every other path is 404. It stops in
// t.Cleanup.
func serveAssets(t *testing.T) string {
	t.Helper()
	h, err := assets.Handler(static.Files)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if err := h(ctx); err != nil {
			ctx.Error(`{"error":"not_found","message":"Not found."}`, fasthttp.StatusNotFound)
			ctx.SetContentType("application/json")
		}
	}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-served
	})
	return "http://" + ln.Addr().String()
}

// challengePageBudget bounds everything the browser does in
// TestChallengePage.
const challengePageBudget = 90 * time.Second

// insecureHost is a name the test's Chromium resolves to 127.0.0.1 and,
// unlike 127.0.0.1 and localhost, does not take for a secure context: a page
// there has no WebCrypto, as on plain http anywhere but the shopper's own
// machine.
const insecureHost = "flashgate-shop.test"

// TestChallengePage: with ops asking for a proof of work in a sale
// (challenge_bits), the sale snapshot publishes a challenge; on Join the
// page says it is checking that the shopper is a person, solves that
// challenge for the signed-in account in its worker, and joins once, with
// X-Challenge and X-Challenge-Solution: the edge answers no 403 and the page
// shows its place in line. When the edge still wants a personal challenge
// (the page's snapshot had none; the shop's signals mark the account as low
// trust) it answers the join 403 challenge_required, and the page solves
// that one and joins again, as before sales published one. No join without
// a solution gets a place. Solutions the edge refuses get fresh challenges,
// and after a few the page gives up with Try again; signing out stops the
// worker; and without WebCrypto (plain http) the page joins without a
// solution and says the sale needs a secure connection instead of working
// forever.
func TestChallengePage(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := startStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), challengePageBudget)
	defer cancel()
	browser := startBrowser(t, ctx, chromedp.Flag("host-resolver-rules", "MAP "+insecureHost+" 127.0.0.1"))
	verifier, err := challenge.New(tokenstest.KeySet(), challenge.Options{}) // the keys edgetest.Config gives the edge
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stack and browser up in %v", time.Since(start).Round(time.Millisecond))

	// openPageAs opens the page of def at base and records its joins; setup,
	// if any, runs on the tab before the page loads. The page is signed in
	// by the caller.
	openPageAs := func(t *testing.T, base string, def origintest.Sale, fragment string, setup func(*page)) (*page, *joinLog) {
		t.Helper()
		p := newPage(t, browser)
		joins := recordJoins(t, p, def.SaleID)
		if setup != nil {
			setup(p)
		}
		p.do("open the page", chromedp.Navigate(base+"/?sale="+url.QueryEscape(def.SaleID)+fragment))
		p.waitUntil("the sale's name", fmt.Sprintf(`document.getElementById('sale-name').textContent === %q`, def.Name), 10*time.Second)
		return p, joins
	}
	// openPage opens the page of def at base, signs account in and records
	// its joins.
	openPage := func(t *testing.T, base string, def origintest.Sale, account string) (*page, *joinLog) {
		t.Helper()
		p, joins := openPageAs(t, base, def, "", nil)
		signIn(p, account)
		return p, joins
	}
	// inLine waits until the page shows its place in the waiting line
	// (admission is paused in these sales) and checks it is the one the
	// edge gives the page's queue token.
	inLine := func(t *testing.T, p *page, sale string, within time.Duration) {
		t.Helper()
		p.waitUntil("a place in line", `document.getElementById('queue-state').dataset.state === 'waiting' && document.getElementById('position').textContent.startsWith('#')`, within)
		queueToken, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('fg.queue.`+sale+`') || ''`))
		if err != nil || queueToken == "" {
			t.Fatalf("the page's queue token = %q (%v), want one", queueToken, err)
		}
		res, a := s.Node.Status(t, sale, queueToken)
		if res.Status != fasthttp.StatusOK || a.State != "waiting" {
			t.Fatalf("status of the page's queue token = %d %s, want 200 waiting", res.Status, res.Body)
		}
		if got, want := p.text("position"), fmt.Sprintf("#%d", a.Position); got != want {
			t.Errorf("#position = %q, want %q, the edge's", got, want)
		}
		if p.visible("check") {
			t.Errorf("the check is still shown once in line\npage: %s", p.state())
		}
	}
	// pressJoin presses Join and returns the moment, by the page's clock
	// (performance.now()), at which it did.
	pressJoin := func(t *testing.T, p *page) float64 {
		t.Helper()
		at, err := chromedp.Run(p.ctx, chromedp.Evaluate[float64](`(() => { document.getElementById('join-button').click(); return performance.now(); })()`))
		if err != nil {
			t.Fatalf("press Join: %v\npage: %s", err, p.state())
		}
		return at
	}
	// joinTimes are the start times of the page's joins of sale, by the
	// page's clock.
	joinTimes := func(t *testing.T, p *page, sale string) []float64 {
		t.Helper()
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]float64](`performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname === '/v1/sales/`+sale+`/queue').map((e) => e.startTime)`))
		if err != nil {
			t.Fatalf("read the joins' timing: %v", err)
		}
		return got
	}
	// verified checks that the edge's keys take join's solution for
	// account at bits and that it is the smallest, as the page finds it.
	verified := func(t *testing.T, join joinAttempt, account, sale string, bits int) {
		t.Helper()
		if err := verifier.Verify(account, sale, join.Challenge, join.Solution, bits, time.Now()); err != nil {
			t.Errorf("Verify(the page's challenge %q for %s, solution %q) = %v, want nil", join.Challenge, account, join.Solution, err)
		}
		tries, err := strconv.ParseUint(join.Solution, 10, 64)
		if want, ok := challenge.Solve(join.Challenge, account, tries+1); err != nil || !ok || want != join.Solution {
			t.Errorf("the page's solution = %q, want %q, the smallest (challenge.Solve)", join.Solution, want)
		}
	}

	t.Run("published_one_join", func(t *testing.T) {
		const sale, account, bits = "page-pow", "shopper-pat", 12
		def := openChallengeSale(t, s, sale, bits)
		p, joins := openPage(t, s.BaseURL, def, account)
		before := challengeMetrics(t, s)
		pressed := pressJoin(t, p)
		inLine(t, p, sale, 15*time.Second)
		if got := p.text("position"); got != "#1" {
			t.Errorf("#position = %q, want #1 (the only shopper in line)", got)
		}

		got := joins.wait(t, 1)
		if len(got) != 1 {
			t.Fatalf("joins = %v, want 1: with the solution of the published challenge", got)
		}
		join := got[0]
		if !challenge.IsPublic(join.Challenge) || join.Solution == "" || join.Status != fasthttp.StatusAccepted {
			t.Errorf("join = %+v, want 202 with the published challenge (p1.) in X-Challenge and X-Challenge-Solution", join)
		}
		verified(t, join, account, sale, bits)
		joins.checkNoPlaceWithoutSolution(t)
		// The edge's own count: one solution taken, no challenge issued
		// and no join answered 403.
		if delta := challengeMetrics(t, s).since(before); !maps.Equal(delta, map[string]int{"solved": 1}) {
			t.Errorf("the edge's challenge counters moved by %v, want solved +1 only (no 403, no challenge issued)", delta)
		}

		// The time from the press of Join to the join with the solution:
		// the worker's start and its solve. The page tries 0, 1, 2, ...,
		// so its solution s took s+1 tries. At this difficulty the worker's
		// start is a good part of it (TestChallengeWorker gives the hash
		// rate).
		times := joinTimes(t, p, sale)
		if len(times) != 1 {
			t.Fatalf("the page's join timings = %v, want 1", times)
		}
		tries, _ := strconv.ParseInt(join.Solution, 10, 64)
		tries++
		gap := times[0] - pressed
		t.Logf("%d bits published, in headless Chromium, on the page: %d tries (%.2f times the average 2^%d); %.0f ms from the press of Join "+
			"to the one join, with the solution, the worker's start included (%.0f tries a second over that time)", bits, tries,
			float64(tries)/float64(uint64(1)<<bits), bits, gap, float64(tries)/(gap/1000))
	})

	t.Run("personal_when_snapshot_has_none", func(t *testing.T) {
		// The page's snapshots come without the challenge (as one read just
		// before ops asked for a proof of work would): the page joins
		// without a solution, is answered 403 challenge_required, solves
		// the personal challenge and joins again, as before sales
		// published one.
		const sale, account, bits = "page-pow-personal", "shopper-pia", 12
		def := openChallengeSale(t, s, sale, bits)
		var stripped atomic.Int64
		p, joins := openPageAs(t, s.BaseURL, def, "", func(p *page) { stripSnapshotChallenge(t, s, p, sale, &stripped) })
		signIn(p, account)
		before := challengeMetrics(t, s)
		pressed := pressJoin(t, p)
		inLine(t, p, sale, 15*time.Second)

		got := joins.wait(t, 2)
		if len(got) != 2 {
			t.Fatalf("joins = %v, want 2: one refused for want of a solution, one with it", got)
		}
		if first := got[0]; first.Challenge != "" || first.Solution != "" || first.Status != fasthttp.StatusForbidden {
			t.Errorf("first join = %+v, want 403 without X-Challenge and X-Challenge-Solution", first)
		}
		second := got[1]
		if second.Challenge == "" || challenge.IsPublic(second.Challenge) || second.Solution == "" || second.Status != fasthttp.StatusAccepted {
			t.Errorf("second join = %+v, want 202 with a personal challenge (v1.) in X-Challenge and X-Challenge-Solution", second)
		}
		verified(t, second, account, sale, bits)
		joins.checkNoPlaceWithoutSolution(t)
		if delta := challengeMetrics(t, s).since(before); !maps.Equal(delta, map[string]int{"issued": 1, "rejected": 1, "solved": 1}) {
			t.Errorf("the edge's challenge counters moved by %v, want issued, rejected (403) and solved +1", delta)
		}
		if stripped.Load() == 0 {
			t.Error("no snapshot was stripped of its challenge: the test did not test the page without one")
		}

		// The time from the 403's answer to the join with the solution.
		times := joinTimes(t, p, sale)
		if len(times) != 2 {
			t.Fatalf("the page's join timings = %v, want 2", times)
		}
		tries, _ := strconv.ParseInt(second.Solution, 10, 64)
		tries++
		t.Logf("%d bits personal, in headless Chromium, on the page: %d tries (%.2f times the average 2^%d); %.0f ms from the press of Join "+
			"to the second join, with the solution, the first join and its 403 included", bits, tries,
			float64(tries)/float64(uint64(1)<<bits), bits, times[1]-pressed)
	})

	t.Run("low_trust_account", func(t *testing.T) {
		// The shop's signals mark the account as low trust (a day old,
		// with trust rules asking 7): the edge refuses the solution of the
		// published challenge as too easy for it and answers with a
		// personal challenge 4 bits harder, which the page solves and joins
		// with. The page's token is the shop's, handed over in the address.
		const sale, account, bits, extra = "page-pow-trust", "shopper-tia", 8, 4
		putDefences(t, s, fmt.Sprintf(`{"trust": {"min_account_age_days": 7, "extra_challenge_bits": %d}}`, extra))
		t.Cleanup(func() { putDefences(t, s, `{"trust": {"min_account_age_days": 0}}`) })
		def := openChallengeSale(t, s, sale, bits)
		token := shopUserToken(t, account, jwt.MapClaims{"account_created_at": time.Now().Add(-24 * time.Hour).Unix()})
		p, joins := openPageAs(t, s.BaseURL, def, "#user_token="+url.QueryEscape(token), nil)
		confirmHandover(p, account)
		p.waitUntil("the join button", `!document.getElementById('join-button').disabled`, 5*time.Second)
		before := challengeMetrics(t, s)
		pressJoin(t, p)
		inLine(t, p, sale, 15*time.Second)

		got := joins.wait(t, 2)
		if len(got) != 2 {
			t.Fatalf("joins = %v, want 2: one with the published challenge, refused, one with the personal one", got)
		}
		if first := got[0]; !challenge.IsPublic(first.Challenge) || first.Solution == "" || first.Status != fasthttp.StatusForbidden {
			t.Errorf("first join = %+v, want 403 to the published challenge's solution", first)
		}
		verified(t, got[0], account, sale, bits) // right, but too easy for this account
		second := got[1]
		if second.Challenge == "" || challenge.IsPublic(second.Challenge) || second.Solution == "" || second.Status != fasthttp.StatusAccepted {
			t.Errorf("second join = %+v, want 202 with a personal challenge (v1.)", second)
		}
		verified(t, second, account, sale, bits+extra)
		joins.checkNoPlaceWithoutSolution(t)
		if delta := challengeMetrics(t, s).since(before); !maps.Equal(delta, map[string]int{"too_easy": 1, "issued": 1, "rejected": 1, "solved": 1}) {
			t.Errorf("the edge's challenge counters moved by %v, want too_easy, issued, rejected (403) and solved +1", delta)
		}
	})

	t.Run("checking", func(t *testing.T) {
		// A difficulty the page cannot solve within the subtest (2^30
		// hashes on average, minutes here), so its checking state stays
		// to be seen; signing out stops it. The check is of the published
		// challenge, before any join.
		const sale, account, bits = "page-pow-slow", "shopper-quin", 30
		def := openChallengeSale(t, s, sale, bits)
		p, joins := openPage(t, s.BaseURL, def, account)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the check", `document.getElementById('queue-state').dataset.state === 'checking'`, 10*time.Second)
		if got, want := p.text("queue-state"), "Checking that you're a person — this takes a few seconds on a phone."; got != want {
			t.Errorf("#queue-state = %q, want %q", got, want)
		}
		// Said once in the live region; the progress is a labelled bar and
		// a hint beside it that is not read out at every step.
		a11y, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
  const st = document.getElementById('queue-state'), bar = document.getElementById('check-progress');
  return [st.getAttribute('aria-live'), bar.tagName, bar.getAttribute('aria-label'),
    document.getElementById(bar.getAttribute('aria-describedby')).id, document.getElementById('join-button').disabled].join(' ');
})()`))
		if want := "polite PROGRESS Checking that you're a person check-hint true"; err != nil || a11y != want {
			t.Errorf("live region, progress bar, its label and hint, join button disabled = %q (%v), want %q", a11y, err, want)
		}
		if got := p.text("join-button"); got != "Checking…" {
			t.Errorf("#join-button = %q while checking, want Checking…", got)
		}
		p.waitUntil("the worker's progress", `/usual work|Just started/.test(document.getElementById('check-hint').textContent)`, 10*time.Second)
		if n := workerTargets(t, p); n != 1 {
			t.Errorf("%d challenge workers running while checking, want 1", n)
		}
		p.screenshot("shopper-page-checking.png")

		p.do("sign out", chromedp.Click(chromedp.ID("signout")))
		p.waitUntil("signed out", `!document.getElementById('signed-in').getClientRects().length && document.getElementById('queue-state').dataset.state !== 'checking'`, 5*time.Second)
		if p.visible("check") {
			t.Errorf("the check is still shown after signing out\npage: %s", p.state())
		}
		testenv.Eventually(t, 5*time.Second, "the challenge worker gone after signing out", func() bool { return workerTargets(t, p) == 0 })
		// The worker is gone without an answer, so no join can follow.
		if got := joins.all(); len(got) != 0 {
			t.Errorf("joins = %v, want none: the page was solving the published challenge", got)
		}
	})

	t.Run("refused_then_try_again", func(t *testing.T) {
		// Every solution the page sends is spoiled on the way (the
		// browser's request interception), so the edge refuses each with a
		// fresh challenge: the page solves the published one and then a
		// few personal ones, then gives up with Try again. Without the
		// spoiling, Try again gets it in line with one join.
		const sale, account, bits = "page-pow-refused", "shopper-ray", 8
		def := openChallengeSale(t, s, sale, bits)
		p, joins := openPage(t, s.BaseURL, def, account)
		stopSpoiling := spoilSolutions(t, p, sale)
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the page giving up", `document.getElementById('join-button').textContent === 'Try again' && !document.getElementById('join-button').disabled`, 20*time.Second)
		if got := p.text("notice"); !strings.Contains(got, "could not finish checking") {
			t.Errorf("#notice = %q, want it to say the check could not be finished", got)
		}
		if p.visible("check") || p.text("queue-state") != "Not in line yet." {
			t.Errorf("after giving up, check shown %v, #queue-state %q; want the check gone and not in line", p.visible("check"), p.text("queue-state"))
		}
		got := joins.wait(t, 3)
		if len(got) != 3 {
			t.Fatalf("joins = %v, want 3: one for each of 3 challenges solved, the published one first", got)
		}
		seen := map[string]bool{}
		for i, j := range got {
			if j.Status != fasthttp.StatusForbidden || j.Solution == "" || challenge.IsPublic(j.Challenge) != (i == 0) || seen[j.Challenge] {
				t.Errorf("join %d = %+v, want 403 with a solution, each for another challenge, the published one first", i, j)
			}
			seen[j.Challenge] = true
		}

		stopSpoiling()
		p.do("press Try again", chromedp.Click(chromedp.ID("join-button")))
		inLine(t, p, sale, 15*time.Second)
		if got := p.text("notice"); strings.Contains(got, "could not") {
			t.Errorf("#notice = %q once in line, want the old failure gone", got)
		}
		if got := joins.wait(t, 4); len(got) != 4 || !challenge.IsPublic(got[3].Challenge) || got[3].Status != fasthttp.StatusAccepted {
			t.Errorf("joins = %v, want a fourth, 202 with the published challenge", got)
		}
		joins.checkNoPlaceWithoutSolution(t)
	})

	t.Run("insecure_context", func(t *testing.T) {
		// The page over plain http at a name other than localhost: no
		// WebCrypto, so no check; it joins without a solution, as it cannot
		// solve the published challenge, says at once what the 403 means
		// and joins no further.
		const sale, account, bits = "page-pow-http", "shopper-sal", 8
		def := openChallengeSale(t, s, sale, bits)
		base := strings.Replace(s.BaseURL, "127.0.0.1", insecureHost, 1)
		p, joins := openPage(t, base, def, account)
		if secure, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`window.isSecureContext && !!(window.crypto && crypto.subtle)`)); err != nil || secure {
			t.Fatalf("page at %s: secure context with WebCrypto = %v (%v), want false", base, secure, err)
		}
		p.do("join the line", chromedp.Click(chromedp.ID("join-button")))
		p.waitUntil("the secure-connection notice", `document.getElementById('notice').textContent.includes('secure connection')`, 10*time.Second)
		if state := p.text("queue-state"); state != "Not in line yet." || p.visible("check") {
			t.Errorf("#queue-state = %q, check shown %v; want not in line and no check under way", state, p.visible("check"))
		}
		if disabled, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.getElementById('join-button').disabled`)); err != nil || disabled {
			t.Errorf("join button disabled = %v (%v), want it usable again", disabled, err)
		}
		time.Sleep(500 * time.Millisecond) // room for a join the page should not make
		if got := joins.wait(t, 1); len(got) != 1 || got[0].Status != fasthttp.StatusForbidden || got[0].Challenge != "" {
			t.Errorf("joins = %v, want only the one without a solution, answered 403", got)
		}
		if n := workerTargets(t, p); n != 0 {
			t.Errorf("%d challenge workers on a page without WebCrypto, want none", n)
		}
		p.screenshot("shopper-page-challenge-insecure.png")
	})
	t.Logf("TestChallengePage took %v", time.Since(start).Round(time.Millisecond))
}

// openChallengeSale opens sale with 3 units, admission paused (so a
// shopper stays in line, with a place to show) and ops asking for a proof
// of work of bits, and waits until the edge's view of the sale has it and
// its snapshot publishes the challenge, so that a page opened now reads it.
func openChallengeSale(t *testing.T, s *stack, sale string, bits int) origintest.Sale {
	t.Helper()
	def := s.openSale(t, sale, 3)
	body := fmt.Sprintf(`{"rate_per_s": 0.01, "paused": true, "challenge_bits": %d}`, bits)
	path := "/admin/sales/" + sale + "/admission"
	if res := s.Node.DoAdmin(t, edgetest.Request{Method: "PUT", Path: path, Body: []byte(body)}); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT %s %s = %d %s, want 200", path, body, res.Status, res.Body)
	}
	put := time.Now()
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("GET %s with challenge_bits %d", path, bits), func() bool {
		res := s.Node.DoAdmin(t, edgetest.Request{Method: "GET", Path: path})
		var st struct {
			ChallengeBits int `json:"challenge_bits"`
		}
		return res.Status == fasthttp.StatusOK && json.Unmarshal(res.Body, &st) == nil && st.ChallengeBits == bits
	})
	// Both within 5 s of the PUT.
	testenv.Eventually(t, 5*time.Second-time.Since(put), fmt.Sprintf("GET /v1/sales/%s publishing a challenge of %d bits", sale, bits), func() bool {
		res := s.Node.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
		var snap struct {
			Challenge *struct {
				Value          string `json:"value"`
				DifficultyBits int    `json:"difficulty_bits"`
			} `json:"challenge"`
		}
		return res.Status == fasthttp.StatusOK && json.Unmarshal(res.Body, &snap) == nil && snap.Challenge != nil &&
			challenge.IsPublic(snap.Challenge.Value) && snap.Challenge.DifficultyBits == bits
	})
	return def
}

// putDefences sets the edge's defences (PUT /admin/defences).
func putDefences(t *testing.T, s *stack, body string) {
	t.Helper()
	if res := s.Node.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(body)}); res.Status != fasthttp.StatusOK {
		t.Fatalf("PUT /admin/defences %s = %d %s, want 200", body, res.Status, res.Body)
	}
}

// shopUserToken is a user token for account as the shop's identity service
// signs it (the tokenstest user secret, which the stack's edge and origin
// take), with claims such as the shop's signals.
func shopUserToken(t *testing.T, account string, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"sub": account, "exp": time.Now().Add(time.Hour).Unix()}
	maps.Copy(c, claims)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(tokenstest.UserSecret())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// challengeCounts are the edge's proof-of-work counters: the joins'
// challenges by outcome (flashgate_edge_challenges_total: issued, solved,
// and the refusals by reason) and, as "rejected", the joins answered 403
// challenge_required (flashgate_edge_rejections_total).
type challengeCounts map[string]int

// since is what moved from before to c, leaving out what did not.
func (c challengeCounts) since(before challengeCounts) map[string]int {
	out := map[string]int{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

var (
	challengesMetric = regexp.MustCompile(`(?m)^flashgate_edge_challenges_total\{outcome="([a-z_]+)"\} (\d+)$`)
	rejectedMetric   = regexp.MustCompile(`(?m)^flashgate_edge_rejections_total\{code="challenge_required"\} (\d+)$`)
)

// challengeMetrics reads the edge's challengeCounts from its /metrics.
func challengeMetrics(t *testing.T, s *stack) challengeCounts {
	t.Helper()
	res := s.Node.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
	if res.Status != fasthttp.StatusOK {
		t.Fatalf("GET /metrics = %d %s", res.Status, res.Body)
	}
	c := challengeCounts{}
	for _, m := range challengesMetric.FindAllSubmatch(res.Body, -1) {
		c[string(m[1])], _ = strconv.Atoi(string(m[2]))
	}
	if m := rejectedMetric.FindSubmatch(res.Body); m != nil {
		c["rejected"], _ = strconv.Atoi(string(m[1]))
	}
	return c
}

// stripSnapshotChallenge serves p's reads of sale's snapshot without the
// challenge it publishes, from the edge's current snapshot (the browser's
// request interception), for the rest of the test, and counts them in
// stripped. Call it before the page loads.
func stripSnapshotChallenge(t *testing.T, s *stack, p *page, sale string, stripped *atomic.Int64) {
	t.Helper()
	path := "/v1/sales/" + sale
	intercept(t, p, "*"+path, "the page's snapshot reads", func(e *fetch.EventRequestPaused) {
		if u, err := url.Parse(e.Request.URL); err != nil || u.Path != path || e.Request.Method != "GET" {
			_, _ = chromedp.Call(p.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			return
		}
		res := s.Node.Do(t, edgetest.Request{Method: "GET", Path: path})
		var snap map[string]json.RawMessage
		if err := json.Unmarshal(res.Body, &snap); err != nil {
			t.Errorf("the edge's snapshot of %s = %d %s: %v", sale, res.Status, res.Body, err)
			return
		}
		delete(snap, "challenge")
		body, _ := json.Marshal(snap)
		if _, err := chromedp.Call(p.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: e.RequestID, ResponseCode: int64(res.Status), Body: body,
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}, {Name: "Cache-Control", Value: "no-store"}},
		}); err != nil {
			if p.ctx.Err() == nil {
				t.Errorf("answer the page's snapshot read: %v", err)
			}
			return
		}
		stripped.Add(1)
	})
}

// intercept pauses p's requests whose URL matches pattern (what) and hands
// each to handle, which must continue or answer it, on a goroutine of its
// own, until the function it returns is called (also in t.Cleanup).
func intercept(t *testing.T, p *page, pattern, what string, handle func(*fetch.EventRequestPaused)) (stop func()) {
	t.Helper()
	paused := make(chan *fetch.EventRequestPaused, 64)
	if err := chromedp.Listen(p.ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case paused <- e:
			default: // never block the tab's event loop; an unanswered request fails the test by its wait
			}
		}
	}); err != nil {
		t.Fatalf("listen to the page's paused requests: %v", err)
	}
	if _, err := chromedp.Call(p.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}}); err != nil {
		t.Fatalf("intercept %s: %v", what, err)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case e := <-paused:
				handle(e)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			<-finished
			if _, err := chromedp.Call(p.ctx, fetch.Disable, cdp.Empty{}); err != nil && p.ctx.Err() == nil {
				t.Errorf("stop intercepting %s: %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// joinAttempt is one join the page made, as the browser saw it.
type joinAttempt struct {
	Challenge, Solution string // the page's X-Challenge and X-Challenge-Solution; "" when not sent
	Status              int64  // the answer's status; 0 until it arrives
}

// joinLog records the page's joins of one sale (POST
// /v1/sales/{sale}/queue), from the browser's network events.
type joinLog struct {
	mu    sync.Mutex // guards joins and ids
	joins []joinAttempt
	ids   map[network.RequestID]int // index in joins
}

// recordJoins records p's joins of sale from now on.
func recordJoins(t *testing.T, p *page, sale string) *joinLog {
	t.Helper()
	l := &joinLog{ids: map[network.RequestID]int{}}
	path := "/v1/sales/" + sale + "/queue"
	err := chromedp.Listen(p.ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if u, err := url.Parse(e.Request.URL); err != nil || e.Request.Method != "POST" || u.Path != path {
				return
			}
			l.ids[e.RequestID] = len(l.joins)
			l.joins = append(l.joins, joinAttempt{Challenge: header(e.Request.Headers, "X-Challenge"), Solution: header(e.Request.Headers, "X-Challenge-Solution")})
		case *network.EventResponseReceived:
			if i, ok := l.ids[e.RequestID]; ok {
				l.joins[i].Status = e.Response.Status
			}
		}
	})
	if err != nil {
		t.Fatalf("listen to the page's requests: %v", err)
	}
	return l
}

// wait returns the joins once n of them have been answered, and fails t,
// listing those there are, when they have not after 5 s.
func (l *joinLog) wait(t *testing.T, n int) []joinAttempt {
	t.Helper()
	var out []joinAttempt
	told := false // whether the joins are in the log already, or not needed
	defer func() {
		if !told { // Eventually gave up
			t.Logf("joins: %+v", out)
		}
	}()
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%d joins answered", n), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		count := 0
		for _, j := range l.joins {
			if j.Status != 0 {
				count++
			}
		}
		out = slices.Clone(l.joins)
		return count >= n
	})
	told = true
	return out
}

// all is the joins recorded so far, answered or not.
func (l *joinLog) all() []joinAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.joins)
}

// checkNoPlaceWithoutSolution fails t if a join without a solution got a
// place (2xx).
func (l *joinLog) checkNoPlaceWithoutSolution(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, j := range l.joins {
		if j.Status >= 200 && j.Status < 300 && (j.Challenge == "" || j.Solution == "") {
			t.Errorf("join %d = %+v: a place without a solution", i, j)
		}
	}
}

// header is the value of the named header in h, whatever its case.
func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

// spoilSolutions intercepts p's joins of sale and replaces any
// X-Challenge-Solution with one that is not a number, until the function it
// returns is called (also in t.Cleanup).
func spoilSolutions(t *testing.T, p *page, sale string) (stop func()) {
	t.Helper()
	return intercept(t, p, "*/v1/sales/"+sale+"/queue", "the page's joins", func(e *fetch.EventRequestPaused) {
		var headers []*fetch.HeaderEntry
		for k, v := range e.Request.Headers {
			s, _ := v.(string)
			if strings.EqualFold(k, "X-Challenge-Solution") {
				s = "spoiled"
			}
			headers = append(headers, &fetch.HeaderEntry{Name: k, Value: s})
		}
		if _, err := chromedp.Call(p.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID, Headers: headers}); err != nil {
			t.Errorf("continue the page's join: %v", err)
		}
	})
}

// workerTargets counts the challenge workers the browser runs for p's tab
// (started by its main frame, whose id is the tab's).
func workerTargets(t *testing.T, p *page) int {
	t.Helper()
	res, err := chromedp.CallBrowser(p.ctx, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		t.Fatalf("list the browser's targets: %v", err)
	}
	tab := cdp.FrameID(chromedp.FromContext(p.ctx).Target.TargetID)
	n := 0
	for _, info := range res.TargetInfos {
		if info.Type == "worker" && info.ParentFrameID == tab && strings.HasSuffix(info.URL, "/static/challenge-worker.js") {
			n++
		}
	}
	return n
}
