package tokens

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The fast paths decode claims with claimScan instead of encoding/json. It
// reads one JSON object and accepts only a subset of what the slow paths
// accept: whatever it accepts, encoding/json (what golang-jwt decodes claims
// with, through the checks of decodeClaims) accepts too and decodes to the
// same values. On anything outside the subset it reports false, and the
// caller takes the slow path, which produces every error. The subset:
//
//   - known claims (their names exactly, once each): strings of printable ASCII
//     without escapes; aud a string or a non-empty array of such strings;
//     exp, nbf, iat and pos non-negative integers of at most 15 digits; pre
//     true or false. null, escapes, fractions, signs, duplicates: false;
//   - any other key made of printable ASCII without escapes, with any valid
//     JSON value, skipped as encoding/json skips it; but a key that equals a
//     known claim's name but for case is false (encoding/json matches names
//     case-insensitively);
//   - JSON whitespace anywhere between tokens; nothing but whitespace after
//     the object; nesting at most maxScanDepth deep.

// maxScanDepth bounds the nesting of skipped values; deeper input takes the slow path.
const maxScanDepth = 32

// claimSet is a bit set of claim names.
type claimSet uint16

const (
	claimIss claimSet = 1 << iota
	claimSub
	claimAud
	claimExp
	claimNbf
	claimIat
	claimJti
	claimSale
	claimPos
	claimPre
)

// The fields of each claims type the fast paths decode into, as encoding/json
// sees them (RegisteredClaims' fields are promoted in the embedding types).
const (
	registeredFields = claimIss | claimSub | claimAud | claimExp | claimNbf | claimIat | claimJti
	queueFields      = registeredFields | claimSale | claimPos | claimPre
	admissionFields  = registeredFields | claimSale | claimPos
)

var claimNames = [...]struct {
	name string
	bit  claimSet
}{
	{"iss", claimIss}, {"sub", claimSub}, {"aud", claimAud}, {"exp", claimExp}, {"nbf", claimNbf},
	{"iat", claimIat}, {"jti", claimJti}, {"sale", claimSale}, {"pos", claimPos}, {"pre", claimPre},
}

// flatClaims are the claims claimScan found; seen says which were present.
type flatClaims struct {
	seen          claimSet
	iss, sub, jti string
	sale          string
	aud           []string
	exp, nbf, iat int64 // Unix seconds
	pos           int64
	pre           bool
}

// registered returns c's registered claims as encoding/json would have
// decoded them into jwt.RegisteredClaims.
func (c *flatClaims) registered() jwt.RegisteredClaims {
	r := jwt.RegisteredClaims{Issuer: c.iss, Subject: c.sub, ID: c.jti, Audience: jwt.ClaimStrings(c.aud)}
	if c.seen&claimExp != 0 {
		r.ExpiresAt = numericDate(c.exp)
	}
	if c.seen&claimNbf != 0 {
		r.NotBefore = numericDate(c.nbf)
	}
	if c.seen&claimIat != 0 {
		r.IssuedAt = numericDate(c.iat)
	}
	return r
}

// numericDate is the value jwt.NumericDate's UnmarshalJSON makes of an integer.
func numericDate(sec int64) *jwt.NumericDate { return jwt.NewNumericDate(time.Unix(sec, 0)) }

// numericTime is numericDate(sec).Time, without allocating.
func numericTime(sec int64) time.Time { return time.Unix(sec, 0).Truncate(jwt.TimePrecision) }

// claimScan reads the claims object p into c. fields are the claims the target
// type has; keys of other claims are skipped like unknown ones.
func claimScan(p string, fields claimSet, c *flatClaims) bool {
	r := scanner{s: p}
	r.ws()
	if !r.byte('{') {
		return false
	}
	r.ws()
	if r.byte('}') {
		return r.end()
	}
	for {
		key, ok := r.plainString()
		if !ok {
			return false
		}
		r.ws()
		if !r.byte(':') {
			return false
		}
		r.ws()
		bit, ok := lookupClaim(key, fields)
		if !ok {
			return false
		}
		if bit == 0 {
			if !r.skip(0) {
				return false
			}
		} else {
			if c.seen&bit != 0 {
				return false // duplicate: encoding/json's last-wins rules are not ours to copy
			}
			c.seen |= bit
			if !r.claim(bit, c) {
				return false
			}
		}
		r.ws()
		if r.byte('}') {
			return r.end()
		}
		if !r.byte(',') {
			return false
		}
		r.ws()
	}
}

// lookupClaim returns key's bit in fields, 0 for a key encoding/json would
// ignore, and false for a key it might match to a field case-insensitively.
func lookupClaim(key string, fields claimSet) (claimSet, bool) {
	for _, n := range claimNames {
		if n.bit&fields == 0 {
			continue
		}
		if key == n.name {
			return n.bit, true
		}
		if asciiEqualFold(key, n.name) {
			return 0, false
		}
	}
	return 0, true
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// scanner reads s from i.
type scanner struct {
	s string
	i int
}

func (r *scanner) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// byte consumes c if it is next.
func (r *scanner) byte(c byte) bool {
	if r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (r *scanner) end() bool {
	r.ws()
	return r.i == len(r.s)
}

// plainString reads a string of printable ASCII without escapes and returns
// its contents, which are then exactly what encoding/json would decode.
func (r *scanner) plainString() (string, bool) {
	if !r.byte('"') {
		return "", false
	}
	start := r.i
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return r.s[start : r.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
		r.i++
	}
	return "", false
}

// uint reads a non-negative integer of at most 15 digits without leading
// zeros: exact as an int64 and as the float64 NumericDate goes through.
func (r *scanner) uint() (int64, bool) {
	start := r.i
	var n int64
	for r.i < len(r.s) && '0' <= r.s[r.i] && r.s[r.i] <= '9' {
		n = n*10 + int64(r.s[r.i]-'0')
		r.i++
	}
	digits := r.i - start
	switch {
	case digits == 0 || digits > 15:
		return 0, false
	case digits > 1 && r.s[start] == '0':
		return 0, false
	}
	// A fraction or exponent follows: not an integer literal.
	if r.i < len(r.s) && (r.s[r.i] == '.' || r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		return 0, false
	}
	return n, true
}

func (r *scanner) literal(lit string) bool {
	if len(r.s)-r.i >= len(lit) && r.s[r.i:r.i+len(lit)] == lit {
		r.i += len(lit)
		return true
	}
	return false
}

// claim reads the value of known claim bit into c.
func (r *scanner) claim(bit claimSet, c *flatClaims) bool {
	var ok bool
	switch bit {
	case claimIss:
		c.iss, ok = r.plainString()
	case claimSub:
		c.sub, ok = r.plainString()
	case claimJti:
		c.jti, ok = r.plainString()
	case claimSale:
		c.sale, ok = r.plainString()
	case claimExp:
		c.exp, ok = r.uint()
	case claimNbf:
		c.nbf, ok = r.uint()
	case claimIat:
		c.iat, ok = r.uint()
	case claimPos:
		c.pos, ok = r.uint()
	case claimPre:
		switch {
		case r.literal("true"):
			c.pre, ok = true, true
		case r.literal("false"):
			c.pre, ok = false, true
		}
	case claimAud:
		c.aud, ok = r.audience()
	}
	return ok
}

// audience reads aud as jwt.ClaimStrings decodes it: a string, or a
// non-empty array of strings (an empty one decodes to nil: slow path).
func (r *scanner) audience() ([]string, bool) {
	if r.i < len(r.s) && r.s[r.i] == '"' {
		a, ok := r.plainString()
		if !ok {
			return nil, false
		}
		return []string{a}, true
	}
	if !r.byte('[') {
		return nil, false
	}
	var aud []string
	for {
		r.ws()
		a, ok := r.plainString()
		if !ok {
			return nil, false
		}
		aud = append(aud, a)
		r.ws()
		if r.byte(']') {
			return aud, true
		}
		if !r.byte(',') {
			return nil, false
		}
	}
}

// skip consumes one valid JSON value of any kind, as encoding/json's scanner
// would accept it.
func (r *scanner) skip(depth int) bool {
	if r.i >= len(r.s) {
		return false
	}
	switch c := r.s[r.i]; {
	case c == '"':
		return r.skipString()
	case c == '{':
		if depth >= maxScanDepth {
			return false
		}
		r.i++
		r.ws()
		if r.byte('}') {
			return true
		}
		for {
			if !r.skipString() {
				return false
			}
			r.ws()
			if !r.byte(':') {
				return false
			}
			r.ws()
			if !r.skip(depth + 1) {
				return false
			}
			r.ws()
			if r.byte('}') {
				return true
			}
			if !r.byte(',') {
				return false
			}
			r.ws()
		}
	case c == '[':
		if depth >= maxScanDepth {
			return false
		}
		r.i++
		r.ws()
		if r.byte(']') {
			return true
		}
		for {
			if !r.skip(depth + 1) {
				return false
			}
			r.ws()
			if r.byte(']') {
				return true
			}
			if !r.byte(',') {
				return false
			}
			r.ws()
		}
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return r.skipNumber()
	}
	return false
}

// skipString consumes a JSON string: any bytes from 0x20 up but for the quote
// and backslash, and the escapes JSON defines.
func (r *scanner) skipString() bool {
	if !r.byte('"') {
		return false
	}
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if r.i+1 >= len(r.s) {
				return false
			}
			switch r.s[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if r.i+6 > len(r.s) {
					return false
				}
				for _, h := range []byte(r.s[r.i+2 : r.i+6]) {
					if !isHex(h) {
						return false
					}
				}
				r.i += 6
			default:
				return false
			}
		default:
			r.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber consumes a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *scanner) skipNumber() bool {
	r.byte('-')
	switch {
	case r.byte('0'):
	case r.i < len(r.s) && '1' <= r.s[r.i] && r.s[r.i] <= '9':
		r.digits()
	default:
		return false
	}
	if r.byte('.') {
		if r.digits() == 0 {
			return false
		}
	}
	if r.byte('e') || r.byte('E') {
		if !r.byte('+') {
			r.byte('-')
		}
		if r.digits() == 0 {
			return false
		}
	}
	return true
}

func (r *scanner) digits() int {
	start := r.i
	for r.i < len(r.s) && '0' <= r.s[r.i] && r.s[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}
