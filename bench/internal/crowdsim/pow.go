package crowdsim

import (
	"crypto/sha256"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// maxChallengeBits is the hardest difficulty the edge hands out
// (edge/internal/challenge's MaxDifficultyBits).
const maxChallengeBits = 32

// maxSolveTries bounds a solve: 2^26 tries finds a solution of a 20-bit
// challenge but for odds of e^-64; the simulator never asks for more.
const maxSolveTries = 1 << 26

// publishedChallenge starts a published challenge (the sale snapshot's,
// the same for every account: its work binds the account that joins);
// a personal one (a 403 challenge_required's, "v1.") binds the account by
// its MAC instead (edge/internal/challenge's package doc).
const publishedChallenge = "p1."

// solveChallenge finds the proof of work of a join for account, as the
// page's worker (static/challenge-worker.js) does: the smallest counter s,
// tried as the decimal strings "0", "1", "2", …, whose hash starts with at
// least difficulty zero bits, counted from the top bit of the first byte.
// The hash is SHA-256(challenge "~" account ":" s) for a published
// challenge (the snapshot's, "p1.…"), and SHA-256(challenge ":" s) for any
// other — the personal one of a 403 challenge_required ("v1.…"), which
// leaves account out. The challenge is opaque but for that prefix and is
// sent back byte for byte; its difficulty is the one the edge's JSON gave.
// It reports false for a difficulty out of 0..32, a published challenge
// without an account, or after maxTries tries.
func solveChallenge(challenge, account string, difficulty int, maxTries uint64) (string, bool) {
	if difficulty < 0 || difficulty > maxChallengeBits {
		return "", false
	}
	buf := make([]byte, 0, len(challenge)+1+len(account)+1+20)
	buf = append(buf, challenge...)
	if strings.HasPrefix(challenge, publishedChallenge) {
		if account == "" {
			return "", false
		}
		buf = append(buf, '~')
		buf = append(buf, account...)
	}
	buf = append(buf, ':')
	for n := range maxTries {
		try := strconv.AppendUint(buf, n, 10)
		if leadingZeroBits(sha256.Sum256(try)) >= difficulty {
			return string(try[len(buf):]), true
		}
	}
	return "", false
}

// leadingZeroBits counts the zero bits of sum before its first one bit.
func leadingZeroBits(sum [sha256.Size]byte) int {
	for i, b := range sum {
		if b != 0 {
			return i*8 + bits.LeadingZeros8(b)
		}
	}
	return 8 * sha256.Size
}

// solveTime is how long a device doing hashesPerS hashes a second takes to
// solve a challenge of difficulty bits: each try succeeds with probability
// 2^-bits, so the tries are geometric (mean 2^bits; 1 solve in 20 takes
// three times that), drawn from rng.
func solveTime(rng *rand.Rand, difficulty int, hashesPerS float64) time.Duration {
	if hashesPerS <= 0 {
		return 0
	}
	p := math.Ldexp(1, -difficulty)
	tries := 1.0
	if p < 1 {
		// Inversion: the first success of Bernoulli(p) trials.
		tries = math.Floor(math.Log(1-rng.Float64())/math.Log1p(-p)) + 1
	}
	return time.Duration(tries / hashesPerS * float64(time.Second))
}
