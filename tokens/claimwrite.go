package tokens

import (
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The Issuer writes its claims with appendClaims instead of json.Marshal: the
// same bytes json.Marshal writes for QueueClaims and AdmissionClaims (tests
// compare them), without reflection. Where json.Marshal would escape a
// string, or golang-jwt's encoding settings are not the defaults assumed
// here, it reports false and the Issuer signs through golang-jwt.

// appendClaims appends the JSON of registered claims r followed by sale, pos
// and, when withPre, pre (omitted when false), as json.Marshal encodes
// QueueClaims (withPre) or AdmissionClaims.
func appendClaims(b []byte, r *jwt.RegisteredClaims, sale string, pos int64, withPre, pre bool) ([]byte, bool) {
	if jwt.TimePrecision != time.Second || !jwt.MarshalSingleStringAsArray {
		return b, false
	}
	ok := true
	str := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		if !plainJSON(v) {
			ok = false
			return
		}
		b = appendKey(b, name)
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	}
	date := func(name string, d *jwt.NumericDate) {
		if d == nil {
			return
		}
		b = appendKey(b, name)
		b = strconv.AppendInt(b, d.Truncate(jwt.TimePrecision).Unix(), 10)
	}
	b = append(b, '{')
	str("iss", r.Issuer, true)
	str("sub", r.Subject, true)
	if len(r.Audience) > 0 {
		b = appendKey(b, "aud")
		b = append(b, '[')
		for i, a := range r.Audience {
			if !plainJSON(a) {
				return b, false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, a...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	date("exp", r.ExpiresAt)
	date("nbf", r.NotBefore)
	date("iat", r.IssuedAt)
	str("jti", r.ID, true)
	str("sale", sale, false)
	b = appendKey(b, "pos")
	b = strconv.AppendInt(b, pos, 10)
	if withPre && pre {
		b = appendKey(b, "pre")
		b = append(b, "true"...)
	}
	b = append(b, '}')
	return b, ok
}

// appendKey appends "name": after a comma unless it is the object's first.
func appendKey(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// plainJSON reports whether json.Marshal writes s between quotes as it is:
// printable ASCII without the quote, the backslash and the characters it
// escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
