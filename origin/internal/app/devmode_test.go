package app_test

import (
	"strings"
	"testing"

	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// A dev-mode origin checks user tokens with the dev secret alone, which
// the edges' dev logins sign with, and refuses the shop's; an origin out of
// dev mode refuses dev tokens. /metrics says which mode it is in.
func TestDevModeChecksUserTokensWithTheDevSecret(t *testing.T) {
	t.Parallel()
	devSecret := []byte("dev-mode-only-user-token-secret-0123456789")
	devToken, err := tokens.NewDevUserIssuer(devSecret, "", 0, nil).Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	shopToken, err := tokens.NewDevUserIssuer(tokenstest.UserSecret(), "", 0, nil).Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		configure func(*app.Config)
		metric    string
		accepted  string // the token accepted; the other is refused
	}{
		{"dev mode", func(c *app.Config) { c.DevUserTokenSecret = string(devSecret) }, "flashgate_dev_mode 1", devToken},
		{"production", func(c *app.Config) {
			c.Dev, c.UserTokenSecret, c.DevUserTokenSecret = false, string(tokenstest.UserSecret()), string(devSecret)
		}, "flashgate_dev_mode 0", shopToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := origintest.StartOrigin(t, origintest.NewEnv(t), tc.configure)
			for _, tok := range []string{devToken, shopToken} {
				// A reservation of nobody's: 404 to whoever is signed in, 401 to
				// a token the origin does not accept.
				status, _ := o.Do(t, origintest.Request{Method: "GET", Path: "/v1/reservations/r_0123456789abcdef_nosale", Token: tok})
				if refused := status == 401; refused == (tok == tc.accepted) {
					t.Errorf("GET /v1/reservations/{id} with the %s token = %d, want 401 only for the token it does not accept", map[bool]string{true: "dev", false: "shop's"}[tok == devToken], status)
				}
			}
			status, body := o.DoAdmin(t, origintest.Request{Method: "GET", Path: "/metrics", Token: origintest.AdminToken})
			if !strings.Contains(string(body), "\n"+tc.metric+"\n") {
				t.Errorf("GET /metrics = %d without %s", status, tc.metric)
			}
		})
	}
}
