package tokens

import (
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// Sentinel errors are the only errors callers branch on (with errors.Is);
// every error this package returns from verification wraps exactly one of them.
// Code maps them to the stable API error codes.
var (
	// ErrMissing means no token was presented at all.
	ErrMissing = errors.New("tokens: missing token")
	// ErrMalformed means the token is not a decodable compact JWT.
	ErrMalformed = errors.New("tokens: malformed token")
	// ErrExpired means the token was genuine and otherwise valid, but its exp has passed.
	ErrExpired = errors.New("tokens: token expired")
	// ErrInvalid covers a bad signature, a wrong or unexpected alg, an unknown
	// kid, a wrong iss or aud, and missing required claims.
	ErrInvalid = errors.New("tokens: invalid token")
	// ErrWrongSale means a genuine token was presented for a sale it was not issued for.
	ErrWrongSale = errors.New("tokens: token is for another sale")
	// ErrWrongAccount is for callers to return when a token's sub is not the
	// account of the user token on the same request; this package never returns it.
	ErrWrongAccount = errors.New("tokens: token is for another account")
)

// Code maps an error from this package to its stable API error code (the
// "error" field of a 401 body). Unknown errors map to "invalid_token" so that a
// verification failure is never reported as anything but a bad token; nil maps to "".
func Code(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMissing):
		return "missing_token"
	case errors.Is(err, ErrExpired):
		return "token_expired"
	case errors.Is(err, ErrWrongSale):
		return "wrong_sale"
	case errors.Is(err, ErrWrongAccount):
		return "wrong_account"
	case errors.Is(err, ErrReplayed):
		return "replayed_request"
	default: // ErrMalformed, ErrInvalid and anything else
		return "invalid_token"
	}
}

// notExpiredOnly lists the claim failures that make a token invalid whatever
// else is wrong with it: a token for the wrong audience that has also expired
// is reported as invalid, not as expired.
var notExpiredOnly = []error{
	jwt.ErrTokenInvalidAudience,
	jwt.ErrTokenInvalidIssuer,
	jwt.ErrTokenInvalidSubject,
	jwt.ErrTokenRequiredClaimMissing,
	jwt.ErrTokenUsedBeforeIssued,
	jwt.ErrTokenNotValidYet,
	jwt.ErrTokenInvalidId,
	jwt.ErrInvalidType,
}

// classify turns an error from jwt.Parser into one of our sentinels, keeping
// the library's message as text (not as a wrapped error, so callers cannot
// come to depend on jwt's error values). what names the token kind for logs.
func classify(what string, err error) error {
	var sentinel error
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		sentinel = ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		sentinel = ErrInvalid
	case errors.Is(err, jwt.ErrTokenExpired) && !isAny(err, notExpiredOnly):
		sentinel = ErrExpired
	default:
		sentinel = ErrInvalid
	}
	return fmt.Errorf("%s: %w: %v", what, sentinel, err)
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
