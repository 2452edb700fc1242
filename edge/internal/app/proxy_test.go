package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
)

// TestShopProxyHygiene: a request to a shop path reaches the shop without
// the client's forwarding headers (CDNs' client-address headers such as
// True-Client-IP among them), hop-by-hop headers or the headers its
// Connection header names, with X-Forwarded-For set to the client address
// as the edge trusts it (the peer, or behind a trusted proxy the right-most
// untrusted X-Forwarded-For hop); X-Forwarded-Host and -Proto as a trusted
// proxy sent them when well-formed, else the configured public host and
// the edge's own scheme, never the client's Host; and with everything else
// intact. The answer carries the edge's Server header, not the shop's.
func TestShopProxyHygiene(t *testing.T) {
	t.Parallel()
	shop := edgetest.NewShop(t)
	cfg := edgetest.Config(edgetest.NewRedis(t), edgetest.NewStubOrigin(t).URL)
	cfg.ShopURL = shop.URL
	cfg.TrustedProxies = "10.0.0.0/8"
	cfg.PublicHost = "sale.example.com"
	n := edgetest.NewNode(t, cfg)

	spoofed := map[string]string{
		"X-Forwarded-For":     "6.6.6.6",
		"Forwarded":           "for=6.6.6.6;proto=https",
		"X-Real-Ip":           "6.6.6.6",
		"True-Client-IP":      "6.6.6.6",
		"CF-Connecting-IP":    "6.6.6.6",
		"X-Client-IP":         "6.6.6.6",
		"Fastly-Client-IP":    "6.6.6.6",
		"X-Cluster-Client-IP": "6.6.6.6",
		"X-Forwarded-Proto":   "https",
		"X-Forwarded-Host":    "evil.example",
		"Connection":          "keep-alive, X-Hop-Secret",
		"X-Hop-Secret":        "must not pass",
		"Keep-Alive":          "timeout=5",
		"Proxy-Authorization": "Basic c2VjcmV0",
		"Te":                  "trailers",
		"X-Shop-Session":      "abc123",
	}
	cases := []struct {
		name, peer string
		header     map[string]string // over spoofed
		wantXFF    string
		wantHost   string // X-Forwarded-Host
		wantProto  string // X-Forwarded-Proto
	}{
		{"untrusted peer", "203.0.113.7", map[string]string{"X-Forwarded-For": "6.6.6.6"},
			"203.0.113.7", "sale.example.com", "http"},
		{"trusted proxy", "10.1.2.3", map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.9, 10.0.0.7", "X-Forwarded-Host": "shop.example.com"},
			"198.51.100.9", "shop.example.com", "https"},
		{"trusted proxy, malformed", "10.1.2.3", map[string]string{"X-Forwarded-For": "198.51.100.9",
			"X-Forwarded-Host": "shop.example.com\\evil.example", "X-Forwarded-Proto": "javascript"},
			"198.51.100.9", "sale.example.com", "http"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			for k, v := range spoofed {
				h[k] = v
			}
			for k, v := range tc.header {
				h[k] = v
			}
			before := shop.Count()
			res := n.Client(tc.peer).Do(t, edgetest.Request{Method: "POST", Path: "/cart/add?item=42", Body: []byte(`{"qty":1}`), Header: h})
			if res.Status != fasthttp.StatusOK || string(res.Body) != "shop ok" {
				t.Fatalf("POST /cart/add through the edge = %d %q, want 200 \"shop ok\"", res.Status, res.Body)
			}
			if s := res.Get("Server"); s != "flashgate-edge" {
				t.Errorf("the shop's answer through the edge has Server %q, want the edge's own, flashgate-edge", s)
			}
			reqs := shop.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("shop saw %d requests, want 1", len(reqs)-before)
			}
			got := reqs[before]
			if got.Method != "POST" || got.Path != "/cart/add?item=42" || string(got.Body) != `{"qty":1}` || got.Get("X-Shop-Session") != "abc123" {
				t.Errorf("shop got %s %s body %q session %q, want POST /cart/add?item=42 with the body and headers intact",
					got.Method, got.Path, got.Body, got.Get("X-Shop-Session"))
			}
			if xff := got.Header["x-forwarded-for"]; len(xff) != 1 || xff[0] != tc.wantXFF {
				t.Errorf("shop got X-Forwarded-For %q, want exactly %q", xff, tc.wantXFF)
			}
			if p := got.Header["x-forwarded-proto"]; len(p) != 1 || p[0] != tc.wantProto {
				t.Errorf("shop got X-Forwarded-Proto %q, want exactly %q", p, tc.wantProto)
			}
			if host := got.Header["x-forwarded-host"]; len(host) != 1 || host[0] != tc.wantHost {
				t.Errorf("shop got X-Forwarded-Host %q, want exactly %q", host, tc.wantHost)
			}
			if host, own := got.Get("Host"), strings.TrimPrefix(shop.URL, "http://"); host != own {
				t.Errorf("shop got Host %q, want its own, %s", host, own)
			}
			for _, name := range []string{"Forwarded", "X-Real-Ip", "True-Client-IP", "CF-Connecting-IP", "X-Client-IP", "Fastly-Client-IP",
				"X-Cluster-Client-IP", "X-Hop-Secret", "Keep-Alive", "Proxy-Authorization", "Te"} {
				if v, ok := got.Header[strings.ToLower(name)]; ok {
					t.Errorf("shop got %s: %q, want it stripped", name, v)
				}
			}
			if c := got.Get("Connection"); strings.Contains(strings.ToLower(c), "x-hop-secret") {
				t.Errorf("shop got Connection: %q, want the client's stripped", c)
			}
		})
	}
}

// TestRequestIDReachesTheOrigin: the edge sends every request it forwards
// with its request id in X-Request-Id — the shopper's (or CDN's) own when
// it sent a well-formed one, else one the edge made — so the origin's log
// line shows the id the edge answers with; an error answer carries the id
// in X-Request-Id and in its body.
func TestRequestIDReachesTheOrigin(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "ids"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.ShopURL = "http://" + httpreadtest.FreeAddr(t) // nothing listens: the shop is down
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	token, _, err := issuer.Admission(sale, "shopper", 1)
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(header map[string]string) edgetest.Recorded {
		t.Helper()
		before := origin.Count()
		res := n.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: token, User: edgetest.Owner(t, token),
			Body: reserveBody("sku-1", "k"), Header: header})
		reqs := origin.Requests()
		if res.Status != fasthttp.StatusCreated || len(reqs) <= before {
			t.Fatalf("reserve through the edge = %d %s, want the origin's 201", res.Status, res.Body)
		}
		// The node's line keeper may post to the origin meanwhile (its
		// ceilings); the reserve is the POST to the reserve path.
		for _, r := range reqs[before:] {
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/reserve") {
				return r
			}
		}
		t.Fatalf("the origin saw no reserve among %+v", reqs[before:])
		return edgetest.Recorded{}
	}
	if got := reserve(map[string]string{"X-Request-Id": "cdn-7f3a.1"}).Get("X-Request-Id"); got != "cdn-7f3a.1" {
		t.Errorf("origin got X-Request-Id %q, want the shopper's cdn-7f3a.1", got)
	}
	made := reserve(map[string]string{"X-Request-Id": `not "an" id`}).Get("X-Request-Id")
	if made == "" || strings.ContainsAny(made, `" `) {
		t.Errorf("origin got X-Request-Id %q for a malformed incoming id, want one the edge made", made)
	}

	res := n.Do(t, edgetest.Request{Method: "GET", Path: "/cart", Header: map[string]string{"X-Request-Id": "cdn-9"}})
	var body struct {
		Error     string `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil {
		t.Fatalf("answer with the shop down %q: %v", res.Body, err)
	}
	if res.Status != fasthttp.StatusServiceUnavailable || body.Error != "please_wait" || body.RequestID != "cdn-9" || res.Get("X-Request-Id") != "cdn-9" {
		t.Errorf("answer with the shop down = %d %s, X-Request-Id %q; want 503 please_wait with request id cdn-9 in both",
			res.Status, res.Body, res.Get("X-Request-Id"))
	}
}

// TestProxiedAnswersCarryTheEdgesServer: an answer the edge passes on from
// the shop or the origin carries the edge's Server header, as the edge's
// own answers do, never the upstream's (which names its software).
func TestProxiedAnswersCarryTheEdgesServer(t *testing.T) {
	t.Parallel()
	shop := edgetest.NewUpstream(t, func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Server", "shop-backend/2.1")
		ctx.SetBodyString("shop ok")
	})
	origin := edgetest.NewStubOrigin(t) // answers with fasthttp's own Server header
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.ShopURL = shop.URL
	n := edgetest.NewNode(t, cfg)
	for _, tc := range []struct {
		name string
		req  edgetest.Request
		from *edgetest.Upstream // nil: the edge answers itself
	}{
		{"the edge's own answer", edgetest.Request{Method: "GET", Path: "/healthz"}, nil},
		{"a shop page", edgetest.Request{Method: "GET", Path: "/cart"}, shop},
		{"the origin's answer to a webhook", edgetest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: []byte(`{}`)}, origin.Upstream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := 0
			if tc.from != nil {
				before = tc.from.Count()
			}
			res := n.Do(t, tc.req)
			if tc.from != nil && tc.from.Count() != before+1 {
				t.Fatalf("%s %s = %d %s without reaching its upstream", tc.req.Method, tc.req.Path, res.Status, res.Body)
			}
			if s := res.Get("Server"); s != "flashgate-edge" {
				t.Errorf("%s %s answered Server %q, want flashgate-edge", tc.req.Method, tc.req.Path, s)
			}
		})
	}
}
