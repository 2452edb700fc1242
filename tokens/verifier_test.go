package tokens_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// fixture is an issuer and verifier sharing the fixed test keys and a manual clock.
type fixture struct {
	clock  *clock.Fake
	keys   *tokens.KeySet
	secret []byte
	iss    *tokens.Issuer
	ver    *tokens.Verifier
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	clock := clock.NewFake(tokenstest.Start())
	keys := tokenstest.KeySet()
	return &fixture{
		clock:  clock,
		keys:   keys,
		secret: secretOf(t, keys),
		iss:    tokens.NewIssuer(keys, tokens.IssuerOptions{Clock: clock}),
		ver:    tokens.NewVerifier(keys, tokens.VerifierOptions{Clock: clock}),
	}
}

func TestAdmissionRoundTrip(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	tok, issued, err := f.iss.Admission("sale-1", "acct-1", 42)
	if err != nil {
		t.Fatalf("Issuer.Admission err = %v", err)
	}
	got, err := f.ver.Admission(tok, "sale-1")
	if err != nil {
		t.Fatalf("Admission(tok) err = %v, want nil", err)
	}
	if got.Sale != "sale-1" || got.Pos != 42 || got.Subject != "acct-1" || got.Issuer != tokens.IssuerName {
		t.Errorf("Admission(tok) = %+v, want sale-1/42/acct-1/%s", got, tokens.IssuerName)
	}
	if len(got.Audience) != 1 || got.Audience[0] != tokens.AudienceOrigin {
		t.Errorf("Admission(tok).Audience = %v, want [%s]", got.Audience, tokens.AudienceOrigin)
	}
	if len(got.ID) != 22 || got.ID != issued.ID {
		t.Errorf("Admission(tok).ID = %q, want the issued 22-character jti %q", got.ID, issued.ID)
	}
	if !got.IssuedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(tokens.DefaultAdmissionTTL)) || got.NotBefore != nil {
		t.Errorf("Admission(tok) iat, exp, nbf = %v, %v, %v; want %v, %v, none",
			got.IssuedAt, got.ExpiresAt, got.NotBefore, now, now.Add(tokens.DefaultAdmissionTTL))
	}
	if !got.ExpiresAt.Equal(issued.ExpiresAt.Time) || !got.IssuedAt.Equal(issued.IssuedAt.Time) {
		t.Errorf("Admission(tok) times %v..%v, want the issued claims' %v..%v", got.IssuedAt, got.ExpiresAt, issued.IssuedAt, issued.ExpiresAt)
	}

	parsed, _, err := jwt.NewParser().ParseUnverified(tok, &jwt.RegisteredClaims{})
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Header["kid"] != tokenstest.KID || parsed.Header["alg"] != "HS256" {
		t.Errorf("header = %v, want kid %q and alg HS256", parsed.Header, tokenstest.KID)
	}

	_, again, err := f.iss.Admission("sale-1", "acct-1", 42)
	if err != nil || again.ID == issued.ID {
		t.Errorf("second Issuer.Admission jti = %q (err %v), want a fresh one", again.ID, err)
	}
}

func TestQueueRoundTrip(t *testing.T) {
	f := newFixture(t)
	ends := f.clock.Now().Add(2 * time.Hour)
	for _, pre := range []bool{false, true} {
		tok, _, err := f.iss.Queue("sale-1", "acct-9", 1234, pre, ends)
		if err != nil {
			t.Fatalf("Issuer.Queue err = %v", err)
		}
		got, err := f.ver.Queue(tok, "sale-1")
		if err != nil {
			t.Fatalf("Queue(tok) err = %v, want nil", err)
		}
		if got.Sale != "sale-1" || got.Pos != 1234 || got.Pre != pre || got.Subject != "acct-9" ||
			!got.ExpiresAt.Equal(ends) || got.Audience[0] != tokens.AudienceEdge {
			t.Errorf("Queue(tok) = %+v, want sale-1, pos 1234, pre %v, acct-9, exp %v, aud edge", got, pre, ends)
		}
	}
}

func TestIssuerErrors(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	if _, _, err := f.iss.Admission("", "acct", 1); err == nil {
		t.Error("Admission(empty sale) err = nil, want error")
	}
	if _, _, err := f.iss.Admission("s", "", 1); err == nil {
		t.Error("Admission(empty account) err = nil, want error")
	}
	if _, _, err := f.iss.Queue("s", "acct", -1, false, now.Add(time.Hour)); err == nil {
		t.Error("Queue(pos -1) err = nil, want error")
	}
	if _, _, err := f.iss.Queue("s", "acct", 1, false, now); err == nil {
		t.Error("Queue(expires now) err = nil, want error")
	}
}

func TestAdmissionTTLOption(t *testing.T) {
	f := newFixture(t)
	iss := tokens.NewIssuer(f.keys, tokens.IssuerOptions{Clock: f.clock, AdmissionTTL: time.Minute})
	tok, c, err := iss.Admission("s", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.clock.Now().Add(time.Minute); !c.ExpiresAt.Equal(want) {
		t.Errorf("Admission exp = %v, want %v", c.ExpiresAt, want)
	}
	f.clock.Advance(time.Minute + tokens.DefaultLeeway)
	if _, err := f.ver.Admission(tok, "s"); !errors.Is(err, tokens.ErrExpired) {
		t.Errorf("Admission(tok) after TTL+leeway err = %v, want %v", err, tokens.ErrExpired)
	}
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration
		want    error
	}{
		{"fresh", 0, nil},
		{"just before exp", tokens.DefaultAdmissionTTL - time.Second, nil},
		{"within leeway", tokens.DefaultAdmissionTTL + tokens.DefaultLeeway - time.Second, nil},
		{"at exp plus leeway", tokens.DefaultAdmissionTTL + tokens.DefaultLeeway, tokens.ErrExpired},
		{"long gone", 24 * time.Hour, tokens.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			atok, _, err := f.iss.Admission("s", "a", 1)
			if err != nil {
				t.Fatal(err)
			}
			qtok, _, err := f.iss.Queue("s", "a", 1, false, f.clock.Now().Add(tokens.DefaultAdmissionTTL))
			if err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(tt.advance)
			if _, err := f.ver.Admission(atok, "s"); !sameErr(err, tt.want) {
				t.Errorf("Admission(tok) err = %v, want %v", err, tt.want)
			}
			if _, err := f.ver.Queue(qtok, "s"); !sameErr(err, tt.want) {
				t.Errorf("Queue(tok) err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLeewayOption(t *testing.T) {
	f := newFixture(t)
	tok, _, _ := f.iss.Admission("s", "a", 1)
	f.clock.Advance(tokens.DefaultAdmissionTTL)
	strict := tokens.NewVerifier(f.keys, tokens.VerifierOptions{Clock: f.clock, Leeway: -1})
	if _, err := strict.Admission(tok, "s"); !errors.Is(err, tokens.ErrExpired) {
		t.Errorf("no-leeway Admission(tok) at exp err = %v, want %v", err, tokens.ErrExpired)
	}
	lax := tokens.NewVerifier(f.keys, tokens.VerifierOptions{Clock: f.clock, Leeway: time.Minute})
	if _, err := lax.Admission(tok, "s"); err != nil {
		t.Errorf("1m-leeway Admission(tok) at exp err = %v, want nil", err)
	}
}

// sameErr reports whether err matches want, where a nil want means no error.
func sameErr(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// TestVerifyRejects covers every way a token must fail, for both kinds.
func TestVerifyRejects(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	hsHeader := map[string]any{"kid": tokenstest.KID}
	other := tokenstest.OtherKeySet()

	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	type kind struct {
		name   string
		aud    string
		verify func(tok, sale string) error
		issue  func() string
	}
	kinds := []kind{
		{
			name: "admission", aud: tokens.AudienceOrigin,
			verify: func(tok, sale string) error { _, err := f.ver.Admission(tok, sale); return err },
			issue: func() string {
				tok, _, err := f.iss.Admission("s1", "acct-1", 7)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			},
		},
		{
			name: "queue", aud: tokens.AudienceEdge,
			verify: func(tok, sale string) error { _, err := f.ver.Queue(tok, sale); return err },
			issue: func() string {
				tok, _, err := f.iss.Queue("s1", "acct-1", 7, false, now.Add(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				return tok
			},
		},
	}

	for _, k := range kinds {
		good := claimsAt(now, k.aud, "s1")
		otherAud := tokens.AudienceEdge
		if k.aud == tokens.AudienceEdge {
			otherAud = tokens.AudienceOrigin
		}
		hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, hsHeader, c, f.secret) }
		tests := []struct {
			name  string
			token string
			sale  string
			want  error
		}{
			{"control: issued", k.issue(), "s1", nil},
			{"control: hand-signed", hs(good), "s1", nil},
			{"empty", "", "s1", tokens.ErrMissing},
			{"one segment", "abc", "s1", tokens.ErrMalformed},
			{"garbage segments", "a.b.c", "s1", tokens.ErrMalformed},
			{"bad JSON payload", replacePart(hs(good), 1, "bm90IGpzb24"), "s1", tokens.ErrMalformed},
			{"oversized", strings.Repeat("a", 9000) + ".b.c", "s1", tokens.ErrMalformed},
			{"other sale", k.issue(), "s2", tokens.ErrWrongSale},
			{"tampered payload", replacePart(k.issue(), 1, segment(t, with(good, map[string]any{"pos": 1}))), "s1", tokens.ErrInvalid},
			{"tampered sale", replacePart(k.issue(), 1, segment(t, with(good, map[string]any{"sale": "s2"}))), "s2", tokens.ErrInvalid},
			{"tampered signature", flipFirst(k.issue(), 2), "s1", tokens.ErrInvalid},
			{"no signature", replacePart(k.issue(), 2, ""), "s1", tokens.ErrInvalid},
			{"alg none", segment(t, map[string]any{"alg": "none", "typ": "JWT", "kid": tokenstest.KID}) + "." + segment(t, good) + ".", "s1", tokens.ErrInvalid},
			{"alg None", segment(t, map[string]any{"alg": "None", "kid": tokenstest.KID}) + "." + segment(t, good) + ".", "s1", tokens.ErrInvalid},
			{"no alg", handHS256(t, map[string]any{"kid": tokenstest.KID}, good, f.secret), "s1", tokens.ErrInvalid},
			{"HS384 with the right secret", sign(t, jwt.SigningMethodHS384, hsHeader, good, f.secret), "s1", tokens.ErrInvalid},
			{"RS256", sign(t, jwt.SigningMethodRS256, hsHeader, good, rsaKey), "s1", tokens.ErrInvalid},
			{"EdDSA", sign(t, jwt.SigningMethodEdDSA, hsHeader, good, edKey), "s1", tokens.ErrInvalid},
			{"unknown kid", sign(t, jwt.SigningMethodHS256, map[string]any{"kid": tokenstest.OtherKID}, good, secretOf(t, other)), "s1", tokens.ErrInvalid},
			{"unknown kid, our secret", sign(t, jwt.SigningMethodHS256, map[string]any{"kid": "nope"}, good, f.secret), "s1", tokens.ErrInvalid},
			{"known kid, other secret", sign(t, jwt.SigningMethodHS256, hsHeader, good, secretOf(t, other)), "s1", tokens.ErrInvalid},
			{"no kid", sign(t, jwt.SigningMethodHS256, nil, good, f.secret), "s1", tokens.ErrInvalid},
			{"kid not a string", sign(t, jwt.SigningMethodHS256, map[string]any{"kid": 1}, good, f.secret), "s1", tokens.ErrInvalid},
			{"other issuer's keys", otherIssued(t, k.name, now), "s1", tokens.ErrInvalid},
			{"missing exp", hs(with(good, map[string]any{"exp": nil})), "s1", tokens.ErrInvalid},
			{"missing iss", hs(with(good, map[string]any{"iss": nil})), "s1", tokens.ErrInvalid},
			{"wrong iss", hs(with(good, map[string]any{"iss": "shop"})), "s1", tokens.ErrInvalid},
			{"missing aud", hs(with(good, map[string]any{"aud": nil})), "s1", tokens.ErrInvalid},
			{"wrong aud", hs(with(good, map[string]any{"aud": otherAud})), "s1", tokens.ErrInvalid},
			{"other kind's aud", hs(with(good, map[string]any{"aud": []string{otherAud}})), "s1", tokens.ErrInvalid},
			{"wrong aud and expired", hs(with(good, map[string]any{"aud": otherAud, "exp": now.Add(-time.Hour).Unix()})), "s1", tokens.ErrInvalid},
			{"expired", hs(with(good, map[string]any{"exp": now.Add(-time.Hour).Unix()})), "s1", tokens.ErrExpired},
			{"expired, other sale", hs(with(good, map[string]any{"exp": now.Add(-time.Hour).Unix()})), "s2", tokens.ErrExpired},
			{"issued in the future", hs(with(good, map[string]any{"iat": now.Add(time.Hour).Unix()})), "s1", tokens.ErrInvalid},
			{"not yet valid", hs(with(good, map[string]any{"nbf": now.Add(time.Hour).Unix()})), "s1", tokens.ErrInvalid},
			{"missing sub", hs(with(good, map[string]any{"sub": nil})), "s1", tokens.ErrInvalid},
			{"empty sub", hs(with(good, map[string]any{"sub": ""})), "s1", tokens.ErrInvalid},
			{"missing sale", hs(with(good, map[string]any{"sale": nil})), "s1", tokens.ErrWrongSale},
			{"exp not a number", hs(with(good, map[string]any{"exp": "tomorrow"})), "s1", tokens.ErrMalformed},
		}
		if k.aud == tokens.AudienceOrigin {
			tests = append(tests, struct {
				name  string
				token string
				sale  string
				want  error
			}{"missing jti", hs(with(good, map[string]any{"jti": nil})), "s1", tokens.ErrInvalid})
		}
		for _, tt := range tests {
			t.Run(k.name+"/"+tt.name, func(t *testing.T) {
				err := k.verify(tt.token, tt.sale)
				if !sameErr(err, tt.want) {
					t.Errorf("%s(tok) err = %v, want %v", k.name, err, tt.want)
				}
			})
		}
	}
}

// otherIssued returns a token of the given kind signed by a key set the
// verifier does not hold.
func otherIssued(t *testing.T, kind string, now time.Time) string {
	t.Helper()
	iss := tokens.NewIssuer(tokenstest.OtherKeySet(), tokens.IssuerOptions{Clock: clock.NewFake(now)})
	var (
		tok string
		err error
	)
	if kind == "admission" {
		tok, _, err = iss.Admission("s1", "acct-1", 7)
	} else {
		tok, _, err = iss.Queue("s1", "acct-1", 7, false, now.Add(time.Hour))
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestKindsDoNotMix(t *testing.T) {
	f := newFixture(t)
	atok, _, _ := f.iss.Admission("s1", "a", 1)
	qtok, _, _ := f.iss.Queue("s1", "a", 1, false, f.clock.Now().Add(time.Hour))
	if _, err := f.ver.Admission(qtok, "s1"); !errors.Is(err, tokens.ErrInvalid) {
		t.Errorf("Admission(queue token) err = %v, want %v", err, tokens.ErrInvalid)
	}
	if _, err := f.ver.Queue(atok, "s1"); !errors.Is(err, tokens.ErrInvalid) {
		t.Errorf("Queue(admission token) err = %v, want %v", err, tokens.ErrInvalid)
	}
}

func TestVerifierConcurrent(t *testing.T) {
	f := newFixture(t)
	tok, _, _ := f.iss.Queue("s1", "a", 1, false, f.clock.Now().Add(time.Hour))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if _, err := f.ver.Queue(tok, "s1"); err != nil {
					t.Errorf("Queue(tok) err = %v, want nil", err)
					return
				}
				if _, err := f.ver.Queue(tok, "s2"); !errors.Is(err, tokens.ErrWrongSale) {
					t.Errorf("Queue(tok, s2) err = %v, want %v", err, tokens.ErrWrongSale)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchQueueToken returns a real-clock verifier and a queue token for it, so
// that benchmarks measure verification and not the test clock's mutex.
func benchQueueToken(b *testing.B) (*tokens.Verifier, string) {
	keys := tokenstest.KeySet()
	tok, _, err := tokens.NewIssuer(keys, tokens.IssuerOptions{}).
		Queue("sale-2026-drop", "acct-0123456789", 123456, true, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	return tokens.NewVerifier(keys, tokens.VerifierOptions{}), tok
}

func BenchmarkVerifyQueue(b *testing.B) {
	ver, tok := benchQueueToken(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Queue(tok, "sale-2026-drop"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyQueueParallel(b *testing.B) {
	ver, tok := benchQueueToken(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ver.Queue(tok, "sale-2026-drop"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkVerifyQueueSlowOnly(b *testing.B) {
	ver, tok := benchQueueToken(b)
	ver = tokens.SlowOnly(ver)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Queue(tok, "sale-2026-drop"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchAdmissionToken is benchQueueToken for an admission token.
func benchAdmissionToken(b *testing.B) (*tokens.Verifier, string) {
	keys := tokenstest.KeySet()
	tok, _, err := tokens.NewIssuer(keys, tokens.IssuerOptions{}).Admission("sale-2026-drop", "acct-0123456789", 123456)
	if err != nil {
		b.Fatal(err)
	}
	return tokens.NewVerifier(keys, tokens.VerifierOptions{}), tok
}

func BenchmarkVerifyAdmission(b *testing.B) {
	ver, tok := benchAdmissionToken(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Admission(tok, "sale-2026-drop"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyAdmissionSlowOnly(b *testing.B) {
	ver, tok := benchAdmissionToken(b)
	ver = tokens.SlowOnly(ver)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Admission(tok, "sale-2026-drop"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUserAccount(b *testing.B) {
	secret := tokenstest.UserSecret()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{Issuer: "shop"})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokens.NewDevUserIssuer(secret, "shop", time.Hour, nil).Issue("user-300012345")
	if err != nil {
		b.Fatal(err)
	}
	for _, bv := range []struct {
		name string
		v    *tokens.UserVerifier
	}{{"fast", v}, {"slow", tokens.UserSlowOnly(v)}} {
		b.Run(bv.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bv.v.Account(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIssue(b *testing.B) {
	f := newFixture(b)
	exp := f.clock.Now().Add(time.Hour)
	for _, bi := range []struct {
		name string
		iss  *tokens.Issuer
	}{{"fast", f.iss}, {"slow", tokens.SlowIssuer(f.iss)}} {
		b.Run("queue/"+bi.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := bi.iss.Queue("s1", "user-300012345", 12345, false, exp); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("admission/"+bi.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := bi.iss.Admission("s1", "user-300012345", 12345); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
