package line

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Shuffle is the pre-queue draw: a permutation of 1..n keyed by a secret
// seed, that maps the i-th pre-queue join to its position in line. It is a
// balanced Feistel network over the smallest even power of two >= n, with
// cycle-walking to stay inside 1..n; each round's function is the first 8
// bytes of SHA-256(seed || round || half). It needs no memory per shopper,
// and anyone holding the revealed seed can recompute every position
// (docs/FAIRNESS.md shows how).
type Shuffle struct {
	seed     []byte
	n        uint64
	halfBits uint
	mask     uint64
}

// ShuffleAlgorithm names the draw as the snapshot and the admission log
// publish it (draw.algorithm).
const ShuffleAlgorithm = "feistel-sha256-8"

// shuffleRounds: eight rounds make the permutation's output indistinguishable
// from random for any practical pre-queue size.
const shuffleRounds = 8

// NewShuffle returns the permutation of 1..n under seed.
func NewShuffle(seed []byte, n int64) Shuffle {
	bits := uint(2)
	for uint64(1)<<bits < uint64(n) {
		bits += 2
	}
	return Shuffle{seed: seed, n: uint64(n), halfBits: bits / 2, mask: 1<<(bits/2) - 1}
}

// Position returns the place in line (1..n) of pre-queue join i (1..n).
func (s Shuffle) Position(i int64) (int64, error) {
	if i < 1 || uint64(i) > s.n {
		return 0, fmt.Errorf("shuffle: index %d outside 1..%d", i, s.n)
	}
	x := uint64(i - 1)
	for {
		x = s.encrypt(x)
		if x < s.n {
			return int64(x) + 1, nil
		}
	}
}

func (s Shuffle) encrypt(x uint64) uint64 {
	left, right := x>>s.halfBits, x&s.mask
	var buf [64]byte
	n := copy(buf[:], s.seed)
	msg := buf[:n+9]
	for r := range shuffleRounds {
		msg[n] = byte(r)
		binary.BigEndian.PutUint64(msg[n+1:], right)
		sum := sha256.Sum256(msg)
		f := binary.BigEndian.Uint64(sum[:8]) & s.mask
		left, right = right, left^f
	}
	return left<<s.halfBits | right
}

// SeedHash is the commitment published before the start: hex SHA-256 of the
// seed's bytes.
func SeedHash(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}
