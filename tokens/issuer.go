package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultAdmissionTTL is how long an admission token lives when
// IssuerOptions.AdmissionTTL is zero.
const DefaultAdmissionTTL = 5 * time.Minute

// IssuerOptions configure an Issuer.
type IssuerOptions struct {
	// Clock is the clock; nil means the machine's.
	Clock Clock
	// AdmissionTTL is the lifetime of admission tokens; 0 means DefaultAdmissionTTL.
	AdmissionTTL time.Duration
}

// Issuer signs the queue and admission tokens the edge hands out (and, in dev
// mode, the origin's admin endpoint), HS256 with the key set's active key, its
// kid in the header. It is safe for concurrent use.
type Issuer struct {
	now    func() time.Time
	ttl    time.Duration
	kid    string
	secret []byte

	// The fast signer (claimwrite.go): the header segment golang-jwt writes
	// for kid and a dot ("" when it could not be built: golang-jwt signs
	// everything), and pooled HMACs keyed with secret.
	prefix   string
	macs     *macPool
	slowOnly bool // tests: sign through golang-jwt only
}

// NewIssuer returns an Issuer signing with keys' active key; keys must not be nil.
func NewIssuer(keys *KeySet, opts IssuerOptions) *Issuer {
	if opts.AdmissionTTL <= 0 {
		opts.AdmissionTTL = DefaultAdmissionTTL
	}
	i := &Issuer{now: nowOf(opts.Clock), ttl: opts.AdmissionTTL, kid: keys.active, secret: keys.secrets[keys.active]}
	if header, err := headerSegment(i.kid); err == nil {
		i.prefix, i.macs = header+".", newMacPool(i.secret)
	}
	return i
}

// DerivedKey is KeySet.DerivedKeys(label) of the active key, the one the
// Issuer signs with: a key for MACs of another kind (a distinct label
// each) that every node signing with the same key derives alike.
func (i *Issuer) DerivedKey(label string) []byte { return deriveKey(i.secret, label) }

// Admission issues an admission token for account's reserve in sale, earned
// at queue position pos. It lives AdmissionTTL and carries a fresh 128-bit
// jti. The claims returned are exactly those signed (times in whole seconds).
func (i *Issuer) Admission(sale, account string, pos int64) (string, AdmissionClaims, error) {
	if err := checkSubject(sale, account, pos); err != nil {
		return "", AdmissionClaims{}, fmt.Errorf("issue admission token: %w", err)
	}
	jti, err := newJTI()
	if err != nil {
		return "", AdmissionClaims{}, fmt.Errorf("issue admission token: %w", err)
	}
	now := i.now()
	c := AdmissionClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    IssuerName,
			Subject:   account,
			Audience:  jwt.ClaimStrings{AudienceOrigin},
			ExpiresAt: jwt.NewNumericDate(now.Add(i.ttl)),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        jti,
		},
		Sale: sale,
		Pos:  pos,
	}
	tok, err := i.sign(&c, &c.RegisteredClaims, c.Sale, c.Pos, false, false)
	if err != nil {
		return "", AdmissionClaims{}, fmt.Errorf("issue admission token: %w", err)
	}
	return tok, c, nil
}

// Queue issues a queue token for account's place pos in sale's queue; pre
// records a join before the start. It is valid until expires, normally the
// sale's end, which must be in the future.
func (i *Issuer) Queue(sale, account string, pos int64, pre bool, expires time.Time) (string, QueueClaims, error) {
	if err := checkSubject(sale, account, pos); err != nil {
		return "", QueueClaims{}, fmt.Errorf("issue queue token: %w", err)
	}
	now := i.now()
	exp := jwt.NewNumericDate(expires)
	if !exp.After(now) {
		return "", QueueClaims{}, fmt.Errorf("issue queue token: expiry %s is not after now %s",
			expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	c := QueueClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    IssuerName,
			Subject:   account,
			Audience:  jwt.ClaimStrings{AudienceEdge},
			ExpiresAt: exp,
			IssuedAt:  jwt.NewNumericDate(now),
		},
		Sale: sale,
		Pos:  pos,
		Pre:  pre,
	}
	tok, err := i.sign(&c, &c.RegisteredClaims, c.Sale, c.Pos, true, c.Pre)
	if err != nil {
		return "", QueueClaims{}, fmt.Errorf("issue queue token: %w", err)
	}
	return tok, c, nil
}

// sign signs claims c, whose fields are also given one by one for the fast
// signer (see appendClaims); it falls back to golang-jwt where that declines.
func (i *Issuer) sign(c jwt.Claims, r *jwt.RegisteredClaims, sale string, pos int64, withPre, pre bool) (string, error) {
	if i.macs != nil && !i.slowOnly {
		sc := i.macs.get()
		payload, ok := appendClaims(sc.body[:0], r, sale, pos, withPre, pre)
		sc.body = payload
		if ok {
			b := append(sc.buf[:0], i.prefix...)
			b = base64.RawURLEncoding.AppendEncode(b, payload)
			b = i.macs.signWith(sc, b)
			sc.buf = b
			tok := string(b)
			i.macs.put(sc)
			return tok, nil
		}
		i.macs.put(sc)
	}
	return newToken(c, i.kid).SignedString(i.secret)
}

func checkSubject(sale, account string, pos int64) error {
	switch {
	case sale == "":
		return errors.New("empty sale id")
	case account == "":
		return errors.New("empty account id")
	case pos < 0:
		return fmt.Errorf("negative queue position %d", pos)
	}
	return nil
}

// newJTI returns 128 random bits, base64url without padding (22 characters).
func newJTI() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return "", fmt.Errorf("generate jti: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
