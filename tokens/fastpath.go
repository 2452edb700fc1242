package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"hash"
	"slices"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// The fast path verifies the tokens our own Issuer produces without
// golang-jwt's generic parsing (header map, reflection-heavy validation,
// error joining). It is an optimisation only: it returns true only where the
// slow path (jwt.Parser) would also succeed with the same claims, and on any
// doubt at all it returns false and the caller runs the slow path, which
// produces every error. Tests compare the two paths on many mutated tokens.

// fastKey is one kid of the key set: the exact header segment our Issuer
// writes for it, and pooled HMAC-SHA256 hashes keyed with its secret.
type fastKey struct {
	header  string
	scratch sync.Pool // of *fastScratch
}

// fastScratch is per-call state, pooled per kid.
type fastScratch struct {
	mac  hash.Hash // HMAC-SHA256 keyed with the kid's secret; Reset before use
	buf  []byte    // a copy of the token
	body []byte    // the decoded payload
}

// strictB64 is the decoding golang-jwt uses under WithStrictDecoding.
var strictB64 = base64.RawURLEncoding.Strict()

// newFastKeys precomputes the fast-path keys of secrets.
func newFastKeys(secrets map[string][]byte) []*fastKey {
	out := make([]*fastKey, 0, len(secrets))
	for kid, secret := range secrets {
		if kid == "" { // the slow path rejects an empty kid; never fast-path it
			continue
		}
		s, err := newToken(jwt.RegisteredClaims{}, kid).SigningString()
		if err != nil {
			continue // then tokens with this kid take the slow path
		}
		header, _, _ := strings.Cut(s, ".")
		secret := secret
		out = append(out, &fastKey{
			header:  header,
			scratch: sync.Pool{New: func() any { return &fastScratch{mac: hmac.New(sha256.New, secret)} }},
		})
	}
	return out
}

// fastParse verifies token and decodes its claims into c as the slow path
// would, checking signature, exp, nbf, iat, iss and aud exactly as the jwt
// parser configured in NewVerifier does. It reports false on any failure; c
// may then be partly written and must be discarded.
func (v *Verifier) fastParse(aud, token string, c *jwt.RegisteredClaims, claims any) bool {
	if v.slowOnly || len(token) == 0 || len(token) > maxTokenLen {
		return false
	}
	header, rest, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return false
	}
	var key *fastKey
	for _, k := range v.fast {
		if k.header == header {
			key = k
			break
		}
	}
	if key == nil {
		return false
	}

	sc := key.scratch.Get().(*fastScratch)
	defer key.scratch.Put(sc)
	sc.buf = append(sc.buf[:0], token...) // one copy, so nothing below converts strings
	signed := sc.buf[:len(header)+1+len(payload)]
	body := signed[len(header)+1:]
	sigB := sc.buf[len(signed)+1:]

	// Signature: HMAC-SHA256 over "header.payload", as jwt's HMAC Verify.
	var want, got [sha256.Size]byte
	if len(sigB) != base64.RawURLEncoding.EncodedLen(len(got)) {
		return false
	}
	if n, err := strictB64.Decode(got[:], sigB); err != nil || n != len(got) {
		return false
	}
	sc.mac.Reset()
	_, _ = sc.mac.Write(signed)
	if !hmac.Equal(got[:], sc.mac.Sum(want[:0])) {
		return false
	}

	// Claims: the same struct through encoding/json as the slow path (which
	// json.Unmarshals into it too); only the decoding is stricter. Unmarshal
	// copies what it keeps, so the pooled buffer may be reused.
	sc.body = slices.Grow(sc.body[:0], strictB64.DecodedLen(len(body)))[:strictB64.DecodedLen(len(body))]
	n, err := strictB64.Decode(sc.body, body)
	if err != nil {
		return false
	}
	if err := json.Unmarshal(sc.body[:n], claims); err != nil {
		return false
	}

	// The Validator's checks, with the same comparisons.
	now := v.now()
	leeway := v.leeway
	switch {
	case c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time.Add(+leeway)):
		return false
	case c.NotBefore != nil && now.Before(c.NotBefore.Add(-leeway)):
		return false
	case c.IssuedAt != nil && now.Before(c.IssuedAt.Add(-leeway)):
		return false
	case c.Issuer != IssuerName:
		return false
	}
	for _, a := range c.Audience {
		if a == aud {
			return true
		}
	}
	return false
}

// newToken is the unsigned token Issuer signs for claims c and key kid. The
// Verifier derives its fast-path headers from it, so they match byte for byte.
func newToken(c jwt.Claims, kid string) *jwt.Token {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	t.Header["kid"] = kid
	return t
}
