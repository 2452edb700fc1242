package reserveperf

// An admission token's claims as the origin reads them on reserve: the
// tokens package's claim scanner (Verifier.Admission's fast path) against
// github.com/valyala/fastjson, on the same tokens.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fastjson"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

const claimsKID = "bench1"

var claimsSecret = []byte("flashgate-bench-claims-secret-01")

// claimsInput is one admission token and the sale it is presented for.
type claimsInput struct {
	name, token, sale string
}

// claimsInputs issues admission tokens with the product's Issuer: short,
// UUID and long account ids.
func claimsInputs(b *testing.B, c clock.Clock) []claimsInput {
	keys, err := tokens.NewKeySet(claimsKID, map[string][]byte{claimsKID: claimsSecret})
	if err != nil {
		b.Fatal(err)
	}
	iss := tokens.NewIssuer(keys, tokens.IssuerOptions{Clock: c})
	var out []claimsInput
	for _, in := range []struct{ name, sale, account string }{
		{"short", "s1", "a42"},
		{"uuid", "diwali-2026", "5f0c2d0e-8f7b-4d2a-9a43-0b8e7d6c5a41"},
		{"long", "big-billion-days-2026-electronics", strings.Repeat("acct-", 12) + "000123456789"},
	} {
		tok, _, err := iss.Admission(in.sale, in.account, 1_234_567)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, claimsInput{in.name, tok, in.sale})
	}
	return out
}

// fastjsonVerifier is Verifier.Admission's fast path with fastjson in place
// of the claim scanner: split, HMAC-SHA256, base64, then the claims decoded
// and checked as the fast path checks them. One per goroutine.
type fastjsonVerifier struct {
	header string // the header segment our Issuer writes for claimsKID
	mac    hash.Hash
	buf    []byte // header.payload, signed
	body   []byte // the decoded payload
	p      fastjson.Parser
	now    func() time.Time
	leeway time.Duration
}

var errClaims = errors.New("claims refused")

// flat is what the fastjson path reads out of the claims object.
type flat struct {
	iss, sub, jti, sale string
	aud                 []string
	exp, nbf, iat, pos  int64
	hasExp, hasNbf      bool
	hasIat              bool
}

// payload verifies token's signature and returns its decoded payload,
// valid until the next call.
func (f *fastjsonVerifier) payload(token string) ([]byte, error) {
	header, rest, ok := strings.Cut(token, ".")
	if !ok || header != f.header {
		return nil, errClaims
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, errClaims
	}
	var want, got [sha256.Size]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(got[:], []byte(sig)); err != nil || n != len(got) {
		return nil, errClaims
	}
	f.buf = append(f.buf[:0], token[:len(header)+1+len(payload)]...)
	f.mac.Reset()
	f.mac.Write(f.buf)
	if !hmac.Equal(got[:], f.mac.Sum(want[:0])) {
		return nil, errClaims
	}
	n := base64.RawURLEncoding.DecodedLen(len(payload))
	f.body = slices.Grow(f.body[:0], n)[:n]
	n, err := base64.RawURLEncoding.Strict().Decode(f.body, f.buf[len(header)+1:])
	if err != nil {
		return nil, errClaims
	}
	return f.body[:n], nil
}

// parse reads the claims object with fastjson: known claims of the wrong
// type are refused, others skipped.
func (f *fastjsonVerifier) parse(b []byte) (flat, error) {
	var c flat
	v, err := f.p.ParseBytes(b)
	if err != nil {
		return c, err
	}
	o, err := v.Object()
	if err != nil {
		return c, err
	}
	bad := false
	str := func(v *fastjson.Value) string {
		s, err := v.StringBytes()
		if err != nil {
			bad = true
		}
		return string(s)
	}
	num := func(v *fastjson.Value) int64 {
		n, err := v.Int64()
		if err != nil || n < 0 {
			bad = true
		}
		return n
	}
	o.Visit(func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "iss":
			c.iss = str(v)
		case "sub":
			c.sub = str(v)
		case "jti":
			c.jti = str(v)
		case "sale":
			c.sale = str(v)
		case "aud":
			if v.Type() == fastjson.TypeString {
				c.aud = []string{str(v)}
				return
			}
			a, err := v.Array()
			if err != nil || len(a) == 0 {
				bad = true
				return
			}
			for _, e := range a {
				c.aud = append(c.aud, str(e))
			}
		case "exp":
			c.exp, c.hasExp = num(v), true
		case "nbf":
			c.nbf, c.hasNbf = num(v), true
		case "iat":
			c.iat, c.hasIat = num(v), true
		case "pos":
			c.pos = num(v)
		}
	})
	if bad {
		return c, errClaims
	}
	return c, nil
}

// Admission is Verifier.Admission's fast path with fastjson.
func (f *fastjsonVerifier) Admission(token, sale string) (tokens.AdmissionClaims, error) {
	p, err := f.payload(token)
	if err != nil {
		return tokens.AdmissionClaims{}, err
	}
	c, err := f.parse(p)
	if err != nil {
		return tokens.AdmissionClaims{}, err
	}
	now := f.now()
	switch {
	case !c.hasExp || !now.Before(time.Unix(c.exp, 0).Add(f.leeway)),
		c.hasNbf && now.Before(time.Unix(c.nbf, 0).Add(-f.leeway)),
		c.hasIat && now.Before(time.Unix(c.iat, 0).Add(-f.leeway)),
		c.iss != tokens.IssuerName, !slices.Contains(c.aud, tokens.AudienceOrigin),
		c.sub == "", c.jti == "", c.sale != sale:
		return tokens.AdmissionClaims{}, errClaims
	}
	r := jwt.RegisteredClaims{Issuer: c.iss, Subject: c.sub, ID: c.jti, Audience: c.aud,
		ExpiresAt: jwt.NewNumericDate(time.Unix(c.exp, 0))}
	if c.hasNbf {
		r.NotBefore = jwt.NewNumericDate(time.Unix(c.nbf, 0))
	}
	if c.hasIat {
		r.IssuedAt = jwt.NewNumericDate(time.Unix(c.iat, 0))
	}
	return tokens.AdmissionClaims{RegisteredClaims: r, Sale: c.sale, Pos: c.pos}, nil
}

func newFastjsonVerifier(token string, now func() time.Time) *fastjsonVerifier {
	header, _, _ := strings.Cut(token, ".")
	return &fastjsonVerifier{header: header, mac: hmac.New(sha256.New, claimsSecret), now: now, leeway: tokens.DefaultLeeway}
}

// The two paths agree on every input before they are timed.
func checkSame(b *testing.B, v *tokens.Verifier, f *fastjsonVerifier, in claimsInput) {
	want, err := v.Admission(in.token, in.sale)
	if err != nil {
		b.Fatal(err)
	}
	got, err := f.Admission(in.token, in.sale)
	if err != nil {
		b.Fatalf("fastjson: %v", err)
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		b.Fatalf("fastjson claims %s, scanner %s", gj, wj)
	}
}

func BenchmarkClaims(b *testing.B) {
	c := clock.NewFake(tokenstest.Start())
	now := c.Now
	keys, err := tokens.NewKeySet(claimsKID, map[string][]byte{claimsKID: claimsSecret})
	if err != nil {
		b.Fatal(err)
	}
	v := tokens.NewVerifier(keys, tokens.VerifierOptions{Clock: c})
	for _, in := range claimsInputs(b, c) {
		f := newFastjsonVerifier(in.token, now)
		checkSame(b, v, f, in)
		// The whole of Verifier.Admission: signature, claims, checks.
		b.Run(in.name+"/verify/scanner", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Admission(in.token, in.sale); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/verify/fastjson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Admission(in.token, in.sale); err != nil {
					b.Fatal(err)
				}
			}
		})
		// What both verify paths share before the claims: split, HMAC, base64.
		b.Run(in.name+"/signature-only", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.payload(in.token); err != nil {
					b.Fatal(err)
				}
			}
		})
		p, err := f.payload(in.token)
		if err != nil {
			b.Fatal(err)
		}
		p = slices.Clone(p)
		// The claims object alone: fastjson, and encoding/json (the slow
		// path's decoder) for scale.
		b.Run(in.name+"/parse/fastjson", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := f.parse(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/parse/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				var c tokens.AdmissionClaims
				if err := json.Unmarshal(p, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
