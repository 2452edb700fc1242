package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/queue"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// TestVerifyARealSale: a small sale runs through two edge nodes on one
// Redis — 30 shoppers join before the start, 20 after it, and the cursor
// admits some of them before the end. Before the end the log is refused
// (409 sale_not_over); after it both nodes publish the same log, which
// verifies against the commitment the snapshot published before the
// start, lists each shopper at the place the edge gave it (the drawn one
// for the pre-queue), and stops verifying at any tampering.
func TestVerifyARealSale(t *testing.T) {
	t.Parallel()
	const sale, early, late = "verify", 30, 20
	origin := edgetest.NewStubOrigin(t)
	startsAt := time.Now().UTC().Add(2 * time.Second).Truncate(time.Millisecond)
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
		res, ans := n.Join(t, sale, account)
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
	for deadline := time.Now().Add(2 * time.Second); snapshotDraw(t, a, sale).Seed == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the draw was not revealed 2 s after the start")
		}
	}
	position := map[string]int64{} // later account -> its position
	for i := range late {
		n, account := b, fmt.Sprintf("late-%02d", i)
		if i%2 == 1 {
			n = a
		}
		res, ans := n.Join(t, sale, account)
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
	v := Check(l, commitment)
	var out bytes.Buffer
	v.Print(&out)
	if !v.OK() || !v.Committed || v.Pre != early || v.Later != late || v.Admitted < 5 {
		t.Fatalf("verdict on the sale's log = %s, want VERIFIED against the commitment, %d pre-queue and %d later places, some admitted", out.String(), early, late)
	}
	if want := fmt.Sprintf("VERIFIED: %d pre-queue places drawn as committed (seed SHA-256 %s", early, commitment); !strings.HasPrefix(out.String(), want) {
		t.Errorf("verdict = %s, want it to begin %q", out.String(), want)
	}
	t.Logf("%s", out.String())
	seed, _ := hex.DecodeString(l.Draw.Seed)
	draw := queue.NewShuffle(seed, early)
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
		if admitted := !e.AdmittedAt.IsZero(); admitted != (e.Place <= l.Admission.AdmittedThrough) ||
			(admitted && (e.AdmittedAt.Before(startsAt) || !e.AdmittedAt.Before(endsAt))) {
			t.Errorf("entry at place %d admitted at %v, want admitted between the start and the end exactly when at or below admitted_through %d",
				e.Place, e.AdmittedAt, l.Admission.AdmittedThrough)
		}
	}

	// Tampering with the log, each in its own way, fails it.
	admitted := func(l *Log) (first, last int) {
		first, last = -1, -1
		for i, e := range l.Entries {
			if !e.AdmittedAt.IsZero() {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 || !l.Entries[first].AdmittedAt.Before(l.Entries[last].AdmittedAt) {
			t.Fatalf("the log has no two places admitted at different times to reorder")
		}
		return first, last
	}
	for _, tc := range []struct {
		name       string
		tamper     func(l *Log)
		commitment string
		want       string // in the verdict
	}{
		{"two places swapped", func(l *Log) {
			l.Entries[0].Place, l.Entries[1].Place = l.Entries[1].Place, l.Entries[0].Place
		}, commitment, "is drawn to place"},
		{"a pre_index changed", func(l *Log) {
			l.Entries[2].PreIndex = l.Entries[2].PreIndex%early + 1
		}, commitment, "is drawn to place"},
		{"admission times reordered", func(l *Log) {
			first, last := admitted(l)
			l.Entries[first].AdmittedAt, l.Entries[last].AdmittedAt = l.Entries[last].AdmittedAt, l.Entries[first].AdmittedAt
		}, commitment, "ahead of it"},
		{"a place skipped at admission", func(l *Log) {
			first, _ := admitted(l)
			l.Entries[first].AdmittedAt = time.Time{}
		}, commitment, "never was"},
		{"an account duplicated", func(l *Log) {
			l.Entries[len(l.Entries)-1].Account = l.Entries[0].Account
		}, commitment, "holds two places"},
		{"a later join moved into the pre-queue", func(l *Log) {
			e := &l.Entries[len(l.Entries)-1]
			e.Place = 3
		}, commitment, "inside the pre-queue's places"},
		{"another commitment", func(*Log) {}, queue.SeedHash([]byte("another seed")), "not to the commitment"},
		{"another seed revealed", func(l *Log) {
			l.Draw.Seed = hex.EncodeToString([]byte("another seed"))
		}, commitment, "not to the commitment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := decode()
			tc.tamper(l)
			v := Check(l, tc.commitment)
			var out bytes.Buffer
			v.Print(&out)
			if v.OK() || !strings.HasPrefix(out.String(), "FAILED: ") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("verdict on a log with %s = %s, want FAILED naming %q", tc.name, out.String(), tc.want)
			}
		})
	}
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
