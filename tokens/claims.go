// Package tokens is the edge-origin token contract: the queue and admission
// tokens we issue (HS256, named by kid from a rotating KeySet), their
// verification, and verification of the shop's user tokens. Callers branch
// only on the sentinel errors and map them to API codes with Code.
package tokens

import "github.com/golang-jwt/jwt/v5"

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
