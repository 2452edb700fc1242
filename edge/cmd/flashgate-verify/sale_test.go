package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// TestVerifyARealSale: a small sale runs through two edge nodes on one
// Redis — 30 shoppers join before the start, 20 after it, and the cursor
// reaches some of them before the end. Before the end the log is refused
// (409 sale_not_over); after it both nodes publish the same log, which
// verifies against the commitment, the draw's size and the start the
// snapshot published, lists each shopper at the place the edge gave it
// (the drawn one for the pre-queue), and stops verifying at any tampering,
// an entry given to another account included.
func TestVerifyARealSale(t *testing.T) {
	t.Parallel()
	const sale, early, late = "verify", 30, 20
	origin := edgetest.NewStubOrigin(t)
	// Five seconds to start two nodes and join the pre-queue: on a busy box
	// (make test's two phases at once) two were not enough.
	startsAt := time.Now().UTC().Add(5 * time.Second).Truncate(time.Millisecond)
	endsAt := startsAt.Add(3 * time.Second)
	def := edgetest.OpenSale(sale, 1000)
	def.StartsAt, def.EndsAt = startsAt, endsAt
	origin.SetSale(def)
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.DefaultRatePerSecond = 40 // about two thirds of the line by the end, after the slow start
	a, b := edgetest.StartNode(t, cfg), edgetest.StartNode(t, cfg)
	a.WaitSale(t, sale)
	b.WaitSale(t, sale)
	path := "/v1/sales/" + sale + "/admission-log"

	if res := a.Do(t, edgetest.Request{Method: "GET", Path: path}); res.Status != fasthttp.StatusConflict || res.ErrorCode() != "sale_not_over" {
		t.Errorf("admission log before the end = %d %s, want 409 sale_not_over", res.Status, res.Body)
	}
	commitment := snapshotDraw(t, a, sale).SeedSHA256
	verifier := tokens.NewVerifier(tokenstest.KeySet(), tokens.VerifierOptions{})
	index := map[string]int64{} // pre-queue account -> its index
	for i := range early {
		n, account := a, fmt.Sprintf("early-%02d", i)
		if i%2 == 1 {
			n = b
		}
		res, ans := n.JoinAgainWhileBusy(t, sale, account)
		c, err := verifier.Queue(ans.QueueToken, sale)
		if res.Status != fasthttp.StatusAccepted || err != nil || !c.Pre {
			t.Fatalf("join %s before the start = %d %s (token: %v), want 202 in the pre-queue", account, res.Status, res.Body, err)
		}
		index[account] = c.Pos
	}
	if time.Now().After(startsAt) {
		t.Fatalf("the pre-queue joins took until after the start; give the test more lead time")
	}
	time.Sleep(time.Until(startsAt))
	var drawn Draw
	testenv.Eventually(t, 2*time.Second, "the draw revealed after the start", func() bool {
		drawn = snapshotDraw(t, a, sale)
		return drawn.Seed != ""
	})
	if drawn.PreQueue != early {
		t.Fatalf("the snapshot's draw.pre_queue = %d, want %d", drawn.PreQueue, early)
	}
	published := Expect{SeedSHA256: commitment, PreQueue: drawn.PreQueue, HasPreQueue: true, StartsAt: startsAt}
	position := map[string]int64{} // later account -> its position
	for i := range late {
		n, account := b, fmt.Sprintf("late-%02d", i)
		if i%2 == 1 {
			n = a
		}
		res, ans := n.JoinAgainWhileBusy(t, sale, account)
		if res.Status != fasthttp.StatusAccepted || ans.PreQueue || ans.Position <= early {
			t.Fatalf("join %s after the start = %d %s, want 202 behind the pre-queue", account, res.Status, res.Body)
		}
		position[account] = ans.Position
	}
	time.Sleep(time.Until(endsAt))

	res := a.Do(t, edgetest.Request{Method: "GET", Path: path})
	other := b.Do(t, edgetest.Request{Method: "GET", Path: path})
	if res.Status != fasthttp.StatusOK || other.Status != fasthttp.StatusOK {
		t.Fatalf("admission log after the end = %d %s and %d %s, want 200 from both nodes", res.Status, res.Body, other.Status, other.Body)
	}
	if got, want := res.Get("Cache-Control"), "public, max-age=5"; got != want {
		t.Errorf("Cache-Control of the log just after the end = %q, want %q (settling)", got, want)
	}
	if got := res.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type of the log = %q, want application/json", got)
	}
	if !bytes.Equal(res.Body, other.Body) {
		t.Errorf("two nodes publish different logs:\n%s\n%s", res.Body, other.Body)
	}
	decode := func() *Log {
		t.Helper()
		l, err := Decode(bytes.NewReader(res.Body))
		if err != nil {
			t.Fatalf("Decode(%s) = %v", res.Body, err)
		}
		return l
	}

	l := decode()
	v := Check(l, published)
	var out bytes.Buffer
	v.Print(&out)
	if !v.OK() || !v.Committed || !v.SizePinned || v.Pre != early || v.Later != late || v.Reached < 5 {
		t.Fatalf("verdict on the sale's log = %s, want VERIFIED against the commitment and size, %d pre-queue and %d later places, some reached", out.String(), early, late)
	}
	if want := fmt.Sprintf("VERIFIED: %d pre-queue places drawn as committed (seed SHA-256 %s", early, commitment); !strings.HasPrefix(out.String(), want) {
		t.Errorf("verdict = %s, want it to begin %q", out.String(), want)
	}
	t.Logf("%s", out.String())
	seed, _ := hex.DecodeString(l.Draw.Seed)
	draw := line.NewShuffle(seed, early)
	salt, _ := hex.DecodeString(l.Salt)
	byAccount := map[[32]byte]Entry{}
	for _, e := range l.Entries {
		byAccount[e.Account] = e
	}
	for account, i := range index {
		e, ok := byAccount[sha256.Sum256(append(append([]byte(nil), salt...), account...))]
		want, _ := draw.Position(i)
		if !ok || !e.Pre || e.PreIndex != i || e.Place != want {
			t.Errorf("entry of %s = %+v (found: %v), want pre_index %d at the drawn place %d", account, e, ok, i, want)
		}
	}
	for account, p := range position {
		e, ok := byAccount[sha256.Sum256(append(append([]byte(nil), salt...), account...))]
		if !ok || e.Pre || e.Place != p {
			t.Errorf("entry of %s = %+v (found: %v), want place %d as joined", account, e, ok, p)
		}
	}
	for _, e := range l.Entries {
		if reached := !e.ReachedAt.IsZero(); reached != (e.Place <= l.Admission.ReachedThrough) ||
			(reached && (e.ReachedAt.Before(startsAt) || !e.ReachedAt.Before(endsAt))) {
			t.Errorf("entry at place %d reached at %v, want reached between the start and the end exactly when at or below reached_through %d",
				e.Place, e.ReachedAt, l.Admission.ReachedThrough)
		}
	}
	for account, i := range index {
		want, _ := draw.Position(i)
		exp := published
		exp.Account, exp.PreIndex, exp.Place = account, i, want
		if v := Check(decode(), exp); !v.OK() || v.Account == nil || v.Account.Entry == nil {
			t.Errorf("verdict for %s with its index %d and place %d = %v, want VERIFIED with its entry", account, i, want, v.Violations)
		}
	}

	// Tampering with the log, each in its own way, fails it.
	reached := func(l *Log) (first, last int) {
		first, last = -1, -1
		for i, e := range l.Entries {
			if !e.ReachedAt.IsZero() {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 || !l.Entries[first].ReachedAt.Before(l.Entries[last].ReachedAt) {
			t.Fatalf("the log has no two places reached at different times to reorder")
		}
		return first, last
	}
	hash := func(account string) [32]byte { return sha256.Sum256(append(append([]byte(nil), salt...), account...)) }
	victim, scalper := "early-00", "late-00"
	victimPlace, _ := draw.Position(index[victim])
	// giveAway gives the victim's entry to the scalper, whose own entry
	// goes: the log still verifies as a whole.
	giveAway := func(l *Log) {
		kept := l.Entries[:0]
		for _, e := range l.Entries {
			switch e.Account {
			case hash(scalper):
				continue
			case hash(victim):
				e.Account = hash(scalper)
			}
			kept = append(kept, e)
		}
		l.Entries = kept
	}
	if v := Check(func() *Log { l := decode(); giveAway(l); return l }(), published); !v.OK() {
		t.Fatalf("verdict on a log with an entry given away, asked about nobody = %v, want VERIFIED (only the victim can tell)", v.Violations)
	}
	for _, tc := range []struct {
		name   string
		tamper func(l *Log)
		exp    Expect
		want   string // in the verdict
	}{
		{"two places swapped", func(l *Log) {
			l.Entries[0].Place, l.Entries[1].Place = l.Entries[1].Place, l.Entries[0].Place
		}, published, "is drawn to place"},
		{"a pre_index changed", func(l *Log) {
			l.Entries[2].PreIndex = l.Entries[2].PreIndex%early + 1
		}, published, "is drawn to place"},
		{"reaching times reordered", func(l *Log) {
			first, last := reached(l)
			l.Entries[first].ReachedAt, l.Entries[last].ReachedAt = l.Entries[last].ReachedAt, l.Entries[first].ReachedAt
		}, published, "ahead of it"},
		{"a place skipped by the cursor", func(l *Log) {
			first, _ := reached(l)
			l.Entries[first].ReachedAt = time.Time{}
		}, published, "never was"},
		{"an account duplicated", func(l *Log) {
			l.Entries[len(l.Entries)-1].Account = l.Entries[0].Account
		}, published, "holds two places"},
		{"a later join moved into the pre-queue", func(l *Log) {
			e := &l.Entries[len(l.Entries)-1]
			e.Place = 3
		}, published, "inside the pre-queue's places"},
		{"another commitment", func(*Log) {}, Expect{SeedSHA256: line.SeedHash([]byte("another seed"))}, "not to the commitment"},
		{"another seed revealed", func(l *Log) {
			l.Draw.Seed = hex.EncodeToString([]byte("another seed"))
		}, published, "not to the commitment"},
		{"a larger draw", func(l *Log) {
			l.Draw.PreQueue++
		}, published, "the log's draw has pre_queue"},
		{"an entry given to another account", giveAway, with(published, victim, 0, 0), "this account has no place in the log"},
		{"an entry given to another account, its index given", giveAway, with(published, victim, index[victim], 0),
			"the log gives pre-queue index " + strconv.FormatInt(index[victim], 10) + " to account_sha256 " + hex.EncodeToString(func() []byte { h := hash(scalper); return h[:6] }())},
		{"an entry given to another account, its place given", giveAway, with(published, victim, 0, victimPlace), "this account has no place in the log"},
		{"entries swapped between accounts", func(l *Log) {
			for i, e := range l.Entries {
				switch e.Account {
				case hash(victim):
					l.Entries[i].Account = hash("early-01")
				case hash("early-01"):
					l.Entries[i].Account = hash(victim)
				}
			}
		}, with(published, victim, index[victim], 0), "as you gave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := decode()
			tc.tamper(l)
			v := Check(l, tc.exp)
			var out bytes.Buffer
			v.Print(&out)
			if v.OK() || !strings.HasPrefix(out.String(), "FAILED: ") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("verdict on a log with %s = %s, want FAILED naming %q", tc.name, out.String(), tc.want)
			}
		})
	}
}

// with is exp asking about account, with its pre-queue index and place
// (0: not given).
func with(exp Expect, account string, preIndex, place int64) Expect {
	exp.Account, exp.PreIndex, exp.Place = account, preIndex, place
	return exp
}

// snapshotDraw is the draw a node's sale snapshot publishes.
func snapshotDraw(t *testing.T, n *edgetest.Node, sale string) Draw {
	t.Helper()
	res := n.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale})
	var s struct {
		Draw Draw `json:"draw"`
	}
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &s) != nil || len(s.Draw.SeedSHA256) != 64 {
		t.Fatalf("snapshot of %s = %d %s, want 200 with a draw", sale, res.Status, res.Body)
	}
	return s.Draw
}
