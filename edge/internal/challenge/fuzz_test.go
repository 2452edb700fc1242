package challenge_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// FuzzVerify: Verify never panics, refuses with one of its sentinels, and
// takes nothing but the one challenge issued to the account (at 4 bits the
// fuzzer may find other solutions of it; those are fine). The nonce is fixed:
// every fuzzing process must issue the same challenge.
func FuzzVerify(f *testing.F) {
	now := tokenstest.Start()
	c := newChallenger(f, tokenstest.KeySet(), challenge.Options{Rand: zeroReader{}})
	issued := issue(f, c, account, sale, 4, now).Value
	sol := solve(f, issued)
	f.Add(issued, sol)
	f.Add(issued, "0")
	f.Add(withField(issued, 1, "a.b.c"), sol)
	f.Add(withField(issued, 4, "33"), sol)
	f.Add(issued+".", sol)
	f.Add(strings.Repeat(".", 200), "")
	f.Add("v1......", "1")
	f.Fuzz(func(t *testing.T, ch, solution string) {
		err := c.Verify(account, sale, ch, solution, 4, now)
		if err == nil {
			if ch != issued {
				t.Fatalf("Verify(%q, %q) = nil; only %q was issued", ch, solution, issued)
			}
			return
		}
		n := 0
		for _, s := range sentinels() {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Verify(%q, %q) = %v, which wraps %d sentinels, want 1", ch, solution, err, n)
		}
	})
}

// FuzzParse: a challenge the parser takes has one spelling (writing its fields
// back gives it again) and fits MaxChallengeLen.
func FuzzParse(f *testing.F) {
	c := newChallenger(f, tokenstest.KeySet(), challenge.Options{})
	issued := issue(f, c, account, sale, 17, tokenstest.Start()).Value
	f.Add(issued)
	f.Add(withField(issued, 1, "k.with.dots"))
	f.Add(withField(issued, 3, "0"))
	f.Add("v1.k.s.1.0.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		back, ok := challenge.Canonical(s)
		if !ok {
			return
		}
		if back != s || len(s) > challenge.MaxChallengeLen {
			t.Fatalf("parse(%q) wrote back %q (%d bytes, at most %d)", s, back, len(s), challenge.MaxChallengeLen)
		}
	})
}
