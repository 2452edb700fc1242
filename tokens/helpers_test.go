package tokens_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/tokens"
)

// secretOf returns the secret of ks's active key, read back from its spec form.
func secretOf(t testing.TB, ks *tokens.KeySet) []byte {
	t.Helper()
	first, _, _ := strings.Cut(ks.String(), ",")
	_, b64, _ := strings.Cut(first, ":")
	s, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("decode secret of %v: %v", ks, err)
	}
	return s
}

// sign signs claims with method and key, adding header fields.
func sign(t testing.TB, method jwt.SigningMethod, header map[string]any, claims jwt.Claims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s token: %v", method.Alg(), err)
	}
	return s
}

// segment is the base64url JSON encoding of v, as in a compact JWT.
func segment(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// handHS256 builds a compact JWT by hand, signing header.payload with HMAC-SHA256.
func handHS256(t testing.TB, header, claims map[string]any, secret []byte) string {
	t.Helper()
	signing := segment(t, header) + "." + segment(t, claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// claimsAt returns valid token claims (as a map, so cases can drop or change
// any of them) for aud issued at now, expiring an hour later.
func claimsAt(now time.Time, aud, sale string) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":  tokens.IssuerName,
		"sub":  "acct-1",
		"aud":  []string{aud},
		"iat":  now.Unix(),
		"exp":  now.Add(time.Hour).Unix(),
		"sale": sale,
		"pos":  7,
	}
	if aud == tokens.AudienceOrigin {
		c["jti"] = "jti-0123456789abcdef"
	}
	return c
}

// with returns a copy of c with the given changes; a nil value deletes the claim.
func with(c jwt.MapClaims, changes map[string]any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// replacePart replaces part i (0 header, 1 payload, 2 signature) of a compact JWT.
func replacePart(tok string, i int, part string) string {
	parts := strings.Split(tok, ".")
	parts[i] = part
	return strings.Join(parts, ".")
}

// flipFirst changes the first character of part i, keeping it valid base64url.
func flipFirst(tok string, i int) string {
	parts := strings.Split(tok, ".")
	p := []byte(parts[i])
	if p[0] == 'A' {
		p[0] = 'B'
	} else {
		p[0] = 'A'
	}
	parts[i] = string(p)
	return strings.Join(parts, ".")
}
