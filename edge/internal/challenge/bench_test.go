package challenge_test

import (
	"strconv"
	"testing"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// BenchmarkVerify is the edge's cost per join: a solved challenge taken, and
// the two refusals a flood brings (another account's, garbage).
func BenchmarkVerify(b *testing.B) {
	now := tokenstest.Start()
	c := newChallenger(b, tokenstest.KeySet(), challenge.Options{})
	ch := issue(b, c, account, sale, 12, now).Value
	sol := solve(b, ch)
	// The sale's published challenge, solved for account (not for other,
	// by the odds of 2^-12, checked).
	pub := publish(b, c, sale, 12, now).Value
	pubSol := solveAs(b, pub, account)
	if accountHashBits(pub, "acct-2", pubSol) >= 12 {
		b.Fatal("the solution happens to solve it for acct-2 too")
	}
	cases := []struct {
		name               string
		account, chal, sol string
		ok                 bool
	}{
		{"solved", account, ch, sol, true},
		{"other account", "acct-2", ch, sol, false},
		{"malformed", account, ch[:len(ch)-1], sol, false},
		{"published", account, pub, pubSol, true},
		{"published, other account", "acct-2", pub, pubSol, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Verify(tc.account, sale, tc.chal, tc.sol, 12, now); (err == nil) != tc.ok {
					b.Fatalf("Verify = %v, want ok %v", err, tc.ok)
				}
			}
		})
	}
}

// BenchmarkIssue is the cost of the 403 challenge_required answer's
// challenge.
func BenchmarkIssue(b *testing.B) {
	now := tokenstest.Start()
	c := newChallenger(b, tokenstest.KeySet(), challenge.Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Issue(account, sale, challenge.DefaultDifficultyBits, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolve solves 12-bit challenges (4,096 hashes on average) on one
// core and reports the hash rate, the figure the package doc's difficulty
// guidance compares phones with.
func BenchmarkSolve(b *testing.B) {
	const difficulty = 12
	now := tokenstest.Start()
	c := newChallenger(b, tokenstest.KeySet(), challenge.Options{})
	chs := make([]string, 64)
	for i := range chs {
		chs[i] = issue(b, c, "acct-"+strconv.Itoa(i), sale, difficulty, now).Value
	}
	var hashes, i uint64
	for b.Loop() {
		s, ok := challenge.Solve(chs[i%uint64(len(chs))], account, 1<<30)
		if !ok {
			b.Fatal("Solve found nothing")
		}
		n, _ := strconv.ParseUint(s, 10, 64)
		hashes += n + 1
		i++
	}
	b.ReportMetric(float64(hashes)/float64(i), "hashes/op")
	b.ReportMetric(float64(hashes)/b.Elapsed().Seconds(), "hashes/s")
}
