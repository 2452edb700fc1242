package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// signedRequest is a line request signed by signer, to send as it is, as
// often as a test likes.
func signedRequest(signer *tokens.RequestSigner, method, path, body string) origintest.Request {
	r := origintest.Request{Method: method, Path: path, Header: map[string]string{}}
	if body != "" {
		r.Body = []byte(body)
	}
	r.Header[tokens.RequestSignatureHeader] = signer.Sign(method, path, r.Body)
	return r
}

// TestLineReplayAcrossOrigins: a signed line request is taken once by all
// the origins sharing a database: sent again to another origin, or to an
// origin restarted since, it is refused 401 replayed_request and changes
// nothing — a captured pause replayed after a restart pauses no sale —
// while requests signed afresh pass everywhere.
func TestLineReplayAcrossOrigins(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o1 := origintest.StartOrigin(t, env)
	o2 := origintest.StartOrigin(t, env)
	sale := "replay-" + testenv.RandomHex(3)
	o1.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale
	if s, l := lineCall(t, o1, sign, "POST", path, `{"seed":"`+seedA+`","rate_per_s":5}`); s != 200 {
		t.Fatalf("POST line = %d %+v, want 200", s, l)
	}

	refused := func(o *origintest.Origin, where string, r origintest.Request) {
		t.Helper()
		if s, b := o.Do(t, r); s != 401 || origintest.ErrorCode(b) != "replayed_request" {
			t.Errorf("%s %s sent again to %s = %d %s, want 401 replayed_request", r.Method, r.Body, where, s, b)
		}
	}
	pause := signedRequest(sign, "PUT", path+"/settings", `{"paused":true}`)
	if s, b := o1.Do(t, pause); s != 200 {
		t.Fatalf("PUT settings paused on origin 1 = %d %s, want 200", s, b)
	}
	refused(o2, "origin 2", pause)
	refused(o1, "origin 1", pause)
	resume := signedRequest(sign, "PUT", path+"/settings", `{"paused":false}`)
	if s, b := o2.Do(t, resume); s != 200 {
		t.Fatalf("PUT settings resumed on origin 2 = %d %s, want 200", s, b)
	}
	refused(o1, "origin 1", resume)

	// Origin 1 restarts (its memory gone, its database kept): the pause it
	// took is still refused, there and at origin 2.
	o1.Stop()
	o3 := origintest.StartOrigin(t, env)
	refused(o3, "origin 1 restarted", pause)
	refused(o2, "origin 2 after the restart", pause)
	if s, l := lineCall(t, o3, sign, "GET", path, ""); s != 200 || l.Paused || l.SettingsVersion != 2 {
		t.Errorf("line after the replays = %d %+v, want not paused at version 2", s, l)
	}
	for i, o := range []*origintest.Origin{o3, o2} {
		if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"rate_per_s":7}`); s != 200 || l.SettingsVersion != int64(3+i) {
			t.Errorf("PUT settings signed afresh on origin %d = %d %+v, want 200 at version %d", 3-i, s, l, 3+i)
		}
	}
}

// TestLineSignatureStoreDown: a line request whose signature cannot be
// recorded is neither taken nor refused as forged: 503 please_wait, and
// the line is unchanged.
func TestLineSignatureStoreDown(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env)
	sale := "sigdown-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale
	if s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seedA+`","rate_per_s":5}`); s != 200 {
		t.Fatalf("POST line = %d %+v, want 200", s, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.DB.Exec(ctx, `ALTER TABLE line_signatures RENAME TO line_signatures_away`); err != nil {
		t.Fatal(err)
	}
	if s, b := o.Do(t, signedRequest(sign, "PUT", path+"/settings", `{"paused":true}`)); s != 503 || origintest.ErrorCode(b) != "please_wait" {
		t.Errorf("PUT settings with the signature store failing = %d %s, want 503 please_wait", s, b)
	}
	l, err := ledger.New(env.DB).Line(ctx, sale)
	if err != nil || l.Paused || l.SettingsVersion != 0 {
		t.Errorf("line after the store failed = %+v, %v; want not paused at version 0", l, err)
	}
}

// TestLineAudience: an origin takes line requests signed for its own name
// only, whatever Host they carry: FLASHGATE_LINE_AUDIENCE, or else its
// public listen address; never the Host a request names. An origin
// listening on every interface has no name of its own: it needs
// FLASHGATE_LINE_AUDIENCE.
func TestLineAudience(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	named := origintest.StartOrigin(t, env)
	const addr = "127.0.0.1:9090"
	byAddr := origintest.StartOrigin(t, env, func(c *app.Config) { c.LineAudience, c.Addr = "", addr })
	sale := "aud-" + testenv.RandomHex(3)
	named.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	path := "/v1/lines/" + sale + "/settings"
	cases := []struct {
		name      string
		o         *origintest.Origin
		signedFor string
		host      string // "" sends the listener's own name, "public"
		want      int
	}{
		{"named: for its name, any Host", named, tokenstest.LineAudience, "anything.example", 404},
		{"named: for its name", named, tokenstest.LineAudience, "", 404},
		{"named: for the Host carried", named, "public", "", 401},
		{"named: for another, matching Host", named, "origin.staging.example", "origin.staging.example", 401},
		{"named: for its address", named, named.Config.Addr, named.Config.Addr, 401},
		{"by address: for it, any Host", byAddr, addr, "", 404},
		{"by address: for the Host carried", byAddr, "public", "", 401},
		{"by address: for another, matching Host", byAddr, "10.9.9.9:9090", "10.9.9.9:9090", 401},
		{"by address: for the other's name", byAddr, tokenstest.LineAudience, tokenstest.LineAudience, 401},
	}
	for _, tc := range cases {
		r := signedRequest(tokens.NewRequestSigner(tokenstest.KeySet(), tc.signedFor, nil), "PUT", path, `{"paused":true}`)
		r.Host = tc.host
		// 404: taken, and the sale has no line yet; 401: refused before.
		s, b := tc.o.Do(t, r)
		code := origintest.ErrorCode(b)
		if s != tc.want || (s == 401 && code != "invalid_token") || (s == 404 && code != "unknown_sale") {
			t.Errorf("%s: PUT settings = %d %s, want %d", tc.name, s, b, tc.want)
		}
	}

	for _, a := range []string{":9090", "0.0.0.0:9090", "[::]:9090"} {
		cfg := named.Config
		cfg.Addr, cfg.LineAudience = a, ""
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "FLASHGATE_LINE_AUDIENCE") {
			t.Errorf("Validate(Addr %q, no line audience) = %v, want an error naming FLASHGATE_LINE_AUDIENCE", a, err)
		}
		cfg.LineAudience = "production"
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(Addr %q, line audience production) = %v, want nil", a, err)
		}
	}
}
