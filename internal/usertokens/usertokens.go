// Package usertokens checks how a binary is told to verify the shop's user
// tokens, for edge and origin alike: settings that would let user tokens
// and flashgate's own queue and admission tokens pass for one another are
// refused, and settings that check less than they should are warned of.
package usertokens

import (
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/tokens"
)

// Settings are a binary's user-token settings as its configuration holds
// them.
type Settings struct {
	TokenKeys          string // FLASHGATE_TOKEN_KEYS: our own tokens' keys
	UserTokenSecret    string // FLASHGATE_USER_TOKEN_SECRET
	DevUserTokenSecret string // FLASHGATE_DEV_USER_TOKEN_SECRET
	UserTokenIssuer    string // FLASHGATE_USER_TOKEN_ISSUER
	UserTokenAudience  string // FLASHGATE_USER_TOKEN_AUDIENCE
	Dev                bool   // FLASHGATE_DEV
}

// Check refuses user-token settings that would mix user tokens
// with our own: a user-token secret that is a token key (or its base64),
// with which whoever signs user tokens could sign queue and admission
// tokens, and under which ours would pass as user tokens; and our own
// tokens' iss or aud required of user tokens, under which none would pass.
// It parses the token keys, so a bad key set is refused here too; no
// message holds a secret.
func (c Settings) Check() error {
	keys, err := tokens.ParseKeySet(c.TokenKeys)
	if err != nil {
		return fmt.Errorf("config: FLASHGATE_TOKEN_KEYS: %w", err)
	}
	for _, s := range []struct{ name, secret string }{
		{"FLASHGATE_USER_TOKEN_SECRET", c.UserTokenSecret},
		{"FLASHGATE_DEV_USER_TOKEN_SECRET", c.DevUserTokenSecret},
	} {
		if s.secret == "" {
			continue
		}
		if kid, ok := keys.SharedSecret([]byte(s.secret)); ok {
			return fmt.Errorf("config: %s is the secret of token key %q in FLASHGATE_TOKEN_KEYS (or its base64): "+
				"whoever signs user tokens could sign queue and admission tokens, and those would pass as user tokens; "+
				"give user tokens a secret of their own", s.name, kid)
		}
	}
	switch {
	case c.UserTokenIssuer == tokens.IssuerName:
		return fmt.Errorf("config: FLASHGATE_USER_TOKEN_ISSUER may not be %q, the issuer of our own queue and admission tokens", tokens.IssuerName)
	case c.UserTokenAudience == tokens.AudienceEdge || c.UserTokenAudience == tokens.AudienceOrigin:
		return fmt.Errorf("config: FLASHGATE_USER_TOKEN_AUDIENCE may not be %q, an audience of our own queue and admission tokens", c.UserTokenAudience)
	}
	return nil
}

// Warnings are what start-up logs at WARN about c: outside dev mode, user
// tokens whose iss or aud is not checked.
func (c Settings) Warnings() []string {
	if c.Dev {
		return nil // dev logins are checked with a secret of dev mode's own
	}
	var unset, claims []string
	if c.UserTokenIssuer == "" {
		unset, claims = append(unset, "FLASHGATE_USER_TOKEN_ISSUER"), append(claims, "ISSUER")
	}
	if c.UserTokenAudience == "" {
		unset, claims = append(unset, "FLASHGATE_USER_TOKEN_AUDIENCE"), append(claims, "AUDIENCE")
	}
	if len(unset) == 0 {
		return nil
	}
	verb := "is"
	if len(unset) > 1 {
		verb = "are"
	}
	return []string{"USER TOKENS' " + strings.Join(claims, " AND ") + " " + strings.ToUpper(verb) + " NOT CHECKED: " +
		strings.Join(unset, " and ") + " " + verb + " unset, " +
		"so any token the shop signs with the user-token key passes as a shopper's sign-in, whatever the shop issued it for " +
		"(another service, a password reset, an e-mail link); set both to the iss and aud of the shop's sign-in tokens"}
}
