package tokens

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxUserHeaders bounds the header segments a userFast remembers. A shop's
// identity service writes one or a few; others take the slow path.
const maxUserHeaders = 8

// userFast is the fast path (see fastpath.go) for the shop's HS256 user
// tokens. The shop writes the header, so it cannot be matched against one we
// write; but everything the slow path decides from the header (it decodes,
// it is a JSON object, its alg is HS256; kid and typ are ignored) depends on
// the header segment alone. So a header segment is trusted once a token
// carrying it has passed the slow path, that is once it has come signed with
// the shop's key, and golang-jwt's own HS256 header is trusted from the start.
type userFast struct {
	macs     *macPool
	issuer   string // "" means iss is not checked
	audience string // "" means aud is not checked
	now      func() time.Time
	leeway   time.Duration
	slowOnly bool // tests: disable the fast path

	headers atomic.Pointer[[]string] // trusted header segments; replaced whole
	mu      sync.Mutex               // serialises replacing headers
}

func newUserFast(secret []byte, issuer, audience string, now func() time.Time, leeway time.Duration) *userFast {
	f := &userFast{macs: newMacPool(secret), issuer: issuer, audience: audience, now: now, leeway: leeway}
	if s, err := jwt.New(jwt.SigningMethodHS256).SigningString(); err == nil {
		header, _, _ := strings.Cut(s, ".")
		f.headers.Store(&[]string{header})
	}
	return f
}

// trusted reports whether header is a trusted header segment.
func (f *userFast) trusted(header string) bool {
	if h := f.headers.Load(); h != nil {
		return slices.Contains(*h, header)
	}
	return false
}

// learn trusts the header segment of token, which the slow path has just accepted.
func (f *userFast) learn(token string) {
	header, _, _, ok := splitCompact(token)
	if !ok || !urlSafe(token) || f.trusted(header) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var next []string
	if h := f.headers.Load(); h != nil {
		if len(*h) >= maxUserHeaders || slices.Contains(*h, header) {
			return
		}
		next = slices.Clone(*h)
	}
	next = append(next, header)
	f.headers.Store(&next)
}

// account verifies a user token as UserVerifier's parser would (HS256
// signature, exp required, nbf, iat, iss and aud when configured, sub
// present, neither our tokens' iss nor their aud) and returns its sub. It reports false on any failure or doubt.
func (f *userFast) account(token string) (string, bool) {
	if f.slowOnly || len(token) == 0 || len(token) > maxTokenLen || !urlSafe(token) {
		return "", false
	}
	header, payload, _, ok := splitCompact(token)
	if !ok || !f.trusted(header) {
		return "", false
	}
	p, ok := f.macs.verify(token, len(header), len(payload))
	if !ok {
		return "", false
	}
	var c flatClaims
	if !claimScan(p, registeredFields, &c) || !checkTimes(&c, f.now(), f.leeway) {
		return "", false
	}
	if f.issuer != "" && c.iss != f.issuer { // an empty iss never equals a configured one
		return "", false
	}
	if f.audience != "" && !hasAudience(&c, f.audience) {
		return "", false
	}
	if c.iss == IssuerName || slices.ContainsFunc(c.aud, ourAudience) { // our own tokens' claims: the slow path refuses them
		return "", false
	}
	if c.sub == "" {
		return "", false
	}
	return c.sub, true
}

// urlSafe reports whether s holds only the base64url alphabet and dots: the
// decoders golang-jwt uses skip CR and LF, and the fast paths do not follow them there.
func urlSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
