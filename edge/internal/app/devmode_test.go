package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// Dev mode signs user tokens with its own secret and checks them with it
// alone: a dev login's token is no good under the shop's secret, the shop's
// tokens are no good at a dev-mode node, and /metrics says dev mode is on.
func TestDevModeHasItsOwnUserTokenSecret(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "devmode"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	devSecret := []byte("dev-mode-only-user-token-secret-0123456789")
	cfg.DevUserTokenSecret = string(devSecret)
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)

	r := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/dev/login", Body: []byte(`{"user_id":"alice"}`)})
	var login struct {
		UserToken string `json:"user_token"`
	}
	if err := json.Unmarshal(r.Body, &login); r.Status != fasthttp.StatusOK || err != nil || login.UserToken == "" {
		t.Fatalf("POST /v1/dev/login = %d %s, want 200 with a user token", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		valid  bool
	}{{"the dev secret", devSecret, true}, {"the shop's secret", tokenstest.UserSecret(), false}} {
		v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: tc.secret}, tokens.UserVerifierOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if account, err := v.Account(login.UserToken); (err == nil) != tc.valid || (tc.valid && account != "alice") {
			t.Errorf("a dev login's token under %s: %q, %v; want valid %v", tc.name, account, err, tc.valid)
		}
	}

	join := func(token string) int {
		return n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: token}).Status
	}
	if got := join(login.UserToken); got != fasthttp.StatusAccepted {
		t.Errorf("join with the dev login's token = %d, want 202", got)
	}
	if got := join(edgetest.UserToken(t, "bob")); got != fasthttp.StatusUnauthorized {
		t.Errorf("join with a token signed with the shop's secret = %d, want 401", got)
	}

	if m := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"}); !strings.Contains(string(m.Body), "\nflashgate_dev_mode 1\n") {
		t.Errorf("GET /metrics = %d without flashgate_dev_mode 1", m.Status)
	}
}

// Outside dev mode there is no dev login, and /metrics says so.
func TestNoDevModeNoDevLogin(t *testing.T) {
	t.Parallel()
	cfg := edgetest.Config(edgetest.NewRedis(t), edgetest.NewStubOrigin(t).URL)
	cfg.Dev, cfg.UserTokenSecret, cfg.DevUserTokenSecret = false, string(tokenstest.UserSecret()), ""
	n := edgetest.NewNode(t, cfg)
	if r := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/dev/login", Body: []byte(`{"user_id":"alice"}`)}); r.Status != fasthttp.StatusNotFound {
		t.Errorf("POST /v1/dev/login outside dev mode = %d %s, want 404", r.Status, r.Body)
	}
	if m := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"}); !strings.Contains(string(m.Body), "\nflashgate_dev_mode 0\n") {
		t.Errorf("GET /metrics = %d without flashgate_dev_mode 0", m.Status)
	}
}
