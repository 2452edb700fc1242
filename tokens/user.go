package tokens

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MinRSABits is the smallest RSA modulus accepted for user tokens, in bits.
const MinRSABits = 2048

// UserKey is the shop identity service's verification key for user tokens.
// Exactly one field is set: HMACSecret (HS256, at least MinSecretLen bytes) or
// PublicKey, an ed25519.PublicKey (EdDSA) or *rsa.PublicKey (RS256, at least
// MinRSABits).
type UserKey struct {
	HMACSecret []byte
	PublicKey  crypto.PublicKey
}

// ParsePublicKeyPEM parses the first PEM block of pemBytes as a PKIX
// "PUBLIC KEY" holding an Ed25519 or RSA key, for UserKey.PublicKey.
func ParsePublicKeyPEM(pemBytes []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("tokens: no PEM block in public key")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("tokens: PEM block is %q, want \"PUBLIC KEY\"", block.Type)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tokens: parse public key: %w", err)
	}
	switch k := key.(type) {
	case ed25519.PublicKey, *rsa.PublicKey:
		return k, nil
	default:
		return nil, fmt.Errorf("tokens: public key is %T, want Ed25519 or RSA", key)
	}
}

// UserVerifierOptions configure a UserVerifier.
type UserVerifierOptions struct {
	// Issuer is the iss user tokens must carry; "" means iss is not checked
	// (then any token the shop signs with the key passes, whatever it was
	// issued for). It may not be IssuerName.
	Issuer string
	// Audience is an aud user tokens must carry; "" means aud is not
	// checked. It may not be AudienceEdge or AudienceOrigin.
	Audience string
	// Clock is the clock; nil means the machine's.
	Clock Clock
	// Leeway is the clock skew tolerated on exp and iat; 0 means
	// DefaultLeeway, negative means none.
	Leeway time.Duration
}

// UserVerifier checks the shop's user tokens (Authorization: Bearer) and
// yields the shopper's account id. It accepts only the one algorithm its key
// implies, whatever the token's header claims, and ignores kid: there is one
// key. Whatever it is configured with, it refuses a token with our own
// tokens' iss (IssuerName) or aud (AudienceEdge, AudienceOrigin): were the
// shop's key ever one of ours, a queue or admission token would otherwise
// pass as a user token. It is safe for concurrent use.
type UserVerifier struct {
	parser  *jwt.Parser
	keyfunc jwt.Keyfunc
	fast    *userFast // HS256 keys only; nil otherwise
}

// NewUserVerifier returns a UserVerifier for key, requiring exp and sub on
// every token (plus iss and aud if opts name them) and canonical base64 in
// every segment.
func NewUserVerifier(key UserKey, opts UserVerifierOptions) (*UserVerifier, error) {
	var (
		method jwt.SigningMethod
		vkey   any
	)
	switch {
	case opts.Issuer == IssuerName:
		return nil, fmt.Errorf("tokens: user tokens' issuer may not be %q, the issuer of our own tokens", IssuerName)
	case ourAudience(opts.Audience):
		return nil, fmt.Errorf("tokens: user tokens' audience may not be %q, an audience of our own tokens", opts.Audience)
	}
	switch {
	case key.HMACSecret != nil && key.PublicKey != nil:
		return nil, errors.New("tokens: user key: set HMACSecret or PublicKey, not both")
	case key.HMACSecret != nil:
		if len(key.HMACSecret) < MinSecretLen {
			return nil, fmt.Errorf("tokens: user key: HMAC secret is %d bytes, want at least %d", len(key.HMACSecret), MinSecretLen)
		}
		method, vkey = jwt.SigningMethodHS256, append([]byte(nil), key.HMACSecret...)
	case key.PublicKey != nil:
		switch k := key.PublicKey.(type) {
		case ed25519.PublicKey:
			if len(k) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("tokens: user key: Ed25519 public key is %d bytes, want %d", len(k), ed25519.PublicKeySize)
			}
			method, vkey = jwt.SigningMethodEdDSA, k
		case *rsa.PublicKey:
			if k == nil || k.N == nil || k.N.BitLen() < MinRSABits {
				return nil, fmt.Errorf("tokens: user key: RSA public key under %d bits", MinRSABits)
			}
			method, vkey = jwt.SigningMethodRS256, k
		default:
			return nil, fmt.Errorf("tokens: user key: public key is %T, want ed25519.PublicKey or *rsa.PublicKey", key.PublicKey)
		}
	default:
		return nil, errors.New("tokens: user key: neither HMACSecret nor PublicKey set")
	}

	now := nowOf(opts.Clock)
	popts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{method.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(normLeeway(opts.Leeway)),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(), // one spelling per token, as our own tokens' parsers and the fast path
	}
	if opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(opts.Issuer))
	}
	if opts.Audience != "" {
		popts = append(popts, jwt.WithAudience(opts.Audience))
	}
	var fast *userFast
	if method == jwt.SigningMethodHS256 {
		fast = newUserFast(key.HMACSecret, opts.Issuer, opts.Audience, now, normLeeway(opts.Leeway))
	}
	return &UserVerifier{
		fast:   fast,
		parser: jwt.NewParser(popts...),
		keyfunc: func(t *jwt.Token) (any, error) {
			if t.Method != method { // already pinned by the parser; belt and braces
				return nil, errAlg
			}
			return vkey, nil
		},
	}, nil
}

// Account verifies a user token and returns its sub, the shopper's account id.
// Errors wrap ErrMissing, ErrMalformed, ErrExpired or ErrInvalid.
func (v *UserVerifier) Account(token string) (string, error) {
	const what = "user token"
	if v.fast != nil {
		if sub, ok := v.fast.account(token); ok {
			return sub, nil
		}
	}
	if err := checkLen(what, token); err != nil {
		return "", err
	}
	var w userClaimsJSON
	if _, err := v.parser.ParseWithClaims(token, &w, v.keyfunc); err != nil {
		return "", classify(what, err)
	}
	c := w.RegisteredClaims
	if c.Subject == "" {
		return "", fmt.Errorf("%s: %w: no sub", what, ErrInvalid)
	}
	if c.Issuer == IssuerName || slices.ContainsFunc(c.Audience, ourAudience) {
		return "", fmt.Errorf("%s: %w: iss or aud of our own tokens", what, ErrInvalid)
	}
	if v.fast != nil {
		v.fast.learn(token)
	}
	return c.Subject, nil
}

// ourAudience reports whether aud is the audience of one of our own tokens.
func ourAudience(aud string) bool { return aud == AudienceEdge || aud == AudienceOrigin }

// DefaultDevUserTTL is the lifetime of dev user tokens when the ttl given to
// NewDevUserIssuer is not positive.
const DefaultDevUserTTL = 24 * time.Hour

// DevUserIssuer stands in for the shop's identity service in dev mode only
// (POST /v1/dev/login): it signs HS256 user tokens with the shared secret that
// the UserVerifier is configured with. Its tokens carry no aud, so pair it with
// a UserVerifier whose Audience is "". It is safe for concurrent use.
type DevUserIssuer struct {
	secret []byte
	issuer string
	ttl    time.Duration
	now    func() time.Time
}

// NewDevUserIssuer returns a DevUserIssuer signing with secret (at least
// MinSecretLen bytes, checked by Issue), setting iss to issuer unless it is "",
// and giving tokens ttl to live (DefaultDevUserTTL if not positive). A nil c
// means the machine's.
func NewDevUserIssuer(secret []byte, issuer string, ttl time.Duration, c Clock) *DevUserIssuer {
	if ttl <= 0 {
		ttl = DefaultDevUserTTL
	}
	return &DevUserIssuer{secret: append([]byte(nil), secret...), issuer: issuer, ttl: ttl, now: nowOf(c)}
}

// Issue returns a user token for account.
func (d *DevUserIssuer) Issue(account string) (string, error) {
	if account == "" {
		return "", errors.New("issue dev user token: empty account id")
	}
	if len(d.secret) < MinSecretLen {
		return "", fmt.Errorf("issue dev user token: secret is %d bytes, want at least %d", len(d.secret), MinSecretLen)
	}
	now := d.now()
	c := jwt.RegisteredClaims{
		Issuer:    d.issuer,
		Subject:   account,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(d.ttl)),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(d.secret)
	if err != nil {
		return "", fmt.Errorf("issue dev user token: %w", err)
	}
	return tok, nil
}
