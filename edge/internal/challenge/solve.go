package challenge

import (
	"crypto/sha256"
	"math/bits"
	"strconv"
)

// Solve finds a solution of challenge the way the package doc tells the page
// to, trying "0", "1", "2", ... up to maxTries of them, for tests and the
// crowd simulator. It reports false if challenge is malformed or no try
// solved it.
func Solve(challenge string, maxTries uint64) (string, bool) {
	f, ok := parse(challenge)
	if !ok {
		return "", false
	}
	buf := make([]byte, 0, len(challenge)+1+MaxSolutionLen)
	buf = append(buf, challenge...)
	buf = append(buf, ':')
	for n := range maxTries {
		try := strconv.AppendUint(buf, n, 10)
		if leadingZeroBits(sha256.Sum256(try)) >= f.bits {
			return string(try[len(buf):]), true
		}
	}
	return "", false
}

// work is the number of leading zero bits of SHA-256(challenge ":"
// solution), which must fit in MaxChallengeLen and MaxSolutionLen (Verify has
// checked). It hashes from a stack buffer, so it does not allocate.
func work(challenge, solution string) int {
	var buf [MaxChallengeLen + 1 + MaxSolutionLen]byte
	n := copy(buf[:], challenge)
	buf[n] = ':'
	n++
	n += copy(buf[n:], solution)
	return leadingZeroBits(sha256.Sum256(buf[:n]))
}

// leadingZeroBits counts the zero bits of sum before its first one bit, from
// the most significant bit of sum[0].
func leadingZeroBits(sum [sha256.Size]byte) int {
	for i, b := range sum {
		if b != 0 {
			return i*8 + bits.LeadingZeros8(b)
		}
	}
	return 8 * sha256.Size
}
