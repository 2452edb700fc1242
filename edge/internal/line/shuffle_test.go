package line_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestShuffleIsPermutation: the draw maps 1..n onto 1..n one to one, for
// sizes at, just off and between the Feistel domain's powers of four.
func TestShuffleIsPermutation(t *testing.T) {
	t.Parallel()
	seed := bytes.Repeat([]byte{0xA5}, 32)
	for _, n := range []int64{1, 2, 3, 4, 5, 15, 16, 17, 1000, 1024, 4097} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := line.NewShuffle(seed, n)
			seen := make([]bool, n+1)
			for i := int64(1); i <= n; i++ {
				p, err := s.Position(i)
				if err != nil || p < 1 || p > n {
					t.Fatalf("Position(%d) of %d = %d, %v; want a position in 1..%d", i, n, p, err, n)
				}
				if seen[p] {
					t.Fatalf("Position(%d) of %d = %d, which another index already has", i, n, p)
				}
				seen[p] = true
			}
			for _, i := range []int64{0, -1, n + 1} {
				if p, err := s.Position(i); err == nil {
					t.Errorf("Position(%d) of %d = %d, nil; want an error (outside 1..%d)", i, n, p, n)
				}
			}
		})
	}
}

// TestShuffleReproducible: the same seed gives the same draw, anyone
// holding the seed can recompute it from the published algorithm
// (feistel-sha256-8, reimplemented here from its description), and another
// seed gives another draw.
func TestShuffleReproducible(t *testing.T) {
	t.Parallel()
	seed, _ := hex.DecodeString("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	const n = 1000
	a, b := line.NewShuffle(seed, n), line.NewShuffle(append([]byte(nil), seed...), n)
	other := line.NewShuffle(bytes.Repeat([]byte{1}, 32), n)
	same, identity := 0, 0
	for i := int64(1); i <= n; i++ {
		pa, _ := a.Position(i)
		pb, _ := b.Position(i)
		if pa != pb {
			t.Fatalf("Position(%d) = %d and %d under the same seed, want equal", i, pa, pb)
		}
		if ref := referenceShuffle(seed, n, i); pa != ref {
			t.Fatalf("Position(%d) = %d, want %d as the published algorithm computes it", i, pa, ref)
		}
		if po, _ := other.Position(i); po == pa {
			same++
		}
		if pa == i {
			identity++
		}
	}
	// A random permutation of 1000 fixes about one point; 20 would be absurd.
	if same > 20 {
		t.Errorf("%d of %d positions agree under two different seeds, want a different draw", same, n)
	}
	if identity > 20 {
		t.Errorf("%d of %d pre-queue joins keep their join order, want a shuffle", identity, n)
	}
}

// referenceShuffle is the draw as a verifier outside flashgate would write
// it: Feistel over the smallest even power of two >= n (at least 4), 8
// rounds, round function = first 8 bytes (big-endian) of SHA-256(seed ||
// round byte || right half as 8 bytes big-endian) masked to the half width,
// cycle-walking until the result is below n; positions are 1-based.
func referenceShuffle(seed []byte, n, i int64) int64 {
	bits := uint(2)
	for int64(1)<<bits < n {
		bits += 2
	}
	half := bits / 2
	mask := uint64(1)<<half - 1
	x := uint64(i - 1)
	for {
		l, r := x>>half, x&mask
		for round := 0; round < 8; round++ {
			msg := append(append(append([]byte(nil), seed...), byte(round)), binary.BigEndian.AppendUint64(nil, r)...)
			sum := sha256.Sum256(msg)
			l, r = r, l^(binary.BigEndian.Uint64(sum[:8])&mask)
		}
		x = l<<half | r
		if x < uint64(n) {
			return int64(x) + 1
		}
	}
}

// TestSeedHash: the commitment is hex SHA-256 of the seed's bytes.
func TestSeedHash(t *testing.T) {
	t.Parallel()
	seed := []byte("0123456789abcdef0123456789abcdef")
	sum := sha256.Sum256(seed)
	if got, want := line.SeedHash(seed), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("SeedHash = %s, want %s", got, want)
	}
}
