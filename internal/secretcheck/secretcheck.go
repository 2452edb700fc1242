// Package secretcheck judges whether a secret an operator chose, such as an
// admin bearer token, could hold the randomness of 32 random bytes (256
// bits): long enough for its alphabet, and not obviously made by hand
// ("aaaa…", a repeated word, a run like "abcdef…").
//
// It cannot prove randomness; it refuses what is certainly short of it.
package secretcheck

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// MinBits is the randomness a secret must be able to hold: that of 32
// random bytes.
const MinBits = 256

// HowToMake is how to make a secret that passes, for error messages.
const HowToMake = "make one with `openssl rand -base64 32`"

const (
	hexDigits = "0123456789abcdefABCDEF"
	base64Set = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
)

// Strong returns nil when s could hold MinBits of randomness, else an error
// saying why not; the error never quotes s.
func Strong(s string) error {
	body := strings.TrimRight(s, "=") // base64 padding carries nothing
	n := len(body)
	bitsPerChar, alphabet := 6.0, "characters"
	switch {
	case n == 0:
		return errors.New("it is empty")
	case onlyOf(body, hexDigits):
		bitsPerChar, alphabet = 4, "hex digits"
	case onlyOf(body, base64Set):
		alphabet = "base64 characters"
	}
	if capacity := float64(n) * bitsPerChar; capacity < MinBits {
		return fmt.Errorf("it is %d %s, which hold at most %.0f random bits; want %d", n, alphabet, capacity, MinBits)
	}
	if p := period(body); p > 0 {
		return fmt.Errorf("it repeats a pattern of %d characters", p)
	}
	if runs := ascendingSteps(body); runs*2 > n {
		return errors.New("it is mostly a run of consecutive characters")
	}
	// Random 32-byte secrets, hex or base64, show well over 128 bits of
	// character-frequency entropy; a secret below it repeats a few
	// characters.
	if h := frequencyBits(body); h < MinBits/2 {
		return fmt.Errorf("it uses too few distinct characters (%.0f bits of character entropy; random secrets show over %d)", h, MinBits/2)
	}
	return nil
}

func onlyOf(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}

// period returns the length of the shortest pattern s repeats (at least
// twice), or 0 when it repeats none.
func period(s string) int {
	for p := 1; p <= len(s)/2; p++ {
		if s[p:] == s[:len(s)-p] {
			return p
		}
	}
	return 0
}

// ascendingSteps counts the neighbours in s whose second byte follows the
// first ("ab", "12").
func ascendingSteps(s string) int {
	n := 0
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1]+1 {
			n++
		}
	}
	return n
}

// frequencyBits is the Shannon entropy of s's byte frequencies times its
// length, in bits.
func frequencyBits(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h * n
}
