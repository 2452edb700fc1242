package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RequestSignatureHeader carries the signature of an edge→origin control
// request (the line's durable copy):
// "kid=<kid>,t=<unix ms>,n=<nonce, hex>,v2=<hex>". The nonce makes every
// request's signature its own, so two equal requests signed in the same
// millisecond are not taken for a replay.
const RequestSignatureHeader = "Flashgate-Signature"

// ErrReplayed is for callers to return when a control request's signature
// was taken before (RequestVerifier says why Verify never does). It wraps
// ErrInvalid, so it is refused like a forged one; Code names it
// replayed_request.
var ErrReplayed = fmt.Errorf("tokens: request signature already used: %w", ErrInvalid)

// DefaultRequestTolerance is how far a signed request's time may be from the
// verifier's clock, either way.
const DefaultRequestTolerance = 5 * time.Minute

// requestDomain separates request MACs from the HS256 tokens made with the
// same secrets: each key's request MACs use HMAC(secret, requestDomain) as
// their own key, so no request signature can ever be a token signature.
// v2 added the audience to what is signed.
const requestDomain = "flashgate edge-origin request v2"

// requestKey derives the request-signing key of one secret.
func requestKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(requestDomain))
	return m.Sum(nil)
}

// requestMAC is HMAC-SHA256 under key of method, path, time, nonce,
// audience and body, each but the body ended by a newline (none of the
// first five can hold one).
func requestMAC(key []byte, method, path string, ms int64, nonce, audience string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(method))
	m.Write([]byte{'\n'})
	m.Write([]byte(path))
	m.Write([]byte{'\n'})
	m.Write(strconv.AppendInt(nil, ms, 10))
	m.Write([]byte{'\n'})
	m.Write([]byte(nonce))
	m.Write([]byte{'\n'})
	m.Write([]byte(audience))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}

// RequestSigner signs the edge's control requests to one origin with the
// key set's active key. It is safe for concurrent use.
type RequestSigner struct {
	kid      string
	key      []byte
	audience string
	now      func() time.Time
}

// NewRequestSigner returns a signer with keys' active key for requests to
// audience: the origin's own name (RequestVerifierOptions.Audience), so
// that a request signed for one origin (say staging) is refused by another
// sharing the keys (production). c is the clock (nil means the machine's).
func NewRequestSigner(keys *KeySet, audience string, c Clock) *RequestSigner {
	return &RequestSigner{kid: keys.active, key: requestKey(keys.secrets[keys.active]), audience: audience, now: nowOf(c)}
}

// Sign returns the RequestSignatureHeader value for a request: method, path
// (without the query) and body exactly as sent.
func (s *RequestSigner) Sign(method, path string, body []byte) string {
	ms := s.now().UnixMilli()
	var n [8]byte
	_, _ = rand.Read(n[:]) // never fails (crypto/rand)
	nonce := hex.EncodeToString(n[:])
	return "kid=" + s.kid + ",t=" + strconv.FormatInt(ms, 10) + ",n=" + nonce + ",v2=" +
		hex.EncodeToString(requestMAC(s.key, method, path, ms, nonce, s.audience, body))
}

// RequestVerifierOptions configure a RequestVerifier.
type RequestVerifierOptions struct {
	// Clock is the clock; nil means the machine's.
	Clock Clock
	// Tolerance is how far the signed time may be from Clock's; 0 means
	// DefaultRequestTolerance.
	Tolerance time.Duration
	// Audience is the name requests must be signed for, the verifier's own
	// (the origins' FLASHGATE_LINE_AUDIENCE, or their public address):
	// required. A request signed for any other is refused, whatever Host
	// it carries.
	Audience string
}

// RequestVerifier checks signed control requests against every key of a set
// (so keys rotate as they do for tokens). It remembers nothing: refusing a
// signature sent again is up to the caller, which records the Key of each
// one it takes (RequestSignature) where every process verifying for the
// same audience sees it, restarts included. It is safe for concurrent use.
type RequestVerifier struct {
	keys      map[string][]byte // kid -> request key
	now       func() time.Time
	tolerance time.Duration
	audience  string
}

// NewRequestVerifier returns a verifier over keys; opts.Audience is
// required.
func NewRequestVerifier(keys *KeySet, opts RequestVerifierOptions) (*RequestVerifier, error) {
	if opts.Audience == "" {
		return nil, errors.New("tokens: a request verifier needs the audience requests are signed for")
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultRequestTolerance
	}
	v := &RequestVerifier{keys: make(map[string][]byte, len(keys.secrets)), now: nowOf(opts.Clock), tolerance: opts.Tolerance,
		audience: opts.Audience}
	for kid, secret := range keys.secrets {
		v.keys[kid] = requestKey(secret)
	}
	return v, nil
}

// RequestSignature is a signature Verify found genuine and in time.
type RequestSignature struct {
	// Key names this signature among all others: its kid and MAC. A request
	// sent again carries the same Key; the same request signed again does
	// not (its nonce differs).
	Key string
	// Signed is when it was signed, by the signer's clock.
	Signed time.Time
	// Until is the last instant the verifier takes it (Signed plus the
	// tolerance): a record of its Key refuses it sent again if kept that
	// long, by the verifier's clock.
	Until time.Time
}

// Verify checks header (the RequestSignatureHeader value) against the
// request and the verifier's audience, and returns the signature. Errors
// wrap ErrMissing (no header), ErrMalformed (not in the header's form),
// ErrInvalid (unknown kid, wrong MAC, another audience) or ErrExpired
// (signed too long ago, or too far ahead). Verify does not refuse a
// signature seen before: see RequestVerifier.
func (v *RequestVerifier) Verify(header, method, path string, body []byte) (RequestSignature, error) {
	if header == "" {
		return RequestSignature{}, fmt.Errorf("request signature: %w", ErrMissing)
	}
	var kid, ts, nonce, mac string
	for _, part := range strings.Split(header, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return RequestSignature{}, fmt.Errorf("request signature: %w: part %q", ErrMalformed, name)
		}
		switch name {
		case "kid":
			kid = value
		case "t":
			ts = value
		case "n":
			nonce = value
		case "v2":
			mac = value
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	sum, herr := hex.DecodeString(mac)
	if kid == "" || !validNonce(nonce) || err != nil || herr != nil || len(sum) != sha256.Size {
		return RequestSignature{}, fmt.Errorf("request signature: %w: want kid=,t=,n=,v2=", ErrMalformed)
	}
	key, ok := v.keys[kid]
	if !ok {
		return RequestSignature{}, fmt.Errorf("request signature: %w: unknown kid", ErrInvalid)
	}
	if !hmac.Equal(sum, requestMAC(key, method, path, ms, nonce, v.audience, body)) {
		return RequestSignature{}, fmt.Errorf("request signature: %w: wrong signature, or signed for another audience", ErrInvalid)
	}
	at := time.UnixMilli(ms)
	if d := v.now().Sub(at); d > v.tolerance || d < -v.tolerance {
		return RequestSignature{}, fmt.Errorf("request signature: %w: signed %v from now", ErrExpired, d.Round(time.Second))
	}
	// The MAC in its canonical form: hex.DecodeString took upper case too.
	return RequestSignature{Key: kid + ":" + hex.EncodeToString(sum), Signed: at, Until: at.Add(v.tolerance)}, nil
}

// validNonce: 1 to 64 lower-case hex digits.
func validNonce(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !('0' <= n[i] && n[i] <= '9' || 'a' <= n[i] && n[i] <= 'f') {
			return false
		}
	}
	return true
}
