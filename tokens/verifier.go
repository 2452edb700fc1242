package tokens

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultLeeway is the clock skew tolerated on exp and iat when an options
// struct's Leeway is zero.
const DefaultLeeway = 5 * time.Second

// maxTokenLen bounds the token strings we are willing to parse, in bytes; ours
// are a few hundred bytes and shop user tokens rarely pass 2 KiB.
const maxTokenLen = 8 << 10

// VerifierOptions configure a Verifier.
type VerifierOptions struct {
	// Clock is the clock; nil means the machine's.
	Clock Clock
	// Leeway is the clock skew tolerated on exp and iat; 0 means
	// DefaultLeeway, negative means none.
	Leeway time.Duration
}

// Verifier checks the queue tokens (edge) and admission tokens (origin) that
// an Issuer with the same key set signed. It pins HS256, looks kid up in its
// fixed key set only, and requires iss, aud, exp and sub (and jti on admission
// tokens). Its parsers are built once and shared; it is safe for concurrent use.
type Verifier struct {
	keys      map[string]any // kid -> secret, boxed once so key lookups allocate nothing
	queue     *jwt.Parser
	admission *jwt.Parser
	keyfunc   jwt.Keyfunc // bound once so that verifying allocates no closure

	// The fast path (fastpath.go) for our own tokens, with the parsers' clock and leeway.
	fast     []*fastKey
	now      func() time.Time
	leeway   time.Duration
	slowOnly bool // tests: disable the fast path
}

// NewVerifier returns a Verifier that accepts tokens signed by any key in
// keys; keys must not be nil.
func NewVerifier(keys *KeySet, opts VerifierOptions) *Verifier {
	now := nowOf(opts.Clock)
	leeway := normLeeway(opts.Leeway)
	parser := func(aud string) *jwt.Parser {
		return jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithIssuer(IssuerName),
			jwt.WithAudience(aud),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(leeway),
			jwt.WithTimeFunc(now),
			jwt.WithStrictDecoding(),
		)
	}
	boxed := make(map[string]any, len(keys.secrets))
	for kid, secret := range keys.secrets {
		boxed[kid] = secret
	}
	v := &Verifier{
		keys:      boxed,
		queue:     parser(AudienceEdge),
		admission: parser(AudienceOrigin),
		fast:      newFastKeys(keys.secrets),
		now:       now,
		leeway:    leeway,
	}
	v.keyfunc = v.key
	return v
}

var (
	errNoKID      = errors.New("no kid in header")
	errUnknownKID = errors.New("unknown kid")
	errAlg        = errors.New("unexpected signing method")
)

// key is the Keyfunc: the secret named by the token's kid, from the fixed key set only.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if t.Method != jwt.SigningMethodHS256 { // already pinned by the parser; belt and braces
		return nil, errAlg
	}
	kid, ok := t.Header["kid"].(string)
	if !ok || kid == "" {
		return nil, errNoKID
	}
	secret, ok := v.keys[kid]
	if !ok {
		return nil, errUnknownKID
	}
	return secret, nil
}

// Admission verifies an admission token presented to reserve in sale and
// returns its claims. Errors wrap ErrMissing, ErrMalformed, ErrExpired,
// ErrInvalid or ErrWrongSale. Burning the jti is the caller's job.
func (v *Verifier) Admission(token, sale string) (AdmissionClaims, error) {
	if fc, ok := v.fastParse(AudienceOrigin, admissionFields, token); ok && fc.sub != "" && fc.jti != "" && fc.sale == sale {
		return AdmissionClaims{RegisteredClaims: fc.registered(), Sale: fc.sale, Pos: fc.pos}, nil
	}
	var w admissionClaimsJSON
	if err := v.parse(v.admission, "admission token", token, &w); err != nil {
		return AdmissionClaims{}, err
	}
	c := w.AdmissionClaims
	switch {
	case c.Subject == "":
		return AdmissionClaims{}, fmt.Errorf("admission token: %w: no sub", ErrInvalid)
	case c.ID == "":
		return AdmissionClaims{}, fmt.Errorf("admission token: %w: no jti", ErrInvalid)
	case c.Sale != sale:
		return AdmissionClaims{}, fmt.Errorf("admission token: %w", ErrWrongSale)
	}
	return c, nil
}

// Queue verifies a queue token presented for sale (join, status poll) and
// returns its claims. Errors wrap ErrMissing, ErrMalformed, ErrExpired,
// ErrInvalid or ErrWrongSale.
func (v *Verifier) Queue(token, sale string) (QueueClaims, error) {
	if fc, ok := v.fastParse(AudienceEdge, queueFields, token); ok && fc.sub != "" && fc.sale == sale {
		return QueueClaims{RegisteredClaims: fc.registered(), Sale: fc.sale, Pos: fc.pos, Pre: fc.pre}, nil
	}
	var w queueClaimsJSON
	if err := v.parse(v.queue, "queue token", token, &w); err != nil {
		return QueueClaims{}, err
	}
	c := w.QueueClaims
	switch {
	case c.Subject == "":
		return QueueClaims{}, fmt.Errorf("queue token: %w: no sub", ErrInvalid)
	case c.Sale != sale:
		return QueueClaims{}, fmt.Errorf("queue token: %w", ErrWrongSale)
	}
	return c, nil
}

func (v *Verifier) parse(p *jwt.Parser, what, token string, c jwt.Claims) error {
	if err := checkLen(what, token); err != nil {
		return err
	}
	if _, err := p.ParseWithClaims(token, c, v.keyfunc); err != nil {
		return classify(what, err)
	}
	return nil
}

// checkLen rejects empty and oversized tokens before any parsing.
func checkLen(what, token string) error {
	switch {
	case token == "":
		return fmt.Errorf("%s: %w", what, ErrMissing)
	case len(token) > maxTokenLen:
		return fmt.Errorf("%s: %w: %d bytes, limit %d", what, ErrMalformed, len(token), maxTokenLen)
	}
	return nil
}

func normLeeway(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultLeeway
	case d < 0:
		return 0
	}
	return d
}
