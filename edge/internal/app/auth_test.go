package app_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// TestTokensRejected: a join with a missing, forged or expired user token,
// and a status poll or reserve with a forged, expired, unsigned,
// other-sale, other-account, wrong-kind or missing token, or without the
// shopper's own user token beside it, is answered 401 with the matching
// code at the edge and never reaches the origin; the genuine tokens pass.
func TestTokensRejected(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale, otherSale = "auth", "auth-other"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	origin.SetSale(edgetest.OpenSale(otherSale, 10))
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), origin.URL))
	n.WaitSale(t, sale)

	now := time.Now()
	sameKIDOtherSecret, err := tokens.NewKeySet(tokenstest.KID, map[string][]byte{tokenstest.KID: []byte("not-the-edge-secret-0123456789ab")})
	if err != nil {
		t.Fatal(err)
	}
	forgedKID := tokens.NewIssuer(tokenstest.OtherKeySet(), tokens.IssuerOptions{})
	forgedSig := tokens.NewIssuer(sameKIDOtherSecret, tokens.IssuerOptions{})
	old := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{Clock: clock.NewFake(now.Add(-2 * time.Hour))})
	must := func(tok string, _ any, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	queueTok := func(i *tokens.Issuer, s, account string, exp time.Time) string {
		tok, c, err := i.Queue(s, account, 1, false, exp)
		return must(tok, c, err)
	}
	admissionTok := func(i *tokens.Issuer, s, account string) string {
		tok, c, err := i.Admission(s, account, 1)
		return must(tok, c, err)
	}
	unsigned := func(aud string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{
			"iss": tokens.IssuerName, "aud": aud, "sub": "alice", "sale": sale, "pos": 1, "jti": "x",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ends := now.Add(time.Hour)
	validQueue := queueTok(issuer, sale, "alice", ends)
	validAdmission := admissionTok(issuer, sale, "alice")
	alice, bob := edgetest.UserToken(t, "alice"), edgetest.UserToken(t, "bob")

	forgedUser, err := tokens.NewDevUserIssuer([]byte("not-the-shop-secret-0123456789ab"), "", 0, nil).Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	expiredUser, err := tokens.NewDevUserIssuer(tokenstest.UserSecret(), "", time.Hour, clock.NewFake(now.Add(-2*time.Hour))).Issue("alice")
	if err != nil {
		t.Fatal(err)
	}

	type attempt struct {
		name, token, user string // user: X-User-Token, "" sends none
		status            int
		code              string
	}
	endpoints := []struct {
		name, method, path string
		body               []byte
		ok                 int
		attempts           []attempt
	}{
		{"join", "POST", "/v1/sales/" + sale + "/queue", nil, fasthttp.StatusAccepted, []attempt{
			{"genuine user", alice, "", fasthttp.StatusAccepted, ""},
			{"missing", "", "", fasthttp.StatusUnauthorized, "missing_token"},
			{"garbage", "not.a.jwt", "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"forged user", forgedUser, "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"expired user", expiredUser, "", fasthttp.StatusUnauthorized, "token_expired"},
			{"queue token", validQueue, "", fasthttp.StatusUnauthorized, "invalid_token"},
		}},
		{"status", "GET", "/v1/sales/" + sale + "/queue/status", nil, fasthttp.StatusOK, []attempt{
			{"genuine, own user token", validQueue, alice, fasthttp.StatusOK, ""},
			{"genuine, no user token", validQueue, "", fasthttp.StatusUnauthorized, "missing_token"},
			{"genuine, forged user token", validQueue, forgedUser, fasthttp.StatusUnauthorized, "invalid_token"},
			{"genuine, expired user token", validQueue, expiredUser, fasthttp.StatusUnauthorized, "token_expired"},
			{"missing", "", alice, fasthttp.StatusUnauthorized, "missing_token"},
			{"garbage", "not.a.jwt", "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"unknown kid", queueTok(forgedKID, sale, "alice", ends), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"forged signature", queueTok(forgedSig, sale, "alice", ends), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"alg none", unsigned(tokens.AudienceEdge), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"expired", queueTok(old, sale, "alice", now.Add(-time.Hour)), "", fasthttp.StatusUnauthorized, "token_expired"},
			{"other sale", queueTok(issuer, otherSale, "alice", ends), "", fasthttp.StatusUnauthorized, "wrong_sale"},
			{"other account", validQueue, bob, fasthttp.StatusUnauthorized, "wrong_account"},
			{"admission token", validAdmission, "", fasthttp.StatusUnauthorized, "invalid_token"},
		}},
		{"reserve", "POST", "/v1/sales/" + sale + "/reserve", reserveBody("sku-1", "k1"), fasthttp.StatusCreated, []attempt{
			{"genuine, own user token", validAdmission, alice, fasthttp.StatusCreated, ""},
			{"genuine, no user token", validAdmission, "", fasthttp.StatusUnauthorized, "missing_token"},
			{"genuine, forged user token", validAdmission, forgedUser, fasthttp.StatusUnauthorized, "invalid_token"},
			{"genuine, expired user token", validAdmission, expiredUser, fasthttp.StatusUnauthorized, "token_expired"},
			{"missing", "", alice, fasthttp.StatusUnauthorized, "missing_token"},
			{"garbage", "not.a.jwt", "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"unknown kid", admissionTok(forgedKID, sale, "alice"), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"forged signature", admissionTok(forgedSig, sale, "alice"), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"alg none", unsigned(tokens.AudienceOrigin), "", fasthttp.StatusUnauthorized, "invalid_token"},
			{"expired", admissionTok(old, sale, "alice"), "", fasthttp.StatusUnauthorized, "token_expired"},
			{"other sale", admissionTok(issuer, otherSale, "alice"), "", fasthttp.StatusUnauthorized, "wrong_sale"},
			{"other account", validAdmission, bob, fasthttp.StatusUnauthorized, "wrong_account"},
			{"queue token", validQueue, "", fasthttp.StatusUnauthorized, "invalid_token"},
		}},
	}
	for _, ep := range endpoints {
		for _, a := range ep.attempts {
			t.Run(ep.name+"/"+a.name, func(t *testing.T) {
				before := origin.CountMatching("POST", ep.path)
				res := n.Do(t, edgetest.Request{Method: ep.method, Path: ep.path, Token: a.token, User: a.user, Body: ep.body})
				if res.Status != a.status || (a.code != "" && res.ErrorCode() != a.code) {
					t.Errorf("%s %s with %s token = %d %s, want %d %s", ep.method, ep.path, a.name, res.Status, res.Body, a.status, a.code)
				}
				reached := origin.CountMatching("POST", ep.path) - before
				if a.status == fasthttp.StatusUnauthorized && reached != 0 {
					t.Errorf("a %s token reached origin %d times, want the edge to turn it away", a.name, reached)
				}
			})
		}
	}
}

// TestRateLimits: with limits of 2 a minute, the third join from one IP,
// the third poll of one account and the third reserve of one account are
// answered 429 rate_limited with Retry-After and X-RateLimit-* headers;
// another IP or account still gets through, and a limited reserve never
// reaches origin.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "limits"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.LimitJoinIP, cfg.LimitPollAccount, cfg.LimitReserveAccount = "2-M", "2-M", "2-M"
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	ip1, ip2 := n.Client("198.51.100.1"), n.Client("198.51.100.2")

	limited := func(what string, res *edgetest.Response) {
		t.Helper()
		if res.Status != fasthttp.StatusTooManyRequests || res.ErrorCode() != "rate_limited" {
			t.Errorf("%s = %d %s, want 429 rate_limited", what, res.Status, res.Body)
			return
		}
		retry, err := strconv.Atoi(res.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 60 {
			t.Errorf("%s Retry-After = %q, want 1..60 seconds", what, res.Get("Retry-After"))
		}
		reset, err := strconv.ParseInt(res.Get("X-RateLimit-Reset"), 10, 64)
		if res.Get("X-RateLimit-Limit") != "2" || res.Get("X-RateLimit-Remaining") != "0" || err != nil || reset < time.Now().Unix() {
			t.Errorf("%s X-RateLimit-Limit/Remaining/Reset = %q/%q/%q, want 2/0/a future unix time", what,
				res.Get("X-RateLimit-Limit"), res.Get("X-RateLimit-Remaining"), res.Get("X-RateLimit-Reset"))
		}
	}

	var queueTokens []string
	for i, account := range []string{"j1", "j2"} {
		res, ans := ip1.Join(t, sale, account)
		if res.Status != fasthttp.StatusAccepted || res.Get("X-RateLimit-Remaining") != strconv.Itoa(1-i) {
			t.Fatalf("join %d from one IP = %d %s (X-RateLimit-Remaining %q), want 202 (%d left)", i+1, res.Status, res.Body, res.Get("X-RateLimit-Remaining"), 1-i)
		}
		queueTokens = append(queueTokens, ans.QueueToken)
	}
	res, _ := ip1.Join(t, sale, "j3")
	limited("third join from one IP", res)
	if res, _ := ip2.Join(t, sale, "j3"); res.Status != fasthttp.StatusAccepted {
		t.Errorf("join from another IP = %d %s, want 202", res.Status, res.Body)
	}

	for i := range 2 {
		if res, _ := ip1.Status(t, sale, queueTokens[0]); res.Status != fasthttp.StatusOK {
			t.Fatalf("poll %d of j1 = %d %s, want 200", i+1, res.Status, res.Body)
		}
	}
	res, _ = ip2.Status(t, sale, queueTokens[0])
	limited("third poll of one account (from another IP)", res)
	if res, _ := ip1.Status(t, sale, queueTokens[1]); res.Status != fasthttp.StatusOK {
		t.Errorf("poll of another account = %d %s, want 200", res.Status, res.Body)
	}

	admission, _, err := issuer.Admission(sale, "r1", 1)
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/sales/" + sale + "/reserve"
	reserve := func(c *edgetest.Client) *edgetest.Response {
		return c.Do(t, edgetest.Request{Method: "POST", Path: path, Token: admission, User: edgetest.Owner(t, admission), Body: reserveBody("sku-1", "k")})
	}
	for i := range 2 {
		if res := reserve(ip1); res.Status != fasthttp.StatusCreated {
			t.Fatalf("reserve %d of r1 = %d %s, want 201 from origin", i+1, res.Status, res.Body)
		}
	}
	limited("third reserve of one account", reserve(ip2))
	if got := origin.CountMatching("POST", path); got != 2 {
		t.Errorf("origin saw %d reserves, want 2: the limited one must stop at the edge", got)
	}
}
