package crowdsim

import (
	"crypto/sha256"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// zeroBitsOf counts SHA-256(challenge ":" s)'s leading zero bits another
// way than the solver: 256 less the bit length of the digest as a number.
func zeroBitsOf(challenge, s string) int {
	sum := sha256.Sum256([]byte(challenge + ":" + s))
	return 256 - new(big.Int).SetBytes(sum[:]).BitLen()
}

// solveChallenge finds the smallest solution of a personal challenge, as
// the page's worker does: known answers (found with Python's hashlib), and
// for other challenges a solution that has the zero bits while every
// smaller counter lacks them. The account is no part of its work.
func TestSolveChallenge(t *testing.T) {
	const ch8 = "v1.k1.crowd-1700000000.1700000000.8.AAAAAAAAAAAAAAAAAAAAAA.bWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWE"
	const ch12 = "v1.k1.crowd-1700000000.1700000000.12.AAAAAAAAAAAAAAAAAAAAAA.bWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWE"
	for _, tt := range []struct {
		challenge string
		bits      int
		want      string
	}{
		{ch8, 8, "76"},        // SHA-256 starts 0046c32d
		{ch12, 12, "14504"},   // 00038e74
		{"abc", 0, "0"},       // anything goes
		{"abc", 4, "3"},       // 0ffad30e
		{ch8, 1, "1"},         // the first with a leading zero bit
		{ch12, 4, "15"},       // fewer bits: an earlier counter
		{ch8 + "x", 8, "471"}, // a byte more, another answer
	} {
		got, ok := solveChallenge(tt.challenge, "shopper-00001", tt.bits, 1<<20)
		if !ok || got != tt.want {
			t.Errorf("solveChallenge(%.20q…, %d) = %q, %v; want %q", tt.challenge, tt.bits, got, ok, tt.want)
		}
		if z := zeroBitsOf(tt.challenge, got); z < tt.bits {
			t.Errorf("SHA-256(%.20q…:%s) has %d zero bits, want ≥ %d", tt.challenge, got, z, tt.bits)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		challenge := "v1.k1.s." + strconv.FormatUint(rng.Uint64(), 36)
		bits := 1 + rng.IntN(9)
		got, ok := solveChallenge(challenge, "shopper-00001", bits, 1<<20)
		n, err := strconv.ParseUint(got, 10, 64)
		if !ok || err != nil || zeroBitsOf(challenge, got) < bits {
			t.Fatalf("solveChallenge(%q, %d) = %q, %v: not a solution", challenge, bits, got, ok)
		}
		for smaller := range n {
			if zeroBitsOf(challenge, strconv.FormatUint(smaller, 10)) >= bits {
				t.Fatalf("solveChallenge(%q, %d) = %q, but %d solves it too", challenge, bits, got, smaller)
			}
		}
	}
	for _, bits := range []int{-1, 33} {
		if got, ok := solveChallenge("abc", "shopper-00001", bits, 1<<20); ok {
			t.Errorf("solveChallenge(difficulty %d) = %q, true; want false", bits, got)
		}
	}
	if got, ok := solveChallenge(ch12, "shopper-00001", 12, 14504); ok { // one short of the answer
		t.Errorf("solveChallenge with too few tries = %q, true; want false", got)
	}
}

// zeroBitsOfPublished is zeroBitsOf for a published challenge, whose work
// binds the account: SHA-256(challenge "~" account ":" s).
func zeroBitsOfPublished(challenge, account, s string) int {
	sum := sha256.Sum256([]byte(challenge + "~" + account + ":" + s))
	return 256 - new(big.Int).SetBytes(sum[:]).BitLen()
}

// A published challenge ("p1.", the sale snapshot's) is solved for the
// account that joins: known answers, which edge/internal/challenge's Publish
// and Solve gave for a fixed key (below) and Python's hashlib agrees with;
// a solution that is the smallest with the zero bits for its account;
// another account, another answer; and no solution without an account.
func TestSolvePublishedChallenge(t *testing.T) {
	// challenge.New over the key set k1:"crowdsim-test-vector-secret-0001",
	// then Publish("crowd-1700000000", bits, 1700000040 s): the edge
	// verified each solution below.
	const p8 = "p1.k1.crowd-1700000000.1700000040.8.SRnMaQc7zLYnMUkJdHQhtJtSdf8AFPFgq2A4P1Km2Xo"
	const p12 = "p1.k1.crowd-1700000000.1700000040.12.GjKl_0BYzPvvDNs-2_4LNhiAVx5LY6XnJSC-nFpub1w"
	for _, tt := range []struct {
		challenge, account string
		bits               int
		want               string
	}{
		{p8, "shopper-00042", 8, "124"},    // SHA-256 starts 003ad77c
		{p8, "smart-00007", 8, "920"},      // 00178743
		{p12, "shopper-00042", 12, "2351"}, // 000bcef0
		{p12, "smart-00007", 12, "8565"},   // 00061c85
		// A kid with dots in it: the account still follows the whole value.
		{"p1.k.2.x.crowd-1.1700000040.4.AAAA", "shopper-00001", 4, "6"}, // 0061ee5c
	} {
		got, ok := solveChallenge(tt.challenge, tt.account, tt.bits, 1<<20)
		if !ok || got != tt.want {
			t.Errorf("solveChallenge(%.24q…, %s, %d) = %q, %v; want %q", tt.challenge, tt.account, tt.bits, got, ok, tt.want)
		}
		if z := zeroBitsOfPublished(tt.challenge, tt.account, got); z < tt.bits {
			t.Errorf("SHA-256(%.24q…~%s:%s) has %d zero bits, want ≥ %d", tt.challenge, tt.account, got, z, tt.bits)
		}
	}
	// The same string read as a personal challenge has another answer:
	// the account is what the published form adds.
	if got, _ := solveChallenge("v1"+p8[2:], "shopper-00042", 8, 1<<20); got == "124" || zeroBitsOf("v1"+p8[2:], got) < 8 {
		t.Errorf("solveChallenge(v1 form of the published value) = %q: solved as published, or not at all", got)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		challenge := "p1.k1.crowd-1." + strconv.FormatUint(rng.Uint64(), 36)
		account := "shopper-" + strconv.Itoa(rng.IntN(100_000))
		bits := 1 + rng.IntN(9)
		got, ok := solveChallenge(challenge, account, bits, 1<<20)
		n, err := strconv.ParseUint(got, 10, 64)
		if !ok || err != nil || zeroBitsOfPublished(challenge, account, got) < bits {
			t.Fatalf("solveChallenge(%q, %s, %d) = %q, %v: not a solution", challenge, account, bits, got, ok)
		}
		for smaller := range n {
			if zeroBitsOfPublished(challenge, account, strconv.FormatUint(smaller, 10)) >= bits {
				t.Fatalf("solveChallenge(%q, %s, %d) = %q, but %d solves it too", challenge, account, bits, got, smaller)
			}
		}
	}
	if got, ok := solveChallenge(p8, "", 8, 1<<20); ok {
		t.Errorf("solveChallenge(published, no account) = %q, true; want false", got)
	}
	if got, ok := solveChallenge(p12, "shopper-00042", 12, 2351); ok { // one short of the answer
		t.Errorf("solveChallenge(published) with too few tries = %q, true; want false", got)
	}
}

// A device's solving time is geometric: mean 2^bits hashes at its rate,
// about 1 in 20 over three times the mean, never under one hash's time.
func TestSolveTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 20_000
	for _, tt := range []struct {
		name string
		rate float64
		want time.Duration // the mean: 2^17 / rate
	}{
		{"phone", 150_000, 873_813 * time.Microsecond},
		{"server core", 3_000_000, 43_691 * time.Microsecond},
	} {
		times := make([]float64, n)
		var sum float64
		for i := range times {
			d := solveTime(rng, 17, tt.rate)
			if d < time.Duration(float64(time.Second)/tt.rate) {
				t.Fatalf("%s: solveTime = %v, under one hash", tt.name, d)
			}
			times[i] = d.Seconds()
			sum += times[i]
		}
		mean := sum / n
		if math.Abs(mean-tt.want.Seconds()) > 0.03*tt.want.Seconds() {
			t.Errorf("%s: mean solveTime = %.4f s, want %.4f s ± 3 %%", tt.name, mean, tt.want.Seconds())
		}
		slices.Sort(times)
		// P(X > 3·mean) = e^-3 ≈ 0.0498 for a geometric of small p.
		if p95 := times[n*95/100] / tt.want.Seconds(); p95 < 2.8 || p95 > 3.2 {
			t.Errorf("%s: p95 = %.2f × the mean, want about 3", tt.name, p95)
		}
	}
	if d := solveTime(rng, 0, 100); d != 10*time.Millisecond {
		t.Errorf("solveTime(0 bits, 100/s) = %v, want one hash, 10ms", d)
	}
	if d := solveTime(rng, 17, 0); d != 0 {
		t.Errorf("solveTime(no rate) = %v, want 0", d)
	}
}
