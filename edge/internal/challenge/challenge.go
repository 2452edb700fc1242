package challenge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/flashgate/flashgate/tokens"
)

// Sentinel errors: every error Verify returns wraps exactly one of them. All
// of them call for the same answer (403 challenge_required with a fresh
// challenge); they differ for logs and metrics.
var (
	// ErrMalformed means the challenge or the solution is not in the form the
	// package doc gives, or is longer than it allows.
	ErrMalformed = errors.New("challenge: malformed")
	// ErrExpired means a genuine challenge outside its window: issued more
	// than Validity ago, or more than ClockSkew ahead of the verifier's clock.
	ErrExpired = errors.New("challenge: outside its window")
	// ErrWrongAccountOrSale means the challenge was not issued by a key of the
	// set to this account for this sale: another account's or sale's, an
	// unknown kid, or a changed field.
	ErrWrongAccountOrSale = errors.New("challenge: not issued to this account for this sale")
	// ErrTooEasy means a genuine challenge easier than the difficulty
	// required now (ops raised it since it was issued).
	ErrTooEasy = errors.New("challenge: easier than required")
	// ErrUnsolved means the solution's hash has too few leading zero bits.
	ErrUnsolved = errors.New("challenge: not solved")
)

// Defaults and bounds.
const (
	// DefaultDifficultyBits is a suggested difficulty: about a second on a
	// mid-range phone, by the estimate in the package doc.
	DefaultDifficultyBits = 17
	// MaxDifficultyBits is the hardest difficulty Issue hands out and Verify
	// parses: 2^32 hashes, hours on a phone.
	MaxDifficultyBits = 32
	// DefaultValidity is how long a challenge is taken after it was issued:
	// time to solve it on a slow phone and send the join, but too short to
	// farm solutions ahead of a sale.
	DefaultValidity = 2 * time.Minute
	// DefaultClockSkew is how far a challenge's window may start ahead of the
	// verifying node's clock: another edge node issued it.
	DefaultClockSkew = 5 * time.Second
	// MaxAccountLen is the longest account id a challenge binds, in bytes.
	MaxAccountLen = 256
	// MaxSolutionLen is the longest solution, in decimal digits (a uint64
	// counter).
	MaxSolutionLen = 20
	// MaxChallengeLen is the longest challenge string, in bytes.
	MaxChallengeLen = len(version) + maxKIDLen + 1 + maxSaleLen + 1 + maxWindowDigits + 1 + maxBitsDigits + 1 +
		nonceB64Len + 1 + macB64Len
)

// Field bounds of the v1 form.
const (
	version         = "v1."
	maxKIDLen       = 32 // as tokens.KeySet allows
	maxSaleLen      = 64 // as the API's sale ids allow
	maxWindowDigits = 11 // Unix seconds up to the year 5138
	maxBitsDigits   = 2
	nonceLen        = 16
	nonceB64Len     = 22 // base64url, no padding, of nonceLen bytes
	macB64Len       = 43 // base64url, no padding, of a SHA-256 MAC
)

// keyLabel derives each secret's challenge key (package doc).
const keyLabel = "flashgate challenge v1"

// Options configure a Challenger. The zero value is the defaults.
type Options struct {
	// Validity is how long after its window starts a challenge is taken; 0
	// means DefaultValidity. Keep it short: it bounds how far ahead a bot can
	// farm solutions.
	Validity time.Duration
	// ClockSkew is how far ahead of the verifier's clock a challenge's window
	// may start (edge nodes' clocks differ); 0 means DefaultClockSkew.
	ClockSkew time.Duration
	// Rand is where nonces come from; nil means crypto/rand. It must be safe
	// for concurrent use.
	Rand io.Reader
}

// Challenge is what Issue hands out.
type Challenge struct {
	// Value is the string the client solves and sends back (package doc).
	Value string
	// DifficultyBits is how many leading zero bits a solution's hash needs.
	DifficultyBits int
	// Expires is the last instant Verify takes a solution of it, by the
	// verifier's clock.
	Expires time.Time
}

// Challenger issues and verifies challenges with the keys of one
// tokens.KeySet: the active key signs, every key verifies, so the set rotates
// as it does for tokens. It is safe for concurrent use.
type Challenger struct {
	active   *key
	keys     map[string]*key // kid -> key, every key of the set
	validity time.Duration
	skew     time.Duration
	rand     io.Reader
}

// key is one kid's challenge keys, as pooled HMACs.
type key struct {
	kid        string
	macs       sync.Pool // of *macScratch keyed with the kid's personal challenge key
	publicMACs sync.Pool // of *macScratch keyed with its public challenge key
}

// macScratch is one MAC computation's state, pooled so Verify allocates
// nothing.
type macScratch struct {
	mac hash.Hash // HMAC-SHA256 under the key; Reset before use
	msg []byte    // the MAC's input
	sum []byte    // the MAC
}

// New returns a Challenger over keys.
func New(keys *tokens.KeySet, opts Options) (*Challenger, error) {
	if keys == nil {
		return nil, errors.New("challenge: no key set")
	}
	if opts.Validity < 0 || opts.ClockSkew < 0 {
		return nil, errors.New("challenge: negative validity or clock skew")
	}
	if opts.Validity == 0 {
		opts.Validity = DefaultValidity
	}
	if opts.ClockSkew == 0 {
		opts.ClockSkew = DefaultClockSkew
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	derived, err := challengeKeys(keys)
	if err != nil {
		return nil, err
	}
	public := keys.DerivedKeys(publicKeyLabel)
	c := &Challenger{keys: make(map[string]*key, len(derived)), validity: opts.Validity, skew: opts.ClockSkew,
		rand: opts.Rand}
	for kid, k := range derived {
		c.keys[kid] = newKey(kid, k, public[kid])
	}
	c.active = c.keys[keys.ActiveKID()]
	return c, nil
}

// challengeKeys derives the challenge key of every secret in keys, under
// keyLabel, so that no challenge MAC is ever a token's or a request's.
func challengeKeys(keys *tokens.KeySet) (map[string][]byte, error) {
	out := keys.DerivedKeys(keyLabel)
	if _, ok := out[keys.ActiveKID()]; !ok {
		return nil, errors.New("challenge: key set lacks its active kid")
	}
	return out, nil
}

func newKey(kid string, challengeKey, publicKey []byte) *key {
	k := &key{kid: kid}
	k.macs.New = func() any {
		return &macScratch{mac: hmac.New(sha256.New, challengeKey), msg: make([]byte, 0, 2+MaxAccountLen+MaxChallengeLen)}
	}
	k.publicMACs.New = newPublicMAC(publicKey)
	return k
}

// mac returns the base64url MAC of signed (a challenge up to the dot before
// its mac) for account.
func (k *key) mac(account, signed string) [macB64Len]byte {
	sc := k.macs.Get().(*macScratch)
	sc.msg = binary.BigEndian.AppendUint16(sc.msg[:0], uint16(len(account)))
	sc.msg = append(sc.msg, account...)
	sc.msg = append(sc.msg, signed...)
	sc.mac.Reset()
	_, _ = sc.mac.Write(sc.msg)
	sc.sum = sc.mac.Sum(sc.sum[:0])
	var out [macB64Len]byte
	base64.RawURLEncoding.Encode(out[:], sc.sum)
	k.macs.Put(sc)
	return out
}

// Issue returns a challenge of difficultyBits (0 to MaxDifficultyBits) for
// account in sale, whose window starts at now (to the second, rounded
// down). account must be 1 to MaxAccountLen bytes and sale a valid sale id;
// the only other errors are a clock before 1970 and a failing Options.Rand.
func (c *Challenger) Issue(account, sale string, difficultyBits int, now time.Time) (Challenge, error) {
	switch {
	case account == "" || len(account) > MaxAccountLen:
		return Challenge{}, fmt.Errorf("challenge: account id of %d bytes, want 1 to %d", len(account), MaxAccountLen)
	case !validSale(sale):
		return Challenge{}, errors.New("challenge: sale id not [A-Za-z0-9_-]{1,64}")
	case difficultyBits < 0 || difficultyBits > MaxDifficultyBits:
		return Challenge{}, fmt.Errorf("challenge: difficulty %d bits, want 0 to %d", difficultyBits, MaxDifficultyBits)
	}
	window := now.Unix()
	windowText := strconv.FormatInt(window, 10)
	if window <= 0 || len(windowText) > maxWindowDigits {
		return Challenge{}, fmt.Errorf("challenge: clock reads %v", now)
	}
	var nonce [nonceLen]byte
	if _, err := io.ReadFull(c.rand, nonce[:]); err != nil {
		return Challenge{}, fmt.Errorf("challenge: nonce: %w", err)
	}
	signed := version + c.active.kid + "." + sale + "." + windowText + "." + strconv.Itoa(difficultyBits) + "." +
		base64.RawURLEncoding.EncodeToString(nonce[:])
	mac := c.active.mac(account, signed)
	return Challenge{
		Value:          signed + "." + string(mac[:]),
		DifficultyBits: difficultyBits,
		Expires:        time.Unix(window, 0).Add(c.validity),
	}, nil
}

// Verify checks that solution solves challenge for account, at a difficulty
// of at least minDifficultyBits (what ops require now), at now: a personal
// challenge Issue gave account for sale, or sale's published one (Publish),
// each made with a key of the set. Errors wrap one sentinel. The checks run
// in this order: form, kid and MAC (so only a genuine challenge gets the
// errors after them), window, difficulty, work.
func (c *Challenger) Verify(account, sale, challenge, solution string, minDifficultyBits int, now time.Time) error {
	public := IsPublic(challenge)
	var f fields
	var ok bool
	if public {
		f, ok = parsePublic(challenge)
	} else {
		f, ok = parse(challenge)
	}
	if !ok {
		return fmt.Errorf("%w: challenge", ErrMalformed)
	}
	if !validSolution(solution) {
		return fmt.Errorf("%w: solution", ErrMalformed)
	}
	k, ok := c.keys[f.kid]
	if !ok {
		return fmt.Errorf("%w: unknown kid", ErrWrongAccountOrSale)
	}
	if f.sale != sale || account == "" || len(account) > MaxAccountLen {
		return fmt.Errorf("%w: another sale or no account", ErrWrongAccountOrSale)
	}
	var want [macB64Len]byte
	if public {
		want = k.publicMAC(f.signed)
	} else {
		want = k.mac(account, f.signed)
	}
	var got [macB64Len]byte
	copy(got[:], f.mac) // a copy on the stack: []byte(f.mac) would allocate
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return fmt.Errorf("%w: mac", ErrWrongAccountOrSale)
	}
	if err := c.inWindow(f.window, now); err != nil {
		return err
	}
	if f.bits < minDifficultyBits {
		return fmt.Errorf("%w: %d bits, %d required", ErrTooEasy, f.bits, minDifficultyBits)
	}
	// A personal challenge's MAC binds the account; a published one's work
	// does.
	zeros := 0
	if public {
		zeros = accountWork(challenge, account, solution)
	} else {
		zeros = work(challenge, solution)
	}
	if zeros < f.bits {
		return fmt.Errorf("%w: %d bits", ErrUnsolved, f.bits)
	}
	return nil
}
