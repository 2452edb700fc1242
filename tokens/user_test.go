package tokens_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// userKeys are one key pair per supported user-token algorithm, generated once.
type userKeys struct {
	edPub   ed25519.PublicKey
	edPriv  ed25519.PrivateKey
	rsaPriv *rsa.PrivateKey
	hmac    []byte
}

func newUserKeys(t *testing.T) userKeys {
	t.Helper()
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return userKeys{edPub: edPub, edPriv: edPriv, rsaPriv: rsaPriv, hmac: tokenstest.UserSecret()}
}

func pemOf(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestUserVerifier(t *testing.T) {
	keys := newUserKeys(t)
	clock := clock.NewFake(tokenstest.Start())
	now := clock.Now()
	opts := tokens.UserVerifierOptions{Issuer: "shop-idp", Audience: "flashgate", Clock: clock}

	edPub, err := tokens.ParsePublicKeyPEM(pemOf(t, keys.edPub))
	if err != nil {
		t.Fatalf("ParsePublicKeyPEM(ed25519) err = %v", err)
	}
	rsaPub, err := tokens.ParsePublicKeyPEM(pemOf(t, &keys.rsaPriv.PublicKey))
	if err != nil {
		t.Fatalf("ParsePublicKeyPEM(rsa) err = %v", err)
	}
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)

	good := jwt.MapClaims{
		"iss": "shop-idp",
		"aud": "flashgate",
		"sub": "acct-42",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	algs := []struct {
		name   string
		key    tokens.UserKey
		method jwt.SigningMethod
		priv   any
		// confusion: HS256 tokens signed with the public key's bytes, which a
		// verifier that let the token pick its algorithm would accept.
		confusion [][]byte
		wrongKey  any
	}{
		{
			name: "HS256", key: tokens.UserKey{HMACSecret: keys.hmac},
			method: jwt.SigningMethodHS256, priv: keys.hmac,
			wrongKey: secretA,
		},
		{
			name: "EdDSA", key: tokens.UserKey{PublicKey: edPub},
			method: jwt.SigningMethodEdDSA, priv: keys.edPriv,
			confusion: [][]byte{keys.edPub, pemOf(t, keys.edPub)},
			wrongKey:  otherEd,
		},
		{
			name: "RS256", key: tokens.UserKey{PublicKey: rsaPub},
			method: jwt.SigningMethodRS256, priv: keys.rsaPriv,
			confusion: [][]byte{pemOf(t, &keys.rsaPriv.PublicKey), x509.MarshalPKCS1PublicKey(&keys.rsaPriv.PublicKey)},
			wrongKey:  mustRSA(t),
		},
	}
	for _, alg := range algs {
		v, err := tokens.NewUserVerifier(alg.key, opts)
		if err != nil {
			t.Fatalf("NewUserVerifier(%s) err = %v", alg.name, err)
		}
		s := func(c jwt.MapClaims) string { return sign(t, alg.method, nil, c, alg.priv) }
		type tc struct {
			name, token string
			want        error
		}
		tests := []tc{
			{"valid", s(good), nil},
			{"valid with kid", sign(t, alg.method, map[string]any{"kid": "whatever"}, good, alg.priv), nil},
			{"empty", "", tokens.ErrMissing},
			{"garbage", "not-a-token", tokens.ErrMalformed},
			{"expired", s(with(good, map[string]any{"exp": now.Add(-time.Minute).Unix()})), tokens.ErrExpired},
			{"missing exp", s(with(good, map[string]any{"exp": nil})), tokens.ErrInvalid},
			{"missing sub", s(with(good, map[string]any{"sub": nil})), tokens.ErrInvalid},
			{"wrong iss", s(with(good, map[string]any{"iss": "evil"})), tokens.ErrInvalid},
			{"missing iss", s(with(good, map[string]any{"iss": nil})), tokens.ErrInvalid},
			{"wrong aud", s(with(good, map[string]any{"aud": "edge"})), tokens.ErrInvalid},
			{"aud list containing ours", s(with(good, map[string]any{"aud": []string{"x", "flashgate"}})), nil},
			{"issued in the future", s(with(good, map[string]any{"iat": now.Add(time.Hour).Unix()})), tokens.ErrInvalid},
			{"wrong key", sign(t, alg.method, nil, good, alg.wrongKey), tokens.ErrInvalid},
			{"tampered payload", replacePart(s(good), 1, segment(t, with(good, map[string]any{"sub": "acct-1"}))), tokens.ErrInvalid},
			{"alg none", segment(t, map[string]any{"alg": "none"}) + "." + segment(t, good) + ".", tokens.ErrInvalid},
		}
		for i, k := range alg.confusion {
			tests = append(tests, tc{"HS256 signed with public key bytes " + string(rune('A'+i)), sign(t, jwt.SigningMethodHS256, nil, good, k), tokens.ErrInvalid})
		}
		for _, m := range []struct {
			method jwt.SigningMethod
			key    any
		}{{jwt.SigningMethodHS256, keys.hmac}, {jwt.SigningMethodEdDSA, keys.edPriv}, {jwt.SigningMethodRS256, keys.rsaPriv}, {jwt.SigningMethodPS256, keys.rsaPriv}, {jwt.SigningMethodRS512, keys.rsaPriv}} {
			if m.method != alg.method {
				tests = append(tests, tc{"other alg " + m.method.Alg(), sign(t, m.method, nil, good, m.key), tokens.ErrInvalid})
			}
		}
		for _, tt := range tests {
			t.Run(alg.name+"/"+tt.name, func(t *testing.T) {
				got, err := v.Account(tt.token)
				if !sameErr(err, tt.want) {
					t.Fatalf("Account(tok) err = %v, want %v", err, tt.want)
				}
				if tt.want == nil && got != "acct-42" {
					t.Errorf("Account(tok) = %q, want %q", got, "acct-42")
				}
			})
		}
	}
}

func TestUserVerifierUncheckedIssAud(t *testing.T) {
	secret := tokenstest.UserSecret()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodHS256, nil, jwt.MapClaims{"sub": "a", "exp": time.Now().Add(time.Minute).Unix()}, secret)
	if got, err := v.Account(tok); err != nil || got != "a" {
		t.Errorf("Account(tok without iss/aud) = %q, %v; want a, nil", got, err)
	}
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewUserVerifierErrors(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	small := &rsa.PublicKey{N: new(big.Int).Lsh(big.NewInt(1), 1023), E: 65537}
	tests := []struct {
		name string
		key  tokens.UserKey
	}{
		{"none", tokens.UserKey{}},
		{"both", tokens.UserKey{HMACSecret: tokenstest.UserSecret(), PublicKey: edPub}},
		{"short secret", tokens.UserKey{HMACSecret: []byte("short")}},
		{"empty secret", tokens.UserKey{HMACSecret: []byte{}}},
		{"short ed25519", tokens.UserKey{PublicKey: edPub[:16]}},
		{"small rsa", tokens.UserKey{PublicKey: small}},
		{"nil rsa", tokens.UserKey{PublicKey: (*rsa.PublicKey)(nil)}},
		{"ecdsa", tokens.UserKey{PublicKey: &ecKey.PublicKey}},
		{"ed25519 private key", tokens.UserKey{PublicKey: ed25519.NewKeyFromSeed(make([]byte, 32))}},
		{"rsa value", tokens.UserKey{PublicKey: mustRSA(t).PublicKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := tokens.NewUserVerifier(tt.key, tokens.UserVerifierOptions{}); err == nil {
				t.Errorf("NewUserVerifier(%s) = %v, want error", tt.name, v)
			}
		})
	}
}

func TestParsePublicKeyPEM(t *testing.T) {
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey := mustRSA(t)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)})
	tests := []struct {
		name    string
		pem     []byte
		wantErr bool
		check   func(crypto.PublicKey) bool
	}{
		{"ed25519", pemOf(t, edPub), false, func(k crypto.PublicKey) bool { return edPub.Equal(k) }},
		{"rsa", pemOf(t, &rsaKey.PublicKey), false, func(k crypto.PublicKey) bool { return rsaKey.PublicKey.Equal(k) }},
		{"leading text", append([]byte("shop key\n"), pemOf(t, edPub)...), false, func(k crypto.PublicKey) bool { return edPub.Equal(k) }},
		{"ecdsa", pemOf(t, &ecKey.PublicKey), true, nil},
		{"pkcs1 block", pkcs1, true, nil},
		{"not pem", []byte("hello"), true, nil},
		{"empty", nil, true, nil},
		{"bad der", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("junk")}), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tokens.ParsePublicKeyPEM(tt.pem)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParsePublicKeyPEM(%s) = %T, %v; want error %v", tt.name, k, err, tt.wantErr)
			}
			if tt.check != nil && !tt.check(k) {
				t.Errorf("ParsePublicKeyPEM(%s) = %T, not the encoded key", tt.name, k)
			}
		})
	}
}

func TestDevUserIssuer(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	secret := tokenstest.UserSecret()
	dev := tokens.NewDevUserIssuer(secret, "flashgate-dev", time.Hour, clock)
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret},
		tokens.UserVerifierOptions{Issuer: "flashgate-dev", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}

	tok, err := dev.Issue("dev-user-1")
	if err != nil {
		t.Fatalf("Issue(dev-user-1) err = %v", err)
	}
	if got, err := v.Account(tok); err != nil || got != "dev-user-1" {
		t.Errorf("Account(tok) = %q, %v; want dev-user-1, nil", got, err)
	}
	clock.Advance(time.Hour + tokens.DefaultLeeway)
	if _, err := v.Account(tok); !errors.Is(err, tokens.ErrExpired) {
		t.Errorf("Account(tok) after ttl err = %v, want %v", err, tokens.ErrExpired)
	}

	if _, err := dev.Issue(""); err == nil {
		t.Error("Issue(\"\") err = nil, want error")
	}
	if _, err := tokens.NewDevUserIssuer([]byte("short"), "", 0, nil).Issue("a"); err == nil {
		t.Error("Issue with a short secret err = nil, want error")
	}
	// The caller's secret slice is copied.
	secret[0] ^= 0xff
	tok, err = dev.Issue("dev-user-2")
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: tokenstest.UserSecret()}, tokens.UserVerifierOptions{Clock: clock})
	if got, err := v2.Account(tok); err != nil || got != "dev-user-2" {
		t.Errorf("Account(tok) after changing the caller's secret = %q, %v; want dev-user-2, nil", got, err)
	}
}

// TestUserVerifierRefusesOurTokens: were the shop's user-token secret one
// of our token keys, our queue and admission tokens would be signed with
// it; the verifier still refuses them, and any token with our iss or one of
// our auds, on the fast path (golang-jwt's own header, trusted from the
// start) as on the slow one.
func TestUserVerifierRefusesOurTokens(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: f.secret}, tokens.UserVerifierOptions{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	queue, _, err := f.iss.Queue("sale-1", "acct-1", 3, false, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	admission, _, err := f.iss.Admission("sale-1", "acct-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	good := jwt.MapClaims{"sub": "acct-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	s := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, nil, c, f.secret) }
	tests := []struct {
		name, token string
		want        error
	}{
		{"a queue token", queue, tokens.ErrInvalid},
		{"an admission token", admission, tokens.ErrInvalid},
		{"our iss", s(with(good, map[string]any{"iss": tokens.IssuerName})), tokens.ErrInvalid},
		{"aud edge", s(with(good, map[string]any{"aud": tokens.AudienceEdge})), tokens.ErrInvalid},
		{"aud origin in a list", s(with(good, map[string]any{"aud": []string{"shop", tokens.AudienceOrigin}})), tokens.ErrInvalid},
		{"another iss and aud", s(with(good, map[string]any{"iss": tokens.IssuerName + "-shop", "aud": []string{"shop", "edges"}})), nil},
		{"neither", s(good), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []struct {
				name string
				v    *tokens.UserVerifier
			}{{"fast", v}, {"slow", tokens.UserSlowOnly(v)}} {
				for round := range 2 { // the second after the first could have taught the fast path the header
					got, err := path.v.Account(tt.token)
					if !sameErr(err, tt.want) || (tt.want == nil && got != "acct-1") {
						t.Errorf("%s path, round %d: Account(%s) = %q, %v; want acct-1 or %v", path.name, round, tt.name, got, err, tt.want)
					}
				}
			}
		})
	}

	for _, opts := range []tokens.UserVerifierOptions{{Issuer: tokens.IssuerName}, {Audience: tokens.AudienceEdge}, {Audience: tokens.AudienceOrigin}} {
		if _, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: tokenstest.UserSecret()}, opts); err == nil {
			t.Errorf("NewUserVerifier(iss %q, aud %q) err = nil, want an error: no user token could pass", opts.Issuer, opts.Audience)
		}
	}
}

// TestUserVerifierOneSpelling: a user token has one spelling. Base64's
// last character of a segment may carry unused bits; a token whose
// signature differs from a genuine one only there is refused, on the fast
// and the slow path and for every algorithm.
func TestUserVerifierOneSpelling(t *testing.T) {
	keys := newUserKeys(t)
	clock := clock.NewFake(tokenstest.Start())
	now := clock.Now()
	claims := jwt.MapClaims{"sub": "acct-42", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for _, alg := range []struct {
		name      string
		key       tokens.UserKey
		method    jwt.SigningMethod
		priv      any
		spellings int // of one signature: 2 to the unused bits of its last character
	}{
		{"HS256", tokens.UserKey{HMACSecret: keys.hmac}, jwt.SigningMethodHS256, keys.hmac, 4},
		{"EdDSA", tokens.UserKey{PublicKey: keys.edPub}, jwt.SigningMethodEdDSA, keys.edPriv, 16},
		{"RS256", tokens.UserKey{PublicKey: &keys.rsaPriv.PublicKey}, jwt.SigningMethodRS256, keys.rsaPriv, 16},
	} {
		t.Run(alg.name, func(t *testing.T) {
			v, err := tokens.NewUserVerifier(alg.key, tokens.UserVerifierOptions{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			tok := sign(t, alg.method, nil, claims, alg.priv)
			if got, err := v.Account(tok); err != nil || got != "acct-42" {
				t.Fatalf("Account(genuine) = %q, %v; want acct-42", got, err)
			}
			others := respellings(t, tok)
			if len(others) != alg.spellings-1 {
				t.Fatalf("%d other spellings of the signature, want %d", len(others), alg.spellings-1)
			}
			for _, other := range others {
				for name, v := range map[string]*tokens.UserVerifier{"fast": v, "slow": tokens.UserSlowOnly(v)} {
					if got, err := v.Account(other); !errors.Is(err, tokens.ErrMalformed) {
						t.Errorf("%s path: Account(signature ending %q for %q) = %q, %v; want %v",
							name, other[len(other)-1:], tok[len(tok)-1:], got, err, tokens.ErrMalformed)
					}
				}
			}
		})
	}
}

// respellings returns tok with the last character of its signature
// replaced by each other character that lenient base64 decodes to the same
// bytes.
func respellings(t *testing.T, tok string) []string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatalf("decode the signature of %q: %v", tok, err)
	}
	var out []string
	for i := range len(alphabet) {
		alt := sig[:len(sig)-1] + alphabet[i:i+1]
		if got, err := base64.RawURLEncoding.DecodeString(alt); alt != sig && err == nil && bytes.Equal(got, want) {
			out = append(out, tok[:len(tok)-1]+alphabet[i:i+1])
		}
	}
	return out
}
