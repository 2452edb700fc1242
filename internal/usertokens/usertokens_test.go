package usertokens

import (
	"strings"
	"testing"

	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// The binaries' own suites (internal/configtest.UserTokens) run these
// checks through each configuration; this holds the rules themselves.
func TestCheck(t *testing.T) {
	keys := tokenstest.KeySet().String()
	shared := strings.SplitN(strings.SplitN(keys, ",", 2)[0], ":", 2)[1] // the first key's base64 secret
	for _, tt := range []struct {
		name string
		s    Settings
		want string // in the error; "" for none
	}{
		{"a secret of its own", Settings{TokenKeys: keys, UserTokenSecret: strings.Repeat("u", 40)}, ""},
		{"a token key's secret, as its base64", Settings{TokenKeys: keys, UserTokenSecret: shared}, "FLASHGATE_USER_TOKEN_SECRET"},
		{"the dev secret a token key's", Settings{TokenKeys: keys, DevUserTokenSecret: shared, Dev: true}, "FLASHGATE_DEV_USER_TOKEN_SECRET"},
		{"our own issuer", Settings{TokenKeys: keys, UserTokenIssuer: tokens.IssuerName}, "FLASHGATE_USER_TOKEN_ISSUER"},
		{"our own audience", Settings{TokenKeys: keys, UserTokenAudience: tokens.AudienceOrigin}, "FLASHGATE_USER_TOKEN_AUDIENCE"},
		{"a bad key set", Settings{TokenKeys: "nope"}, "FLASHGATE_TOKEN_KEYS"},
	} {
		err := tt.s.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Check = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Check = %v, want an error naming %s", tt.name, err, tt.want)
		case err != nil && strings.Contains(err.Error(), shared):
			t.Errorf("%s: Check's error shows the secret: %v", tt.name, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	if w := (Settings{Dev: true}).Warnings(); len(w) != 0 {
		t.Errorf("dev mode: Warnings = %q, want none", w)
	}
	if w := (Settings{UserTokenIssuer: "shop", UserTokenAudience: "flashgate-signin"}).Warnings(); len(w) != 0 {
		t.Errorf("both set: Warnings = %q, want none", w)
	}
	w := (Settings{UserTokenIssuer: "shop"}).Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "FLASHGATE_USER_TOKEN_AUDIENCE") || strings.Contains(w[0], "FLASHGATE_USER_TOKEN_ISSUER") {
		t.Errorf("audience unset: Warnings = %q, want one naming FLASHGATE_USER_TOKEN_AUDIENCE alone", w)
	}
}
