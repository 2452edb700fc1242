package challenge

import (
	"crypto/sha256"
	"math/bits"
	"strconv"
)

// Solve finds a solution of challenge for account the way the package doc
// tells the page to, trying "0", "1", "2", ... up to maxTries of them, for
// tests and the crowd simulator. account is part of the work of a published
// challenge only; a personal one binds it by its MAC. It reports false if
// challenge is malformed or no try solved it.
func Solve(challenge, account string, maxTries uint64) (string, bool) {
	var prefix []byte
	var difficulty int
	if IsPublic(challenge) {
		f, ok := parsePublic(challenge)
		if !ok || account == "" || len(account) > MaxAccountLen {
			return "", false
		}
		prefix, difficulty = []byte(challenge+"~"+account+":"), f.bits
	} else {
		f, ok := parse(challenge)
		if !ok {
			return "", false
		}
		prefix, difficulty = []byte(challenge+":"), f.bits
	}
	buf := make([]byte, len(prefix), len(prefix)+MaxSolutionLen)
	copy(buf, prefix)
	for n := range maxTries {
		try := strconv.AppendUint(buf, n, 10)
		if leadingZeroBits(sha256.Sum256(try)) >= difficulty {
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
