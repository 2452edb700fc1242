package challenge_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

func publish(t testing.TB, c *challenge.Challenger, sale string, bits int, now time.Time) challenge.Challenge {
	t.Helper()
	ch, err := c.Publish(sale, bits, now)
	if err != nil {
		t.Fatalf("Publish(%q, %d) = %v", sale, bits, err)
	}
	return ch
}

func solveAs(t testing.TB, ch, account string) string {
	t.Helper()
	s, ok := challenge.Solve(ch, account, 1<<26)
	if !ok {
		t.Fatalf("Solve(%q, %q) found nothing", ch, account)
	}
	return s
}

// accountHashBits is the published challenge's work as the package doc gives
// it to the page, written again here so the tests hold Verify and Solve to
// the doc.
func accountHashBits(ch, account, solution string) int {
	h := sha256.Sum256([]byte(ch + "~" + account + ":" + solution))
	z := 0
	for _, b := range h {
		if b != 0 {
			return z + bits.LeadingZeros8(b)
		}
		z += 8
	}
	return z
}

// TestPublicGolden pins the published form and its work: pages solve it, and
// every node must publish the same string. The vector was computed with an
// independent implementation (Python's hmac and hashlib) of the package doc.
func TestPublicGolden(t *testing.T) {
	const (
		want     = "p1.test1.spring-drop.1893499200.12.yRgY_DJktdiicMA-U6Pe3GuPuh2SdnGnsWnXUuFeuk4"
		solution = "1853" // for acct-42; acct-43's smallest is 6309
		hashHex  = "0005fcadea3748504164c556985f58588c90b39429100670f27bd898fd190e7d"
	)
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	// Anywhere within the minute publishes the minute's challenge.
	for _, at := range []time.Duration{0, 30 * time.Second, time.Minute - time.Nanosecond} {
		ch := publish(t, c, "spring-drop", 12, tokenstest.Start().Add(at))
		if ch.Value != want || ch.DifficultyBits != 12 || !ch.Expires.Equal(tokenstest.Start().Add(challenge.DefaultValidity)) {
			t.Fatalf("Publish at +%v = %+v, want %q, 12 bits, expiring 2 minutes after the minute", at, ch, want)
		}
	}
	if got := solveAs(t, want, "acct-42"); got != solution {
		t.Errorf("Solve(acct-42) = %q, want %q", got, solution)
	}
	if got := solveAs(t, want, "acct-43"); got != "6309" {
		t.Errorf("Solve(acct-43) = %q, want 6309", got)
	}
	if got := sha256.Sum256([]byte(want + "~acct-42:" + solution)); hex.EncodeToString(got[:]) != hashHex {
		t.Errorf("SHA-256(challenge~account:solution) = %x, want %s", got, hashHex)
	}
	if err := c.Verify("acct-42", "spring-drop", want, solution, 12, tokenstest.Start().Add(90*time.Second)); err != nil {
		t.Errorf("Verify(golden) = %v, want nil", err)
	}
	if next := publish(t, c, "spring-drop", 12, tokenstest.Start().Add(time.Minute)); next.Value == want {
		t.Error("the next minute publishes the same challenge")
	}
}

// TestPublicVerifyRefusals: a published challenge's solution is taken only
// for the account it was worked out for, in its sale, within two minutes of
// its window's start, at the difficulty in force, and only as published.
func TestPublicVerifyRefusals(t *testing.T) {
	const difficulty = 10
	now := tokenstest.Start().Add(20 * time.Second)
	window := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	ch := publish(t, c, sale, difficulty, now).Value
	sol := solveAs(t, ch, account)
	// An account the solution happens not to solve for (each does with odds
	// 2^-difficulty: as good as a guess).
	other := "acct-2"
	for n := 3; accountHashBits(ch, other, sol) >= difficulty; n++ {
		other = "acct-" + strconv.Itoa(n)
	}
	foreign := publish(t, newChallenger(t, tokenstest.OtherKeySet(), challenge.Options{}), sale, difficulty, now).Value
	fields := strings.Split(ch, ".")
	with := func(i int, v string) string {
		f := append([]string(nil), fields...)
		f[i] = v
		return strings.Join(f, ".")
	}
	cases := []struct {
		name              string
		account, sale     string
		challenge, answer string
		minBits           int
		at                time.Time
		want              error
	}{
		{"own", account, sale, ch, sol, difficulty, now, nil},
		{"at the end of its validity", account, sale, ch, sol, difficulty, window.Add(challenge.DefaultValidity), nil},
		{"from a node ahead by the skew", account, sale, ch, sol, difficulty, window.Add(-challenge.DefaultClockSkew), nil},
		{"ops lowered the difficulty", account, sale, ch, sol, difficulty - 2, now, nil},

		{"another account's solution", other, sale, ch, sol, difficulty, now, challenge.ErrUnsolved},
		{"no account", "", sale, ch, sol, difficulty, now, challenge.ErrWrongAccountOrSale},
		{"another sale", account, "sale-2", ch, sol, difficulty, now, challenge.ErrWrongAccountOrSale},
		{"another key set's", account, sale, foreign, sol, difficulty, now, challenge.ErrWrongAccountOrSale},
		{"an easier difficulty written in", account, sale, with(4, "1"), sol, difficulty, now, challenge.ErrWrongAccountOrSale},
		{"a later window written in", account, sale, with(3, strconv.FormatInt(window.Unix()+60, 10)), sol, difficulty, now, challenge.ErrWrongAccountOrSale},
		{"a window off the minute", account, sale, with(3, strconv.FormatInt(window.Unix()+1, 10)), sol, difficulty, now, challenge.ErrMalformed},
		{"after its validity", account, sale, ch, sol, difficulty, window.Add(challenge.DefaultValidity + time.Second), challenge.ErrExpired},
		{"before its window", account, sale, ch, sol, difficulty, window.Add(-challenge.DefaultClockSkew - time.Second), challenge.ErrExpired},
		{"ops raised the difficulty", account, sale, ch, sol, difficulty + 1, now, challenge.ErrTooEasy},
		{"no solution", account, sale, ch, "", difficulty, now, challenge.ErrMalformed},
		{"a solution not of digits", account, sale, ch, sol + "a", difficulty, now, challenge.ErrMalformed},
		{"the personal form's prefix", account, sale, "v1" + ch[2:], sol, difficulty, now, challenge.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Verify(tc.account, tc.sale, tc.challenge, tc.answer, tc.minBits, tc.at)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPublicSolutionsAreTheAccounts: Solve's solution of a published
// challenge is the smallest counter the package doc's work takes for that
// account, and a personal challenge's solution does not depend on the
// account (its MAC binds it).
func TestPublicSolutionsAreTheAccounts(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	ch := publish(t, c, sale, 8, now).Value
	for _, acct := range []string{"a", "acct:1", "ünïcode", strings.Repeat("x", challenge.MaxAccountLen)} {
		s := solveAs(t, ch, acct)
		n, _ := strconv.Atoi(s)
		if accountHashBits(ch, acct, s) < 8 {
			t.Errorf("Solve(%q) = %q does not solve it", acct, s)
		}
		for m := range n {
			if accountHashBits(ch, acct, strconv.Itoa(m)) >= 8 {
				t.Fatalf("Solve(%q) = %q, but %d solves it first", acct, s, m)
			}
		}
		if err := c.Verify(acct, sale, ch, s, 8, now); err != nil {
			t.Errorf("Verify(%q) = %v", acct, err)
		}
	}
	if _, ok := challenge.Solve(ch, strings.Repeat("x", challenge.MaxAccountLen+1), 1<<20); ok {
		t.Error("Solve took an account longer than MaxAccountLen")
	}
	personal := issue(t, c, account, sale, 8, now).Value
	a, _ := challenge.Solve(personal, "", 1<<20)
	b, _ := challenge.Solve(personal, "someone", 1<<20)
	if a != b || a == "" {
		t.Errorf("a personal challenge's solutions differ by account: %q, %q", a, b)
	}
}

// TestPublishRefuses: what Publish cannot make.
func TestPublishRefuses(t *testing.T) {
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	for name, f := range map[string]func() error{
		"bad sale":          func() error { _, err := c.Publish("a.b", 8, tokenstest.Start()); return err },
		"too hard":          func() error { _, err := c.Publish(sale, challenge.MaxDifficultyBits+1, tokenstest.Start()); return err },
		"negative":          func() error { _, err := c.Publish(sale, -1, tokenstest.Start()); return err },
		"clock before 1970": func() error { _, err := c.Publish(sale, 8, time.Unix(-120, 0)); return err },
	} {
		if f() == nil {
			t.Errorf("%s: Publish = nil error", name)
		}
	}
}
