package challenge_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// The account and sale the tests' challenges are issued to.
const (
	account = "acct-1"
	sale    = "sale-1"
)

// zeroReader gives zero nonces, for challenges that do not change from run to
// run.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// failingReader is a nonce source that has run dry.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func newChallenger(t testing.TB, keys *tokens.KeySet, opts challenge.Options) *challenge.Challenger {
	t.Helper()
	c, err := challenge.New(keys, opts)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return c
}

func issue(t testing.TB, c *challenge.Challenger, account, sale string, bits int, now time.Time) challenge.Challenge {
	t.Helper()
	ch, err := c.Issue(account, sale, bits, now)
	if err != nil {
		t.Fatalf("Issue(%q, %q, %d) = %v", account, sale, bits, err)
	}
	return ch
}

func solve(t testing.TB, ch string) string {
	t.Helper()
	s, ok := challenge.Solve(ch, account, 1<<26)
	if !ok {
		t.Fatalf("Solve(%q) found nothing", ch)
	}
	return s
}

// hashBits is the work check as the package doc gives it to the page, written
// again here so the tests hold Verify and Solve to the doc, not to each other.
func hashBits(ch, solution string) int {
	h := sha256.Sum256([]byte(ch + ":" + solution))
	z, i := 0, 0
	for i < len(h) && h[i] == 0 {
		z += 8
		i++
	}
	if i < len(h) {
		z += bits.LeadingZeros8(h[i])
	}
	return z
}

// unsolved returns the first counter that does not solve ch at difficulty.
func unsolved(ch string, difficulty int) string {
	for n := 0; ; n++ {
		if s := strconv.Itoa(n); hashBits(ch, s) < difficulty {
			return s
		}
	}
}

// withField returns ch with its i-th dot-separated field set to v (the tests'
// kids hold no dot): 0 "v1", 1 kid, 2 sale, 3 window, 4 bits, 5 nonce, 6 mac.
func withField(ch string, i int, v string) string {
	f := strings.Split(ch, ".")
	f[i] = v
	return strings.Join(f, ".")
}

// field returns ch's i-th dot-separated field (withField numbers them).
func field(ch string, i int) string { return strings.Split(ch, ".")[i] }

// otherB64 changes the first character of a base64url field.
func otherB64(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// TestRoundTrip: a challenge Issue hands out, solved by Solve, verifies, and
// Solve's solution is the first counter whose hash has the leading zeros the
// package doc asks for.
func TestRoundTrip(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	for _, difficulty := range []int{0, 1, 8, 12, 16} {
		t.Run(strconv.Itoa(difficulty)+" bits", func(t *testing.T) {
			ch := issue(t, c, account, sale, difficulty, now)
			if ch.DifficultyBits != difficulty || !ch.Expires.Equal(now.Add(challenge.DefaultValidity)) ||
				len(ch.Value) > challenge.MaxChallengeLen {
				t.Fatalf("Issue = %+v, want %d bits, expiring at %v, at most %d bytes", ch, difficulty,
					now.Add(challenge.DefaultValidity), challenge.MaxChallengeLen)
			}
			s := solve(t, ch.Value)
			n, err := strconv.Atoi(s)
			if err != nil || hashBits(ch.Value, s) < difficulty {
				t.Fatalf("Solve = %q: %d leading zero bits, want a counter with at least %d", s, hashBits(ch.Value, s), difficulty)
			}
			for m := range n {
				if hashBits(ch.Value, strconv.Itoa(m)) >= difficulty {
					t.Fatalf("Solve = %q, but %d solves it first", s, m)
				}
			}
			if err := c.Verify(account, sale, ch.Value, s, difficulty, now); err != nil {
				t.Errorf("Verify(own solution) = %v, want nil", err)
			}
		})
	}
}

// TestGolden pins the v1 form: the page's solver and the challenges in flight
// during a deploy depend on it. The vector was checked against an independent
// implementation (Python's hmac and hashlib) of the package doc; the page's
// tests can check their solver against it.
func TestGolden(t *testing.T) {
	const (
		want     = "v1.test1.spring-drop.1893499200.12.AAAAAAAAAAAAAAAAAAAAAA.rJvbi7rX_yYfV6CtGgXO_vp5Yo6UhX-MV2hgPbLjM34"
		solution = "12483"
		hashHex  = "00023ef5edb49e6253a9b9000e55817a165c1163fa37c3e3e348736ba0d67552"
	)
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{Rand: zeroReader{}})
	ch := issue(t, c, "acct-42", "spring-drop", 12, tokenstest.Start())
	if ch.Value != want {
		t.Fatalf("Issue = %q, want %q", ch.Value, want)
	}
	if got := solve(t, ch.Value); got != solution {
		t.Errorf("Solve = %q, want %q", got, solution)
	}
	if got := sha256.Sum256([]byte(want + ":" + solution)); hex.EncodeToString(got[:]) != hashHex {
		t.Errorf("SHA-256(challenge:solution) = %x, want %s", got, hashHex)
	}
	if err := c.Verify("acct-42", "spring-drop", want, solution, 12, tokenstest.Start()); err != nil {
		t.Errorf("Verify(golden) = %v, want nil", err)
	}
}

// TestVerifyRefusals: every way a join's challenge and solution can be wrong
// is refused with its sentinel, and the edges of what is taken are taken.
func TestVerifyRefusals(t *testing.T) {
	const difficulty = 8
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	ch := issue(t, c, account, sale, difficulty, now).Value
	sol := solve(t, ch)

	sameKIDOtherSecret, err := tokens.NewKeySet(tokenstest.KID, map[string][]byte{tokenstest.KID: []byte("another-secret-for-kid-test1-000")})
	if err != nil {
		t.Fatalf("NewKeySet = %v", err)
	}
	foreign := issue(t, newChallenger(t, tokenstest.OtherKeySet(), challenge.Options{}), account, sale, difficulty, now).Value
	forged := issue(t, newChallenger(t, sameKIDOtherSecret, challenge.Options{}), account, sale, difficulty, now).Value
	window, _ := strconv.ParseInt(field(ch, 3), 10, 64)
	huge := strings.Repeat("a", 1<<20)

	cases := []struct {
		name              string
		account, sale     string
		challenge, answer string
		minBits           int
		at                time.Duration // from the challenge's issue
		want              error         // nil: taken
	}{
		{"own, at once", account, sale, ch, sol, difficulty, 0, nil},
		{"own, at the end of its validity", account, sale, ch, sol, difficulty, challenge.DefaultValidity, nil},
		{"own, issued by a node ahead by the skew", account, sale, ch, sol, difficulty, -challenge.DefaultClockSkew, nil},
		{"ops lowered the difficulty", account, sale, ch, sol, difficulty - 4, 0, nil},

		{"after its validity", account, sale, ch, sol, difficulty, challenge.DefaultValidity + time.Second, challenge.ErrExpired},
		{"from the future", account, sale, ch, sol, difficulty, -challenge.DefaultClockSkew - time.Second, challenge.ErrExpired},

		{"other account", "acct-2", sale, ch, sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"account a prefix of the real one", "acct-", sale, ch, sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"no account", "", sale, ch, sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"huge account", huge, sale, ch, sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"other sale", account, "sale-2", ch, sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"sale field changed to the other sale", account, "sale-2", withField(ch, 2, "sale-2"), sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"window moved later", account, sale, withField(ch, 3, strconv.FormatInt(window+60, 10)), sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"difficulty lowered", account, sale, withField(ch, 4, "4"), sol, 4, 0, challenge.ErrWrongAccountOrSale},
		{"nonce changed", account, sale, withField(ch, 5, otherB64(field(ch, 5))), sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"mac changed", account, sale, withField(ch, 6, otherB64(field(ch, 6))), sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"kid changed", account, sale, withField(ch, 1, tokenstest.OtherKID), sol, difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"unknown kid", account, sale, foreign, solve(t, foreign), difficulty, 0, challenge.ErrWrongAccountOrSale},
		{"our kid, another secret", account, sale, forged, solve(t, forged), difficulty, 0, challenge.ErrWrongAccountOrSale},

		{"ops raised the difficulty", account, sale, ch, sol, difficulty + 1, 0, challenge.ErrTooEasy},
		{"unsolved", account, sale, ch, unsolved(ch, difficulty), difficulty, 0, challenge.ErrUnsolved},

		{"empty challenge", account, sale, "", sol, difficulty, 0, challenge.ErrMalformed},
		{"huge challenge", account, sale, huge, sol, difficulty, 0, challenge.ErrMalformed},
		{"challenge with a huge tail", account, sale, ch + huge, sol, difficulty, 0, challenge.ErrMalformed},
		{"no version", account, sale, strings.TrimPrefix(ch, "v1."), sol, difficulty, 0, challenge.ErrMalformed},
		{"version 2", account, sale, withField(ch, 0, "v2"), sol, difficulty, 0, challenge.ErrMalformed},
		{"a field missing", account, sale, strings.Join(slicesDelete(strings.Split(ch, "."), 5), "."), sol, difficulty, 0, challenge.ErrMalformed},
		{"a field after the mac", account, sale, ch + ".x", sol, difficulty, 0, challenge.ErrMalformed},
		{"empty kid", account, sale, withField(ch, 1, ""), sol, difficulty, 0, challenge.ErrMalformed},
		{"kid too long", account, sale, withField(ch, 1, strings.Repeat("k", 33)), sol, difficulty, 0, challenge.ErrMalformed},
		{"sale with a bad character", account, "sale/1", withField(ch, 2, "sale/1"), sol, difficulty, 0, challenge.ErrMalformed},
		{"sale too long", account, sale, withField(ch, 2, strings.Repeat("s", 65)), sol, difficulty, 0, challenge.ErrMalformed},
		{"window not a number", account, sale, withField(ch, 3, "soon"), sol, difficulty, 0, challenge.ErrMalformed},
		{"window with a sign", account, sale, withField(ch, 3, "+"+field(ch, 3)), sol, difficulty, 0, challenge.ErrMalformed},
		{"window with a leading zero", account, sale, withField(ch, 3, "0"+field(ch, 3)[1:]), sol, difficulty, 0, challenge.ErrMalformed},
		{"window too long", account, sale, withField(ch, 3, "123456789012"), sol, difficulty, 0, challenge.ErrMalformed},
		{"difficulty above the maximum", account, sale, withField(ch, 4, "33"), sol, difficulty, 0, challenge.ErrMalformed},
		{"difficulty with a leading zero", account, sale, withField(ch, 4, "08"), sol, difficulty, 0, challenge.ErrMalformed},
		{"difficulty negative", account, sale, withField(ch, 4, "-8"), sol, difficulty, 0, challenge.ErrMalformed},
		{"nonce too short", account, sale, withField(ch, 5, field(ch, 5)[1:]), sol, difficulty, 0, challenge.ErrMalformed},
		{"mac too long", account, sale, withField(ch, 6, field(ch, 6)+"A"), sol, difficulty, 0, challenge.ErrMalformed},
		{"mac in standard base64", account, sale, withField(ch, 6, "+"+field(ch, 6)[1:]), sol, difficulty, 0, challenge.ErrMalformed},
		{"no solution", account, sale, ch, "", difficulty, 0, challenge.ErrMalformed},
		{"solution not decimal", account, sale, ch, "12a", difficulty, 0, challenge.ErrMalformed},
		{"solution with a space", account, sale, ch, " " + sol, difficulty, 0, challenge.ErrMalformed},
		{"solution of 21 digits", account, sale, ch, strings.Repeat("1", 21), difficulty, 0, challenge.ErrMalformed},
		{"huge solution", account, sale, ch, huge, difficulty, 0, challenge.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Verify(tc.account, tc.sale, tc.challenge, tc.answer, tc.minBits, now.Add(tc.at))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			for _, other := range sentinels() {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("Verify = %v, which is also %v", err, other)
				}
			}
		})
	}
}

// slicesDelete returns s without its i-th element.
func slicesDelete(s []string, i int) []string { return append(s[:i:i], s[i+1:]...) }

// sentinels lists Verify's sentinel errors.
func sentinels() []error {
	return []error{challenge.ErrMalformed, challenge.ErrExpired, challenge.ErrWrongAccountOrSale,
		challenge.ErrTooEasy, challenge.ErrUnsolved}
}

// TestRotation: challenges follow the key set as tokens do: the active key
// signs, every key verifies, a dropped key's challenges are refused.
func TestRotation(t *testing.T) {
	now := tokenstest.Start()
	rotatedKeys, err := tokens.ParseKeySet(tokenstest.OtherKeySet().String() + "," + tokenstest.KeySet().String())
	if err != nil {
		t.Fatalf("ParseKeySet(rotated) = %v", err)
	}
	old := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	rotated := newChallenger(t, rotatedKeys, challenge.Options{})
	dropped := newChallenger(t, tokenstest.OtherKeySet(), challenge.Options{})
	cases := []struct {
		name       string
		by, to     *challenge.Challenger
		wantKID    string
		wantVerify error
	}{
		{"old key, verified after the rotation", old, rotated, tokenstest.KID, nil},
		{"new key, verified after the rotation", rotated, rotated, tokenstest.OtherKID, nil},
		{"new key, verified by a node not yet rotated", rotated, old, tokenstest.OtherKID, challenge.ErrWrongAccountOrSale},
		{"old key, verified after it was dropped", old, dropped, tokenstest.KID, challenge.ErrWrongAccountOrSale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := issue(t, tc.by, account, sale, 4, now).Value
			if kid := field(ch, 1); kid != tc.wantKID {
				t.Fatalf("Issue = %q, signed by %q, want %q", ch, kid, tc.wantKID)
			}
			if err := tc.to.Verify(account, sale, ch, solve(t, ch), 4, now); !errors.Is(err, tc.wantVerify) {
				t.Errorf("Verify = %v, want %v", err, tc.wantVerify)
			}
		})
	}
}

// TestIssueRefuses: Issue hands out no challenge it could not verify.
func TestIssueRefuses(t *testing.T) {
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	dry := newChallenger(t, tokenstest.KeySet(), challenge.Options{Rand: failingReader{}})
	now := tokenstest.Start()
	cases := []struct {
		name          string
		c             *challenge.Challenger
		account, sale string
		bits          int
		now           time.Time
	}{
		{"no account", c, "", sale, 8, now},
		{"account too long", c, strings.Repeat("a", challenge.MaxAccountLen+1), sale, 8, now},
		{"no sale", c, account, "", 8, now},
		{"sale with a dot", c, account, "sale.1", 8, now},
		{"sale too long", c, account, strings.Repeat("s", 65), 8, now},
		{"negative difficulty", c, account, sale, -1, now},
		{"difficulty above the maximum", c, account, sale, challenge.MaxDifficultyBits + 1, now},
		{"clock at 1970", c, account, sale, 8, time.Unix(0, 0)},
		{"no nonce", dry, account, sale, 8, now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ch, err := tc.c.Issue(tc.account, tc.sale, tc.bits, tc.now); err == nil {
				t.Errorf("Issue = %+v, nil; want an error", ch)
			}
		})
	}
	// The longest inputs Issue takes make the longest challenge Verify takes.
	long := issue(t, c, strings.Repeat("a", challenge.MaxAccountLen), strings.Repeat("s", 64), challenge.MaxDifficultyBits, now)
	if len(long.Value) > challenge.MaxChallengeLen {
		t.Errorf("Issue(longest) = %d bytes, want at most %d", len(long.Value), challenge.MaxChallengeLen)
	}
}

// TestNewRefuses: New takes no key set it cannot use and no negative times.
func TestNewRefuses(t *testing.T) {
	cases := []struct {
		name string
		keys *tokens.KeySet
		opts challenge.Options
	}{
		{"no key set", nil, challenge.Options{}},
		{"negative validity", tokenstest.KeySet(), challenge.Options{Validity: -time.Second}},
		{"negative skew", tokenstest.KeySet(), challenge.Options{ClockSkew: -time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := challenge.New(tc.keys, tc.opts); err == nil {
				t.Error("New = nil error, want one")
			}
		})
	}
}

// TestOptions: Validity and ClockSkew set the window.
func TestOptions(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{Validity: 10 * time.Second, ClockSkew: time.Second})
	ch := issue(t, c, account, sale, 4, now)
	if !ch.Expires.Equal(now.Add(10 * time.Second)) {
		t.Errorf("Issue = %+v, want expiring at %v", ch, now.Add(10*time.Second))
	}
	sol := solve(t, ch.Value)
	cases := []struct {
		at   time.Duration
		want error
	}{
		{-2 * time.Second, challenge.ErrExpired},
		{-time.Second, nil},
		{10 * time.Second, nil},
		{10*time.Second + time.Nanosecond, challenge.ErrExpired},
	}
	for _, tc := range cases {
		t.Run(tc.at.String(), func(t *testing.T) {
			if err := c.Verify(account, sale, ch.Value, sol, 4, now.Add(tc.at)); !errors.Is(err, tc.want) {
				t.Errorf("Verify at %v = %v, want %v", tc.at, err, tc.want)
			}
		})
	}
}

// TestConcurrent: one Challenger issues and verifies from many goroutines
// (run with -race).
func TestConcurrent(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			acct := "acct-" + strconv.Itoa(g)
			for range 50 {
				ch, err := c.Issue(acct, sale, 4, now)
				if err != nil {
					t.Errorf("Issue = %v", err)
					return
				}
				s, _ := challenge.Solve(ch.Value, acct, 1<<20)
				if err := c.Verify(acct, sale, ch.Value, s, 4, now); err != nil {
					t.Errorf("Verify = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
