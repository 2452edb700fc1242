package app_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// algNone returns an unsigned admission token ("alg": "none") for account
// in sale, otherwise well formed.
func algNone(t *testing.T, sale, account string) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	return enc(map[string]any{"alg": "none", "typ": "JWT", "kid": tokenstest.KID}) + "." + enc(map[string]any{
		"iss": tokens.IssuerName, "aud": []string{tokens.AudienceOrigin}, "sub": account, "jti": "none-jti",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "sale": sale, "pos": 1,
	}) + "."
}

// tamper swaps the sub of a signed token for another account, keeping the
// signature.
func tamper(t *testing.T, token, account string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["sub"] = account
	payload, _ = json.Marshal(claims)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// signed signs claims with the test key set's secret under its kid, for
// tokens our Issuer would never make.
func signed(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	spec := tokenstest.KeySet().String() // "kid:base64"
	kid, b64, _ := strings.Cut(spec, ":")
	secret, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("key set spec: %v", err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// No request, however malformed, gets a 5xx: every bad input to the public
// and admin listeners answers its 4xx and error code.
func TestBadInputGetsItsCode(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env)
	sale := "bad-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	upcoming := origintest.OpenSale("later-"+testenv.RandomHex(3), 10, 600)
	upcoming.StartsAt = time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	upcoming.EndsAt = upcoming.StartsAt.Add(time.Hour)
	o.MustCreateSale(t, upcoming)

	tok := func(account string) string { return o.AdmissionToken(t, sale, account) }
	reservePath := "/v1/sales/" + sale + "/reserve"
	good := []byte(`{"sku":"sku-1","idempotency_key":"k-1"}`)
	expiredIssuer := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{Clock: clock.NewFake(time.Now().Add(-time.Hour))})
	expired, _, err := expiredIssuer.Admission(sale, "acct-expired", 1)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := tokens.NewIssuer(tokenstest.OtherKeySet(), tokens.IssuerOptions{}).Admission(sale, "acct-kid", 1)
	if err != nil {
		t.Fatal(err)
	}
	queueTok, _, err := o.Issuer.Queue(sale, "acct-queue", 1, false, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	baseClaims := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": tokens.IssuerName, "aud": []string{tokens.AudienceOrigin}, "sub": "acct-claims",
			"jti": "jti-" + testenv.RandomHex(4), "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "sale": sale, "pos": 1}
	}
	withClaim := func(k string, v any) string {
		c := baseClaims()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return signed(t, c)
	}

	type tc struct {
		name   string
		req    origintest.Request
		status int
		code   string
	}
	post := func(token string, body []byte) origintest.Request {
		return origintest.Request{Method: "POST", Path: reservePath, Token: token, Body: body}
	}
	cases := []tc{
		// The body.
		{"malformed json", post(tok("a1"), []byte(`{"sku":`)), 400, "invalid_json"},
		{"empty body", post(tok("a2"), []byte{}), 400, "invalid_json"},
		{"trailing data", post(tok("a3"), []byte(`{"sku":"sku-1","idempotency_key":"k"} {}`)), 400, "invalid_json"},
		{"not an object", post(tok("a4"), []byte(`["sku-1"]`)), 400, "invalid_field"},
		{"unknown field", post(tok("a5"), []byte(`{"sku":"sku-1","idempotency_key":"k","quantity":2}`)), 400, "unknown_field"},
		{"wrong type", post(tok("a6"), []byte(`{"sku":5,"idempotency_key":"k"}`)), 400, "invalid_field"},
		{"over the handler's 4 KiB", post(tok("a7"), []byte(`{"sku":"sku-1","idempotency_key":"`+strings.Repeat("k", 5000)+`"}`)), 413, "body_too_large"},
		{"wrong content type", origintest.Request{Method: "POST", Path: reservePath, Token: tok("a8"), ContentType: "text/plain", Body: good}, 415, "unsupported_media_type"},
		{"form content type", origintest.Request{Method: "POST", Path: reservePath, Token: tok("a9"), ContentType: "application/x-www-form-urlencoded", Body: good}, 415, "unsupported_media_type"},
		{"invalid sku", post(tok("b1"), []byte(`{"sku":"sku 1","idempotency_key":"k"}`)), 400, "invalid_sku"},
		{"empty sku", post(tok("b2"), []byte(`{"idempotency_key":"k"}`)), 400, "invalid_sku"},
		{"long sku", post(tok("b3"), []byte(`{"sku":"`+strings.Repeat("s", 65)+`","idempotency_key":"k"}`)), 400, "invalid_sku"},
		{"idempotency key with a space", post(tok("b4"), []byte(`{"sku":"sku-1","idempotency_key":"k 1"}`)), 400, "invalid_idempotency_key"},
		{"empty idempotency key", post(tok("b5"), []byte(`{"sku":"sku-1"}`)), 400, "invalid_idempotency_key"},
		{"long idempotency key", post(tok("b6"), []byte(`{"sku":"sku-1","idempotency_key":"`+strings.Repeat("k", 129)+`"}`)), 400, "invalid_idempotency_key"},
		{"non-ascii idempotency key", post(tok("b7"), []byte(`{"sku":"sku-1","idempotency_key":"ключ"}`)), 400, "invalid_idempotency_key"},
		{"nul in idempotency key", post(tok("b8"), []byte(`{"sku":"sku-1","idempotency_key":"k\u0000"}`)), 400, "invalid_idempotency_key"},

		// The admission token.
		{"missing token", post("", good), 401, "missing_token"},
		{"basic auth", origintest.Request{Method: "POST", Path: reservePath, Body: good, Header: map[string]string{"Authorization": "Basic YTpi"}}, 401, "missing_token"},
		{"garbage token", post("not-a-jwt", good), 401, "invalid_token"},
		{"expired token", post(expired, good), 401, "token_expired"},
		{"tampered token", post(tamper(t, tok("c1"), "acct-someone-else"), good), 401, "invalid_token"},
		{"alg none", post(algNone(t, sale, "c2"), good), 401, "invalid_token"},
		{"unknown kid", post(otherKey, good), 401, "invalid_token"},
		{"token for another sale", post(o.AdmissionToken(t, upcoming.SaleID, "c3"), good), 401, "wrong_sale"},
		{"queue token as admission", post(queueTok, good), 401, "invalid_token"},
		{"user token as admission", post(o.UserToken(t, "c4"), good), 401, "invalid_token"},
		{"no exp", post(withClaim("exp", nil), good), 401, "invalid_token"},
		{"no jti", post(withClaim("jti", nil), good), 401, "invalid_token"},
		{"no sub", post(withClaim("sub", nil), good), 401, "invalid_token"},
		{"wrong issuer", post(withClaim("iss", "someone"), good), 401, "invalid_token"},
		{"nul in account", post(o.AdmissionToken(t, sale, "acct\x00nul"), good), 401, "invalid_token"},
		{"long garbage token", post(strings.Repeat("a", 3000), good), 401, "invalid_token"},

		// The sale.
		{"unknown sale, its own token", origintest.Request{Method: "POST", Path: "/v1/sales/no-such-sale/reserve",
			Token: o.AdmissionToken(t, "no-such-sale", "d1"), Body: good}, 404, "unknown_sale"},
		{"unknown sale, this sale's token", origintest.Request{Method: "POST", Path: "/v1/sales/no-such-sale/reserve",
			Token: tok("d2"), Body: good}, 401, "wrong_sale"},
		{"sale id outside the alphabet, its own token", origintest.Request{Method: "POST", Path: "/v1/sales/bad%00sale/reserve",
			Token: o.AdmissionToken(t, "bad\x00sale", "d3"), Body: good}, 404, "unknown_sale"},
		{"sale not open yet", origintest.Request{Method: "POST", Path: "/v1/sales/" + upcoming.SaleID + "/reserve",
			Token: o.AdmissionToken(t, upcoming.SaleID, "d4"), Body: good}, 409, "sale_not_open"},
		{"unknown sale snapshot", origintest.Request{Method: "GET", Path: "/v1/sales/no-such-sale"}, 404, "unknown_sale"},
		{"snapshot of a bad id", origintest.Request{Method: "GET", Path: "/v1/sales/bad%20id"}, 404, "unknown_sale"},
		{"reservation of a bad id", origintest.Request{Method: "GET", Path: "/v1/reservations/nope", Token: o.UserToken(t, "d5")}, 404, "unknown_reservation"},
		{"unknown path", origintest.Request{Method: "GET", Path: "/v1/nothing"}, 404, "not_found"},
		{"wrong method", origintest.Request{Method: "GET", Path: reservePath}, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := o.Do(t, c.req)
			if code := origintest.ErrorCode(body); status != c.status || code != c.code {
				t.Errorf("%s %s = %d %s, want %d %s", c.req.Method, c.req.Path, status, body, c.status, c.code)
			}
		})
	}

	// Nothing above took a unit.
	if l := o.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: 10}) {
		t.Errorf("Redis after bad reserves = %+v, want available 10, held 0", l.Redis)
	}

	// Bodies over the server's limit never reach a handler: fasthttp's
	// ErrorHandler answers them in the contract's shape.
	t.Run("over the server limit, content-length", func(t *testing.T) {
		raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: origin\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			reservePath, tok("e1"), origintest.MaxPublicRequestBody+1)
		raw += strings.Repeat(" ", origintest.MaxPublicRequestBody+1)
		status, body := origintest.RawRequest(t, o.PublicLn, []byte(raw))
		if code := origintest.ErrorCode(body); status != 413 || code != "body_too_large" {
			t.Errorf("POST %s with %d bytes = %d %s, want 413 body_too_large", reservePath, origintest.MaxPublicRequestBody+1, status, body)
		}
	})
	t.Run("over the server limit, chunked", func(t *testing.T) {
		var raw strings.Builder
		fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: origin\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", reservePath, tok("e2"))
		chunk := strings.Repeat(" ", 16<<10)
		for range 6 {
			fmt.Fprintf(&raw, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		raw.WriteString("0\r\n\r\n")
		status, body := origintest.RawRequest(t, o.PublicLn, []byte(raw.String()))
		if code := origintest.ErrorCode(body); status != 413 || code != "body_too_large" {
			t.Errorf("chunked POST %s with 96 KiB = %d %s, want 413 body_too_large", reservePath, status, body)
		}
	})
	t.Run("headers over the head limit", func(t *testing.T) {
		token := strings.Repeat("a", o.Config.MaxRequestHeadBytes)
		raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: origin\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			reservePath, token, len(good), good)
		status, body := origintest.RawRequest(t, o.PublicLn, []byte(raw))
		if code := origintest.ErrorCode(body); status != 431 || code != "request_header_too_large" {
			t.Errorf("POST %s with a %d-byte token = %d %s, want 431 request_header_too_large", reservePath, len(token), status, body)
		}
	})
	t.Run("unreadable request", func(t *testing.T) {
		status, body := origintest.RawRequest(t, o.PublicLn, []byte("POST /v1/sales HTTP/1.1\r\nHost: origin\r\nContent-Length: nope\r\n\r\n"))
		if code := origintest.ErrorCode(body); status != 400 || code != "bad_request" {
			t.Errorf("request with Content-Length: nope = %d %s, want 400 bad_request", status, body)
		}
	})
}

// The admin listener wants its token on every path, and answers a bad sale
// definition with 400 and a code naming what is wrong.
func TestAdminBadInputGetsItsCode(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env)
	sale := "admin-" + testenv.RandomHex(3)
	def := origintest.OpenSale(sale, 10, 600)
	o.MustCreateSale(t, def)
	defJSON, _ := json.Marshal(def)

	for _, c := range []struct {
		name  string
		token string
		req   origintest.Request
	}{
		{"create sale, no token", "", origintest.Request{Method: "POST", Path: "/admin/sales", Body: defJSON}},
		{"create sale, wrong token", "wrong-admin-token-0123456789abcd", origintest.Request{Method: "POST", Path: "/admin/sales", Body: defJSON}},
		{"create sale, token prefix", origintest.AdminToken[:16], origintest.Request{Method: "POST", Path: "/admin/sales", Body: defJSON}},
		{"ledger, no token", "", origintest.Request{Method: "GET", Path: "/admin/sales/" + sale + "/ledger"}},
		{"metrics, no token", "", origintest.Request{Method: "GET", Path: "/metrics"}},
		{"dev token, no token", "", origintest.Request{Method: "POST", Path: "/admin/dev/admission-token", Body: []byte(`{"sale_id":"` + sale + `","user_id":"u"}`)}},
		// Authenticated before routed: an outsider cannot map the routes by 404 and 405.
		{"unknown path, no token", "", origintest.Request{Method: "GET", Path: "/admin/no-such-route"}},
		{"wrong method, no token", "", origintest.Request{Method: "DELETE", Path: "/admin/sales"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Token = c.token
			status, body := o.DoAdmin(t, c.req)
			if code := origintest.ErrorCode(body); status != 401 || code != "unauthorized" {
				t.Errorf("%s %s = %d %s, want 401 unauthorized", c.req.Method, c.req.Path, status, body)
			}
		})
	}

	fresh := func(f func(*origintest.Sale)) []byte {
		s := origintest.OpenSale("new-"+testenv.RandomHex(3), 10, 600)
		f(&s)
		b, _ := json.Marshal(s)
		return b
	}
	manySKUs := make([]origintest.SKU, 101)
	for i := range manySKUs {
		manySKUs[i] = origintest.SKU{SKU: fmt.Sprintf("s%d", i), Name: "n", Currency: "INR", Stock: 1}
	}
	admin := func(method, path string, body []byte) origintest.Request {
		return origintest.Request{Method: method, Path: path, Token: origintest.AdminToken, Body: body}
	}
	createRaw := func(body string) origintest.Request { return admin("POST", "/admin/sales", []byte(body)) }
	create := func(f func(*origintest.Sale)) origintest.Request { return admin("POST", "/admin/sales", fresh(f)) }
	changed := def
	changed.SKUs = []origintest.SKU{{SKU: "sku-1", Name: "Phone", PriceMinor: 4999900, Currency: "INR", Stock: 11}}
	changedJSON, _ := json.Marshal(changed)

	for _, c := range []struct {
		name   string
		req    origintest.Request
		status int
		code   string
	}{
		{"bad sale id", create(func(s *origintest.Sale) { s.SaleID = "bad id" }), 400, "invalid_sale_id"},
		{"empty sale id", create(func(s *origintest.Sale) { s.SaleID = "" }), 400, "invalid_sale_id"},
		{"long sale id", create(func(s *origintest.Sale) { s.SaleID = strings.Repeat("s", 65) }), 400, "invalid_sale_id"},
		{"empty name", create(func(s *origintest.Sale) { s.Name = "" }), 400, "invalid_name"},
		{"long name", create(func(s *origintest.Sale) { s.Name = strings.Repeat("n", 201) }), 400, "invalid_name"},
		{"nul in name", create(func(s *origintest.Sale) { s.Name = "a\x00b" }), 400, "invalid_name"},
		{"nul in sku name", create(func(s *origintest.Sale) { s.SKUs[0].Name = "a\x00b" }), 400, "invalid_name"},
		{"ends before it starts", create(func(s *origintest.Sale) { s.EndsAt = s.StartsAt.Add(-time.Second) }), 400, "invalid_window"},
		{"no start", create(func(s *origintest.Sale) { s.StartsAt = time.Time{} }), 400, "invalid_window"},
		{"negative hold ttl", create(func(s *origintest.Sale) { s.HoldTTLSeconds = -1 }), 400, "invalid_hold_ttl"},
		{"hold ttl over a day", create(func(s *origintest.Sale) { s.HoldTTLSeconds = 86401 }), 400, "invalid_hold_ttl"},
		{"limit of two", create(func(s *origintest.Sale) { s.PerAccountLimit = 2 }), 400, "invalid_per_account_limit"},
		{"no skus", create(func(s *origintest.Sale) { s.SKUs = nil }), 400, "invalid_skus"},
		{"101 skus", create(func(s *origintest.Sale) { s.SKUs = manySKUs }), 400, "invalid_skus"},
		{"bad sku", create(func(s *origintest.Sale) { s.SKUs[0].SKU = "sku/1" }), 400, "invalid_sku"},
		{"duplicate sku", create(func(s *origintest.Sale) { s.SKUs = append(s.SKUs, s.SKUs[0]) }), 400, "duplicate_sku"},
		{"sku without name", create(func(s *origintest.Sale) { s.SKUs[0].Name = "" }), 400, "invalid_name"},
		{"negative price", create(func(s *origintest.Sale) { s.SKUs[0].PriceMinor = -1 }), 400, "invalid_price"},
		{"lower-case currency", create(func(s *origintest.Sale) { s.SKUs[0].Currency = "inr" }), 400, "invalid_currency"},
		{"negative stock", create(func(s *origintest.Sale) { s.SKUs[0].Stock = -1 }), 400, "invalid_stock"},
		{"too much stock", create(func(s *origintest.Sale) { s.SKUs[0].Stock = 10_000_001 }), 400, "invalid_stock"},
		{"hold ttl as a string", createRaw(`{"sale_id":"x1","name":"n","hold_ttl_s":"60"}`), 400, "invalid_field"},
		{"huge number", createRaw(`{"sale_id":"x2","name":"n","hold_ttl_s":1e30}`), 400, "invalid_field"},
		{"fractional stock", createRaw(`{"sale_id":"x3","name":"n","skus":[{"sku":"a","stock":1.5}]}`), 400, "invalid_field"},
		{"unparseable time", createRaw(`{"sale_id":"x4","name":"n","starts_at":"yesterday"}`), 400, "invalid_json"},
		{"unknown field", createRaw(`{"sale_id":"x5","name":"n","discount":10}`), 400, "unknown_field"},
		{"payer rule as a string", createRaw(`{"sale_id":"x6","name":"n","one_unit_per_payer":"yes"}`), 400, "invalid_field"},
		{"malformed json", createRaw(`{"sale_id":`), 400, "invalid_json"},
		{"wrong content type", origintest.Request{Method: "POST", Path: "/admin/sales", Token: origintest.AdminToken, ContentType: "text/plain", Body: defJSON}, 415, "unsupported_media_type"},
		{"over the handler's 1 MiB", createRaw(`{"name":"` + strings.Repeat("n", 1<<20) + `"}`), 413, "body_too_large"},
		{"different sale, same id", admin("POST", "/admin/sales", changedJSON), 409, "sale_exists"},
		{"ledger of an unknown sale", admin("GET", "/admin/sales/no-such-sale/ledger", nil), 404, "unknown_sale"},
		{"ledger of a bad id", admin("GET", "/admin/sales/bad%20id/ledger", nil), 404, "unknown_sale"},
		{"dev token, unknown sale", admin("POST", "/admin/dev/admission-token", []byte(`{"sale_id":"no-such-sale","user_id":"u"}`)), 404, "unknown_sale"},
		{"dev token, bad user id", admin("POST", "/admin/dev/admission-token", []byte(`{"sale_id":"`+sale+`","user_id":"u 1"}`)), 400, "invalid_user_id"},
		{"dev token, bad sale id", admin("POST", "/admin/dev/admission-token", []byte(`{"sale_id":"a b","user_id":"u"}`)), 400, "invalid_sale_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := o.DoAdmin(t, c.req)
			if code := origintest.ErrorCode(body); status != c.status || code != c.code {
				t.Errorf("%s %s = %d %s, want %d %s", c.req.Method, c.req.Path, status, body, c.status, c.code)
			}
		})
	}

	t.Run("same definition again", func(t *testing.T) {
		status, body := o.DoAdmin(t, admin("POST", "/admin/sales", defJSON))
		var got origintest.Sale
		if err := json.Unmarshal(body, &got); status != 200 || err != nil || got.SaleID != sale || len(got.SKUs) != 1 || got.SKUs[0].Stock != 10 {
			t.Errorf("POST /admin/sales (repeat) = %d %s, want 200 with the sale", status, body)
		}
		if l := o.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: 10}) || l.DB != (origintest.Counts{Available: 10}) {
			t.Errorf("ledger after a repeated create = %+v, want 10 available on both sides", l)
		}
	})
	t.Run("over the server limit", func(t *testing.T) {
		raw := fmt.Sprintf("POST /admin/sales HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			origintest.AdminToken, origintest.MaxAdminRequestBody+1)
		status, body := origintest.RawRequest(t, o.AdminLn, []byte(raw))
		if code := origintest.ErrorCode(body); status != 413 || code != "body_too_large" {
			t.Errorf("POST /admin/sales with %d bytes = %d %s, want 413 body_too_large", origintest.MaxAdminRequestBody+1, status, body)
		}
	})
	// The admin token opens the admin routes.
	if status, body := o.DoAdmin(t, admin("GET", "/metrics", nil)); status != 200 || !strings.Contains(string(body), "flashgate_reserves_total") && !strings.Contains(string(body), "flashgate_origin_request_seconds") {
		t.Errorf("GET /metrics with the admin token = %d, want 200 with flashgate metrics", status)
	}
	if tok := o.DevAdmissionToken(t, sale, "dev-user"); tok == "" {
		t.Errorf("DevAdmissionToken = empty")
	}
}

// The dev admission-token endpoint exists only in dev mode.
func TestDevEndpointOnlyInDevMode(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env, func(c *app.Config) { c.Dev, c.UserTokenSecret = false, c.DevUserTokenSecret })
	sale := "nodev-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	status, body := o.DoAdmin(t, origintest.Request{Method: "POST", Path: "/admin/dev/admission-token", Token: origintest.AdminToken,
		Body: []byte(`{"sale_id":"` + sale + `","user_id":"u"}`)})
	if code := origintest.ErrorCode(body); status != 404 || code != "not_found" {
		t.Errorf("POST /admin/dev/admission-token without dev mode = %d %s, want 404 not_found", status, body)
	}
}
