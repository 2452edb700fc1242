package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RequestSignatureHeader carries the signature of an edge→origin control
// request (the line's durable copy): "kid=<kid>,t=<unix ms>,v1=<hex>".
const RequestSignatureHeader = "Flashgate-Signature"

// DefaultRequestTolerance is how far a signed request's time may be from the
// verifier's clock, either way.
const DefaultRequestTolerance = 5 * time.Minute

// requestDomain separates request MACs from the HS256 tokens made with the
// same secrets: each key's request MACs use HMAC(secret, requestDomain) as
// their own key, so no request signature can ever be a token signature.
const requestDomain = "flashgate edge-origin request v1"

// requestKey derives the request-signing key of one secret.
func requestKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(requestDomain))
	return m.Sum(nil)
}

// requestMAC is HMAC-SHA256 under key of method, path, time and body, each
// but the body ended by a newline (none of the first three can hold one).
func requestMAC(key []byte, method, path string, ms int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(method))
	m.Write([]byte{'\n'})
	m.Write([]byte(path))
	m.Write([]byte{'\n'})
	m.Write(strconv.AppendInt(nil, ms, 10))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}

// RequestSigner signs the edge's control requests to the origin with the
// key set's active key. It is safe for concurrent use.
type RequestSigner struct {
	kid string
	key []byte
	now func() time.Time
}

// NewRequestSigner returns a signer with keys' active key; now is the clock
// (nil means time.Now).
func NewRequestSigner(keys *KeySet, now func() time.Time) *RequestSigner {
	if now == nil {
		now = time.Now
	}
	return &RequestSigner{kid: keys.active, key: requestKey(keys.secrets[keys.active]), now: now}
}

// Sign returns the RequestSignatureHeader value for a request: method, path
// (without the query) and body exactly as sent.
func (s *RequestSigner) Sign(method, path string, body []byte) string {
	ms := s.now().UnixMilli()
	return "kid=" + s.kid + ",t=" + strconv.FormatInt(ms, 10) + ",v1=" + hex.EncodeToString(requestMAC(s.key, method, path, ms, body))
}

// RequestVerifierOptions configure a RequestVerifier.
type RequestVerifierOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tolerance is how far the signed time may be from Now; 0 means
	// DefaultRequestTolerance.
	Tolerance time.Duration
}

// RequestVerifier checks signed control requests against every key of a set
// (so keys rotate as they do for tokens). It is safe for concurrent use.
type RequestVerifier struct {
	keys      map[string][]byte // kid -> request key
	now       func() time.Time
	tolerance time.Duration
}

// NewRequestVerifier returns a verifier over keys.
func NewRequestVerifier(keys *KeySet, opts RequestVerifierOptions) *RequestVerifier {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultRequestTolerance
	}
	v := &RequestVerifier{keys: make(map[string][]byte, len(keys.secrets)), now: opts.Now, tolerance: opts.Tolerance}
	for kid, secret := range keys.secrets {
		v.keys[kid] = requestKey(secret)
	}
	return v
}

// Verify checks header (the RequestSignatureHeader value) against the
// request and returns the time it was signed. Errors wrap ErrMissing (no
// header), ErrMalformed (not in the header's form), ErrInvalid (unknown kid,
// wrong MAC) or ErrExpired (signed too long ago, or too far ahead).
func (v *RequestVerifier) Verify(header, method, path string, body []byte) (time.Time, error) {
	if header == "" {
		return time.Time{}, fmt.Errorf("request signature: %w", ErrMissing)
	}
	var kid, ts, mac string
	for _, part := range strings.Split(header, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return time.Time{}, fmt.Errorf("request signature: %w: part %q", ErrMalformed, name)
		}
		switch name {
		case "kid":
			kid = value
		case "t":
			ts = value
		case "v1":
			mac = value
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	sum, herr := hex.DecodeString(mac)
	if kid == "" || err != nil || herr != nil || len(sum) != sha256.Size {
		return time.Time{}, fmt.Errorf("request signature: %w: want kid=,t=,v1=", ErrMalformed)
	}
	key, ok := v.keys[kid]
	if !ok {
		return time.Time{}, fmt.Errorf("request signature: %w: unknown kid", ErrInvalid)
	}
	if !hmac.Equal(sum, requestMAC(key, method, path, ms, body)) {
		return time.Time{}, fmt.Errorf("request signature: %w: wrong signature", ErrInvalid)
	}
	at := time.UnixMilli(ms)
	if d := v.now().Sub(at); d > v.tolerance || d < -v.tolerance {
		return time.Time{}, fmt.Errorf("request signature: %w: signed %v from now", ErrExpired, d.Round(time.Second))
	}
	return at, nil
}
