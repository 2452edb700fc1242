package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The fast paths verify HS256 tokens without golang-jwt's generic parsing
// (header map, reflection-heavy claim decoding, error joining): our own queue
// and admission tokens (Verifier) and the shop's HS256 user tokens
// (UserVerifier). They are an optimisation only: each returns true only where
// the slow path (jwt.Parser) would also succeed with the same claims, and on
// any doubt at all it returns false and the caller runs the slow path, which
// produces every error. Tests compare the two paths on many hand-built and
// mutated tokens.

// macPool holds HMAC-SHA256 hashes keyed with one secret, and the buffers a
// verification needs.
type macPool struct {
	p sync.Pool // of *macScratch
}

// macScratch is per-call state.
type macScratch struct {
	mac  hash.Hash // keyed with the pool's secret; Reset before use
	buf  []byte    // a copy of the token, or a token being built
	body []byte    // a decoded or encoded payload
}

func newMacPool(secret []byte) *macPool {
	secret = slices.Clone(secret)
	return &macPool{p: sync.Pool{New: func() any { return &macScratch{mac: hmac.New(sha256.New, secret)} }}}
}

func (m *macPool) get() *macScratch   { return m.p.Get().(*macScratch) }
func (m *macPool) put(sc *macScratch) { m.p.Put(sc) }

// strictB64 is the decoding golang-jwt uses under WithStrictDecoding. Where
// it succeeds, the default (non-strict) decoding gives the same bytes.
var strictB64 = base64.RawURLEncoding.Strict()

// sigLen is the length of an HS256 signature segment.
var sigLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// splitCompact splits a compact JWT into its three segments, as golang-jwt
// does: exactly two dots.
func splitCompact(token string) (header, payload, sig string, ok bool) {
	header, rest, ok := strings.Cut(token, ".")
	if !ok {
		return "", "", "", false
	}
	payload, sig, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return "", "", "", false
	}
	return header, payload, sig, true
}

// verify checks that sig is the HS256 signature of header.payload under the
// pool's secret, as jwt's HMAC Verify does, and returns the decoded payload
// as a string (one allocation, which the claims' strings then share). header
// must be a segment the caller has already found acceptable.
func (m *macPool) verify(token string, headerLen, payloadLen int) (string, bool) {
	sc := m.get()
	defer m.put(sc)
	sc.buf = append(sc.buf[:0], token...) // one copy, so nothing below converts strings
	signed := sc.buf[:headerLen+1+payloadLen]
	body := signed[headerLen+1:]
	sigB := sc.buf[len(signed)+1:]

	var want, got [sha256.Size]byte
	if len(sigB) != sigLen {
		return "", false
	}
	if n, err := strictB64.Decode(got[:], sigB); err != nil || n != len(got) {
		return "", false
	}
	sc.mac.Reset()
	_, _ = sc.mac.Write(signed)
	if !hmac.Equal(got[:], sc.mac.Sum(want[:0])) {
		return "", false
	}

	n := strictB64.DecodedLen(len(body))
	sc.body = slices.Grow(sc.body[:0], n)[:n]
	n, err := strictB64.Decode(sc.body, body)
	if err != nil {
		return "", false
	}
	return string(sc.body[:n]), true
}

// signWith appends ".signature" of signed (header.payload) to signed, with
// sc's HMAC; sc must come from m.
func (m *macPool) signWith(sc *macScratch, signed []byte) []byte {
	var sum [sha256.Size]byte
	sc.mac.Reset()
	_, _ = sc.mac.Write(signed)
	signed = append(signed, '.')
	return base64.RawURLEncoding.AppendEncode(signed, sc.mac.Sum(sum[:0]))
}

// fastKey is one kid of a key set: the exact header segment our Issuer writes
// for it, and its pooled HMACs.
type fastKey struct {
	header string
	macs   *macPool
}

// newFastKeys precomputes the fast-path keys of secrets.
func newFastKeys(secrets map[string][]byte) []*fastKey {
	out := make([]*fastKey, 0, len(secrets))
	for kid, secret := range secrets {
		if kid == "" { // the slow path rejects an empty kid; never fast-path it
			continue
		}
		header, err := headerSegment(kid)
		if err != nil {
			continue // then tokens with this kid take the slow path
		}
		out = append(out, &fastKey{header: header, macs: newMacPool(secret)})
	}
	return out
}

// headerSegment is the header segment Issuer writes for kid.
func headerSegment(kid string) (string, error) {
	s, err := newToken(jwt.RegisteredClaims{}, kid).SigningString()
	if err != nil {
		return "", err
	}
	header, _, _ := strings.Cut(s, ".")
	return header, nil
}

// fastParse verifies one of our tokens for audience aud and decodes its
// claims (those in fields) as the slow path would, checking signature, exp,
// nbf, iat, iss and aud exactly as the jwt parser configured in NewVerifier
// does. It reports false on any failure or doubt.
func (v *Verifier) fastParse(aud string, fields claimSet, token string) (flatClaims, bool) {
	var c flatClaims
	if v.slowOnly || len(token) == 0 || len(token) > maxTokenLen {
		return c, false
	}
	header, payload, _, ok := splitCompact(token)
	if !ok {
		return c, false
	}
	var key *fastKey
	for _, k := range v.fast {
		if k.header == header {
			key = k
			break
		}
	}
	if key == nil {
		return c, false
	}
	p, ok := key.macs.verify(token, len(header), len(payload))
	if !ok || !claimScan(p, fields, &c) {
		return c, false
	}
	if !checkTimes(&c, v.now(), v.leeway) || c.iss != IssuerName || !hasAudience(&c, aud) {
		return c, false
	}
	return c, true
}

// checkTimes is the Validator's exp (required), nbf and iat checks, with its
// comparisons, on the times NumericDate would decode.
func checkTimes(c *flatClaims, now time.Time, leeway time.Duration) bool {
	if c.seen&claimExp == 0 {
		return false
	}
	switch {
	case !now.Before(numericTime(c.exp).Add(+leeway)):
		return false
	case c.seen&claimNbf != 0 && now.Before(numericTime(c.nbf).Add(-leeway)):
		return false
	case c.seen&claimIat != 0 && now.Before(numericTime(c.iat).Add(-leeway)):
		return false
	}
	return true
}

// hasAudience is the Validator's aud check for one expected audience.
func hasAudience(c *flatClaims, aud string) bool {
	if len(c.aud) == 0 || len(c.aud) == 1 && c.aud[0] == "" {
		return false
	}
	return slices.Contains(c.aud, aud)
}

// newToken is the unsigned token Issuer signs for claims c and key kid. The
// Verifier derives its fast-path headers from it, so they match byte for byte.
func newToken(c jwt.Claims, kid string) *jwt.Token {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	t.Header["kid"] = kid
	return t
}
