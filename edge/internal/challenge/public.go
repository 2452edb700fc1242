package challenge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PublicWindow is how often a sale's published challenge changes: it is the
// same for every account and every node within one such window, so the sale
// snapshot (cached by the CDN) can carry it.
const PublicWindow = time.Minute

// The published form (package doc).
const (
	publicVersion  = "p1."
	publicKeyLabel = "flashgate public challenge v1"
)

// Publish returns sale's published challenge of difficultyBits (0 to
// MaxDifficultyBits) for the PublicWindow that now falls in. It is a
// function of the active key, the sale, the window and the difficulty only:
// every node with the same active key publishes the same string, and nobody
// without the key can know it before its window starts.
func (c *Challenger) Publish(sale string, difficultyBits int, now time.Time) (Challenge, error) {
	switch {
	case !validSale(sale):
		return Challenge{}, errors.New("challenge: sale id not [A-Za-z0-9_-]{1,64}")
	case difficultyBits < 0 || difficultyBits > MaxDifficultyBits:
		return Challenge{}, fmt.Errorf("challenge: difficulty %d bits, want 0 to %d", difficultyBits, MaxDifficultyBits)
	}
	window := now.Truncate(PublicWindow).Unix()
	windowText := strconv.FormatInt(window, 10)
	if window <= 0 || len(windowText) > maxWindowDigits {
		return Challenge{}, fmt.Errorf("challenge: clock reads %v", now)
	}
	signed := publicVersion + c.active.kid + "." + sale + "." + windowText + "." + strconv.Itoa(difficultyBits)
	mac := c.active.publicMAC(signed)
	return Challenge{
		Value:          signed + "." + string(mac[:]),
		DifficultyBits: difficultyBits,
		Expires:        time.Unix(window, 0).Add(c.validity),
	}, nil
}

// IsPublic reports whether challenge is in the published form: its work
// binds the account (package doc).
func IsPublic(challenge string) bool { return strings.HasPrefix(challenge, publicVersion) }

// publicMAC returns the base64url MAC of a published challenge's signed
// part, under the kid's public challenge key.
func (k *key) publicMAC(signed string) [macB64Len]byte {
	sc := k.publicMACs.Get().(*macScratch)
	sc.msg = append(sc.msg[:0], signed...)
	sc.mac.Reset()
	_, _ = sc.mac.Write(sc.msg)
	sc.sum = sc.mac.Sum(sc.sum[:0])
	var out [macB64Len]byte
	base64.RawURLEncoding.Encode(out[:], sc.sum)
	k.publicMACs.Put(sc)
	return out
}

// inWindow is nil when a challenge whose window starts at window (Unix
// seconds) is taken at now: from ClockSkew before it until Validity after.
func (c *Challenger) inWindow(window int64, now time.Time) error {
	start := time.Unix(window, 0)
	if now.Before(start.Add(-c.skew)) {
		return fmt.Errorf("%w: starts %v ahead", ErrExpired, start.Sub(now).Round(time.Second))
	}
	if now.After(start.Add(c.validity)) {
		return fmt.Errorf("%w: issued %v ago", ErrExpired, now.Sub(start).Round(time.Second))
	}
	return nil
}

// parsePublic reads a challenge in the published form, strictly, as parse
// does the personal one. It does not allocate.
func parsePublic(s string) (fields, bool) {
	if len(s) > MaxChallengeLen || !strings.HasPrefix(s, publicVersion) {
		return fields{}, false
	}
	rest, mac, ok1 := cutLast(s[len(publicVersion):])
	rest, bitsText, ok2 := cutLast(rest)
	rest, windowText, ok3 := cutLast(rest)
	kid, sale, ok4 := cutLast(rest)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return fields{}, false
	}
	window, okW := decimal(windowText, maxWindowDigits)
	bits, okB := decimal(bitsText, maxBitsDigits)
	if !okW || !okB || bits > MaxDifficultyBits || window%int64(PublicWindow/time.Second) != 0 || !validKID(kid) ||
		!validSale(sale) || !base64URL(mac, macB64Len) {
		return fields{}, false
	}
	return fields{kid: kid, sale: sale, window: window, bits: int(bits), mac: mac, signed: s[:len(s)-len(mac)-1]}, true
}

// accountWork is the number of leading zero bits of SHA-256(challenge "~"
// account ":" solution), from a stack buffer. Verify has checked the
// lengths. The solution is digits only, so the last colon ends the account
// and no two (account, solution) pairs hash the same input.
func accountWork(challenge, account, solution string) int {
	var buf [MaxChallengeLen + 1 + MaxAccountLen + 1 + MaxSolutionLen]byte
	n := copy(buf[:], challenge)
	buf[n] = '~'
	n++
	n += copy(buf[n:], account)
	buf[n] = ':'
	n++
	n += copy(buf[n:], solution)
	return leadingZeroBits(sha256.Sum256(buf[:n]))
}

// newPublicMAC is a pooled MAC state under a public challenge key.
func newPublicMAC(publicKey []byte) func() any {
	return func() any {
		return &macScratch{mac: hmac.New(sha256.New, publicKey), msg: make([]byte, 0, MaxChallengeLen)}
	}
}
