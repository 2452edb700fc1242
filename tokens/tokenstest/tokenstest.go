// Package tokenstest provides fixed keys and a settable clock for tests of
// packages that issue or verify tokens, so expiry can be tested without sleeps
// and tokens are reproducible across test packages. Never use it outside tests.
package tokenstest

import (
	"time"

	"github.com/flashgate/flashgate/tokens"
)

// Key ids of the fixed key sets.
const (
	KID      = "test1"
	OtherKID = "other1"
)

// Fixed secrets, 32 bytes each. Returned only as copies.
var (
	testSecret  = []byte("flashgate-test-secret-0123456789")
	otherSecret = []byte("flashgate-other-secret-abcdefghi")
	userSecret  = []byte("flashgate-test-user-secret-00000")
)

// KeySet returns a key set holding only kid "test1" with a fixed secret.
func KeySet() *tokens.KeySet { return mustKeySet(KID, testSecret) }

// OtherKeySet returns a key set with a different kid ("other1") and secret,
// for unknown-kid, wrong-key and rotation tests.
func OtherKeySet() *tokens.KeySet { return mustKeySet(OtherKID, otherSecret) }

// UserSecret returns a fixed 32-byte HS256 secret for user tokens (a fresh
// copy each call), for NewUserVerifier and NewDevUserIssuer.
func UserSecret() []byte { return append([]byte(nil), userSecret...) }

func mustKeySet(kid string, secret []byte) *tokens.KeySet {
	k, err := tokens.NewKeySet(kid, map[string][]byte{kid: secret})
	if err != nil {
		panic("tokenstest: " + err.Error())
	}
	return k
}

// Start returns the instant NewClock starts at when given the zero time,
// 2030-01-01T12:00:00Z, so tests need not care about today's date.
func Start() time.Time { return time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC) }

// LineAudience is the audience the test edges sign their line requests for
// and the test origins take them for (FLASHGATE_LINE_AUDIENCE).
const LineAudience = "flashgate-test"
