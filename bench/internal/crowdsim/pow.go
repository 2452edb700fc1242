package crowdsim

import (
	"crypto/sha256"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"
)

// maxChallengeBits is the hardest difficulty the edge hands out
// (edge/internal/challenge's MaxDifficultyBits).
const maxChallengeBits = 32

// maxSolveTries bounds a solve: 2^26 tries finds a solution of a 20-bit
// challenge but for odds of e^-64; the simulator never asks for more.
const maxSolveTries = 1 << 26

// solveChallenge finds the proof of work of a join the edge answered 403
// challenge_required (docs/API.md): the smallest counter s, tried as the
// decimal strings "0", "1", "2", …, such that SHA-256(challenge ":" s)
// starts with at least difficulty zero bits, counted from the top bit of
// the first byte — as the page's worker (static/challenge-worker.js)
// finds it. The challenge is opaque and sent back byte for byte. It
// reports false for a difficulty out of 0..32 or after maxTries tries.
func solveChallenge(challenge string, difficulty int, maxTries uint64) (string, bool) {
	if difficulty < 0 || difficulty > maxChallengeBits {
		return "", false
	}
	buf := make([]byte, 0, len(challenge)+1+20)
	buf = append(buf, challenge...)
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
