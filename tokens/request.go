package tokens

import (
	"container/heap"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RequestSignatureHeader carries the signature of an edge→origin control
// request (the line's durable copy):
// "kid=<kid>,t=<unix ms>,n=<nonce, hex>,v2=<hex>". The nonce makes every
// request's signature its own, so two equal requests signed in the same
// millisecond are not taken for a replay.
const RequestSignatureHeader = "Flashgate-Signature"

// ErrReplayed: a control request's signature was seen before (it also
// wraps ErrInvalid, so it is refused like a forged one).
var ErrReplayed = errors.New("tokens: request signature already used")

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
// audience: the origin's name for them (its configured audience, or the
// Host its requests carry), so that a request signed for one origin (say
// staging) is refused by another sharing the keys (production). now is the
// clock (nil means time.Now).
func NewRequestSigner(keys *KeySet, audience string, now func() time.Time) *RequestSigner {
	if now == nil {
		now = time.Now
	}
	return &RequestSigner{kid: keys.active, key: requestKey(keys.secrets[keys.active]), audience: audience, now: now}
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

// DefaultReplayCapacity is how many signatures a RequestVerifier remembers
// by default.
const DefaultReplayCapacity = 1 << 16

// RequestVerifierOptions configure a RequestVerifier.
type RequestVerifierOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tolerance is how far the signed time may be from Now; 0 means
	// DefaultRequestTolerance.
	Tolerance time.Duration
	// Audience is the name requests must be signed for; "" means the Host
	// each request carries (then an origin reached under another
	// environment's host name would take that environment's requests: set
	// it wherever environments share keys).
	Audience string
	// ReplayCapacity is how many signatures are remembered to refuse a
	// request sent again (each for as long as its time is within the
	// tolerance); 0 means DefaultReplayCapacity. When full, the one signed
	// earliest is forgotten and every request signed at or before it is
	// refused from then on, so a replay is never let through; at a few
	// requests a second per sale and node the default holds well over the
	// tolerance's worth.
	ReplayCapacity int
}

// RequestVerifier checks signed control requests against every key of a set
// (so keys rotate as they do for tokens), and refuses a signature it has
// seen before. It remembers in memory, per process: a request replayed to
// another process sharing the keys and audience is taken there once. It is
// safe for concurrent use.
type RequestVerifier struct {
	keys      map[string][]byte // kid -> request key
	now       func() time.Time
	tolerance time.Duration
	audience  string

	mu    sync.Mutex // guards seen and floor
	seen  replays
	floor int64 // unix ms: signatures at or before it may have been forgotten
}

// NewRequestVerifier returns a verifier over keys.
func NewRequestVerifier(keys *KeySet, opts RequestVerifierOptions) *RequestVerifier {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultRequestTolerance
	}
	if opts.ReplayCapacity <= 0 {
		opts.ReplayCapacity = DefaultReplayCapacity
	}
	v := &RequestVerifier{keys: make(map[string][]byte, len(keys.secrets)), now: opts.Now, tolerance: opts.Tolerance,
		audience: opts.Audience, seen: replays{byMAC: make(map[[sha256.Size]byte]struct{}), capacity: opts.ReplayCapacity}}
	for kid, secret := range keys.secrets {
		v.keys[kid] = requestKey(secret)
	}
	return v
}

// Verify checks header (the RequestSignatureHeader value) against the
// request — host is the Host it carries, the audience unless the verifier
// has one configured — and returns the time it was signed. Errors wrap
// ErrMissing (no header), ErrMalformed (not in the header's form),
// ErrInvalid (unknown kid, wrong MAC, another audience; with ErrReplayed:
// seen before) or ErrExpired (signed too long ago, or too far ahead).
func (v *RequestVerifier) Verify(header, host, method, path string, body []byte) (time.Time, error) {
	if header == "" {
		return time.Time{}, fmt.Errorf("request signature: %w", ErrMissing)
	}
	var kid, ts, nonce, mac string
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
		case "n":
			nonce = value
		case "v2":
			mac = value
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	sum, herr := hex.DecodeString(mac)
	if kid == "" || !validNonce(nonce) || err != nil || herr != nil || len(sum) != sha256.Size {
		return time.Time{}, fmt.Errorf("request signature: %w: want kid=,t=,n=,v2=", ErrMalformed)
	}
	key, ok := v.keys[kid]
	if !ok {
		return time.Time{}, fmt.Errorf("request signature: %w: unknown kid", ErrInvalid)
	}
	audience := v.audience
	if audience == "" {
		audience = host
	}
	if !hmac.Equal(sum, requestMAC(key, method, path, ms, nonce, audience, body)) {
		return time.Time{}, fmt.Errorf("request signature: %w: wrong signature, or signed for another audience", ErrInvalid)
	}
	now := v.now()
	at := time.UnixMilli(ms)
	if d := now.Sub(at); d > v.tolerance || d < -v.tolerance {
		return time.Time{}, fmt.Errorf("request signature: %w: signed %v from now", ErrExpired, d.Round(time.Second))
	}
	if !v.first([sha256.Size]byte(sum), ms, now.Add(-v.tolerance).UnixMilli()) {
		return time.Time{}, fmt.Errorf("request signature: %w: %w", ErrInvalid, ErrReplayed)
	}
	return at, nil
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

// first records a genuine signature (its MAC, signed at ms) and reports
// whether it is new. Signatures signed before oldest are past the
// tolerance and forgotten first.
func (v *RequestVerifier) first(mac [sha256.Size]byte, ms, oldest int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for v.seen.Len() > 0 && v.seen.items[0].ms < oldest {
		v.seen.pop()
	}
	if ms <= v.floor {
		return false // it may be one of those forgotten early
	}
	if _, dup := v.seen.byMAC[mac]; dup {
		return false
	}
	for v.seen.Len() >= v.seen.capacity {
		v.floor = max(v.floor, v.seen.pop().ms)
		if ms <= v.floor {
			return false
		}
	}
	heap.Push(&v.seen, replay{mac: mac, ms: ms})
	return true
}

// replay is a remembered signature.
type replay struct {
	mac [sha256.Size]byte
	ms  int64
}

// replays is a min-heap of remembered signatures by signing time, indexed
// by MAC.
type replays struct {
	items    []replay
	byMAC    map[[sha256.Size]byte]struct{}
	capacity int
}

func (r *replays) Len() int           { return len(r.items) }
func (r *replays) Less(i, j int) bool { return r.items[i].ms < r.items[j].ms }
func (r *replays) Swap(i, j int)      { r.items[i], r.items[j] = r.items[j], r.items[i] }
func (r *replays) Push(x any) {
	it := x.(replay)
	r.byMAC[it.mac] = struct{}{}
	r.items = append(r.items, it)
}
func (r *replays) Pop() any {
	it := r.items[len(r.items)-1]
	r.items = r.items[:len(r.items)-1]
	delete(r.byMAC, it.mac)
	return it
}

// pop removes and returns the signature signed earliest.
func (r *replays) pop() replay { return heap.Pop(r).(replay) }
