// Package tokens is the edge-origin token contract: the queue and admission
// tokens we issue (HS256, named by kid from a rotating KeySet), their
// verification, and verification of the shop's user tokens. Callers branch
// only on the sentinel errors and map them to API codes with Code.
package tokens

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/golang-jwt/jwt/v5"
)

// Registered-claim values of the tokens we issue. Verification requires them:
// a queue token (audience edge) is useless at the origin and an admission
// token (audience origin) is useless as a queue token.
const (
	// IssuerName is the iss of every token we issue. (It cannot be called
	// Issuer: that is the type that signs them.)
	IssuerName = "flashgate"
	// AudienceEdge is the aud of queue tokens, which only the edge accepts.
	AudienceEdge = "edge"
	// AudienceOrigin is the aud of admission tokens, which the origin accepts on reserve.
	AudienceOrigin = "origin"
)

// QueueClaims are the claims of a queue token: the edge's receipt for a place
// in a sale's queue, presented on every status poll until the sale ends.
// Subject is the shopper's account id.
type QueueClaims struct {
	jwt.RegisteredClaims
	// Sale is the sale id the place is in.
	Sale string `json:"sale"`
	// Pos is the queue position, compared with the sale's now_serving.
	Pos int64 `json:"pos"`
	// Pre is true when the shopper joined before the sale started.
	Pre bool `json:"pre,omitempty"`
}

// AdmissionClaims are the claims of an admission token: the edge's permission
// for one reserve at the origin, issued once Pos <= now_serving. Subject is
// the shopper's account id; ID (jti) is the single-use id the successful
// reserve burns, atomically with the stock decrement.
type AdmissionClaims struct {
	jwt.RegisteredClaims
	// Sale is the sale id the admission is for.
	Sale string `json:"sale"`
	// Pos is the queue position that earned the admission.
	Pos int64 `json:"pos"`
}

// The slow paths decode claims through the types below, not golang-jwt's
// alone. jwt.NumericDate decodes through json.Number, which also takes a
// JSON string holding a number ("exp":"1700000000"); a null leaves a time
// claim absent; and a number beyond int64 seconds wraps round to another
// time (an nbf of 1e300 falls in the past). RFC 7519 (section 2) makes a
// NumericDate a JSON number, and the fast paths (claimscan.go) take nothing
// else. So here exp, nbf and iat, when present, must be JSON numbers of at
// most maxNumericDate seconds either way; any other value makes the token
// malformed.

// maxNumericDate bounds the magnitude of a time claim, in seconds: 2^53, the
// integers a float64 holds exactly, some 285 million years either side of
// 1970, so that the times golang-jwt makes of it and compares never overflow.
const maxNumericDate = 1 << 53

// errNotNumericDate is what decoding reports for a time claim that is not a
// NumericDate; golang-jwt wraps it as a malformed token.
var errNotNumericDate = errors.New("exp, nbf and iat must be JSON numbers of seconds, at most 2^53 either way")

// timeClaim checks the value of one time claim. It keeps nothing:
// jwt.NumericDate decodes the value.
type timeClaim struct{}

func (timeClaim) UnmarshalJSON(b []byte) error {
	// encoding/json hands over one valid JSON value, null included; a
	// number is the one that starts so.
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return errNotNumericDate
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.Abs(f) > maxNumericDate {
		return errNotNumericDate
	}
	return nil
}

// timeClaims holds exp, nbf and iat. encoding/json matches their names as it
// matches RegisteredClaims' (case-insensitively, and every duplicate), so
// every value a jwt.NumericDate decoded is checked here too.
type timeClaims struct {
	Exp timeClaim `json:"exp"`
	Nbf timeClaim `json:"nbf"`
	Iat timeClaim `json:"iat"`
}

// decodeClaims decodes the claims JSON b into c, a claims struct without an
// UnmarshalJSON of its own, and then checks its time claims.
func decodeClaims(b []byte, c jwt.Claims) error {
	if err := json.Unmarshal(b, c); err != nil {
		return err
	}
	return json.Unmarshal(b, &timeClaims{})
}

// queueClaimsJSON, admissionClaimsJSON and userClaimsJSON are what the slow
// paths give golang-jwt to decode a token's claims into: their claims,
// decoded by decodeClaims.
type (
	queueClaimsJSON     struct{ QueueClaims }
	admissionClaimsJSON struct{ AdmissionClaims }
	userClaimsJSON      struct{ jwt.RegisteredClaims }
)

func (c *queueClaimsJSON) UnmarshalJSON(b []byte) error { return decodeClaims(b, &c.QueueClaims) }

func (c *admissionClaimsJSON) UnmarshalJSON(b []byte) error {
	return decodeClaims(b, &c.AdmissionClaims)
}

func (c *userClaimsJSON) UnmarshalJSON(b []byte) error {
	return decodeClaims(b, &c.RegisteredClaims)
}
