package app_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// TestPaymentRouteLimits: creating orders and reading orders and
// reservations are limited per account at the edge (reads share one
// budget); the limited request never reaches origin, and another account
// still gets through.
func TestPaymentRouteLimits(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.LimitOrderAccount, cfg.LimitOrderReadAccount = "2-M", "3-M"
	n := edgetest.NewNode(t, cfg)
	alice, bob := edgetest.UserToken(t, "alice"), edgetest.UserToken(t, "bob")

	passes := func(what string, r edgetest.Request) {
		t.Helper()
		before := origin.Count()
		if res := n.Do(t, r); res.Status == fasthttp.StatusTooManyRequests || origin.Count() != before+1 {
			t.Errorf("%s = %d %s, origin reached %d times; want it passed to origin once", what, res.Status, res.Body, origin.Count()-before)
		}
	}
	limited := func(what string, r edgetest.Request) {
		t.Helper()
		before := origin.Count()
		if res := n.Do(t, r); res.Status != fasthttp.StatusTooManyRequests || res.ErrorCode() != "rate_limited" || res.Get("Retry-After") == "" {
			t.Errorf("%s = %d %s (Retry-After %q), want 429 rate_limited with Retry-After", what, res.Status, res.Body, res.Get("Retry-After"))
		}
		if origin.Count() != before {
			t.Errorf("%s reached origin, want it turned away at the edge", what)
		}
	}
	order := func(user string) edgetest.Request {
		return edgetest.Request{Method: "POST", Path: "/v1/orders", Token: user, Body: []byte(`{"reservation_id":"r1","idempotency_key":"o1"}`)}
	}
	passes("alice's first order", order(alice))
	passes("alice's second order", order(alice))
	limited("alice's third order", order(alice))
	passes("bob's first order", order(bob))

	readOrder := edgetest.Request{Method: "GET", Path: "/v1/orders/o1", Token: alice}
	readReservation := edgetest.Request{Method: "GET", Path: "/v1/reservations/r1", Token: alice}
	passes("alice's first order read", readOrder)
	passes("alice's first reservation read", readReservation)
	passes("alice's second order read", readOrder)
	limited("alice's fourth read (a reservation)", readReservation)
	limited("alice's fifth read (an order)", readOrder)
	passes("bob's reservation read", edgetest.Request{Method: "GET", Path: "/v1/reservations/r2", Token: bob})
}

// TestWebhookBounds: with an allow-list, a webhook from a client address
// outside it (the peer, or behind a trusted proxy the address it names) is
// answered 403 address_not_allowed without reaching origin; inside it,
// webhooks are limited per address and a body beyond the bound is 413
// body_too_large, neither reaching origin.
func TestWebhookBounds(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.TrustedProxies = "10.0.0.0/8"
	cfg.WebhookAllow = "203.0.113.0/28, 2001:db8:77::/48"
	cfg.LimitWebhookIP = "2-M"
	cfg.WebhookMaxBodyBytes = 1024
	n := edgetest.NewNode(t, cfg)
	event := []byte(`{"id":"evt_1","type":"payment.succeeded"}`)

	for _, tc := range []struct {
		name, peer, xff string
		body            []byte
		status          int
		code            string
	}{
		{"gateway", "203.0.113.5", "", event, fasthttp.StatusNotFound, "not_found"}, // the stub origin's answer
		{"gateway over IPv6", "2001:db8:77:1::9", "", event, fasthttp.StatusNotFound, "not_found"},
		{"gateway behind a trusted proxy", "10.1.1.1", "203.0.113.6", event, fasthttp.StatusNotFound, "not_found"},
		{"outsider", "198.51.100.7", "", event, fasthttp.StatusForbidden, "address_not_allowed"},
		{"outsider claiming the gateway's address", "198.51.100.7", "203.0.113.5", event, fasthttp.StatusForbidden, "address_not_allowed"},
		{"outsider behind a trusted proxy", "10.1.1.1", "198.51.100.7", event, fasthttp.StatusForbidden, "address_not_allowed"},
		{"outsider next to the range", "203.0.113.16", "", event, fasthttp.StatusForbidden, "address_not_allowed"},
		{"no address behind a trusted proxy", "10.1.1.1", "unknown", event, fasthttp.StatusForbidden, "address_not_allowed"},
		{"gateway, second webhook", "203.0.113.5", "", event, fasthttp.StatusNotFound, "not_found"},
		{"gateway, third webhook in a minute", "203.0.113.5", "", event, fasthttp.StatusTooManyRequests, "rate_limited"},
		{"gateway, body too large", "203.0.113.7", "", bytes.Repeat([]byte("x"), 1025), fasthttp.StatusRequestEntityTooLarge, "body_too_large"},
		{"gateway, body at the bound", "203.0.113.7", "", bytes.Repeat([]byte("x"), 1024), fasthttp.StatusNotFound, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h map[string]string
			if tc.xff != "" {
				h = map[string]string{"X-Forwarded-For": tc.xff}
			}
			before := origin.CountMatching("POST", "/v1/payments/webhook")
			res := n.Client(tc.peer).Do(t, edgetest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: tc.body, Header: h})
			if res.Status != tc.status || res.ErrorCode() != tc.code {
				t.Errorf("webhook from %s (X-Forwarded-For %q) = %d %s, want %d %s", tc.peer, tc.xff, res.Status, res.Body, tc.status, tc.code)
			}
			reached := origin.CountMatching("POST", "/v1/payments/webhook") - before
			if want := map[bool]int{true: 1, false: 0}[tc.status == fasthttp.StatusNotFound]; reached != want {
				t.Errorf("origin saw the webhook %d times, want %d", reached, want)
			}
		})
	}
}

// TestWebhookDefaults: without an allow-list any address may send
// webhooks, and a body beyond 64 KiB is 413 body_too_large.
func TestWebhookDefaults(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	n := edgetest.NewNode(t, edgetest.Config(edgetest.NewRedis(t), origin.URL))
	for _, tc := range []struct {
		size   int
		status int
	}{{64 << 10, fasthttp.StatusNotFound}, {64<<10 + 1, fasthttp.StatusRequestEntityTooLarge}} {
		res := n.Client("198.51.100.7").Do(t, edgetest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: bytes.Repeat([]byte("x"), tc.size)})
		if res.Status != tc.status {
			t.Errorf("webhook of %d bytes = %d %s, want %d", tc.size, res.Status, res.Body, tc.status)
		}
	}
	if got := origin.CountMatching("POST", "/v1/payments/webhook"); got != 1 {
		t.Errorf("origin saw %d webhooks, want 1 (the one within the bound)", got)
	}
}

// TestAddressLimitsByIPv6Prefix: per-address limits count an IPv6 client
// by its /64, so addresses of one /64 share a budget; another /64, or an
// IPv4 address, has its own.
func TestAddressLimitsByIPv6Prefix(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "v6"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.LimitJoinIP = "2-M"
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	for i, tc := range []struct {
		peer   string
		status int
	}{
		{"2001:db8:1:2::1", fasthttp.StatusAccepted},
		{"2001:db8:1:2:ffff::2", fasthttp.StatusAccepted},
		{"2001:db8:1:2:abcd:1:2:3", fasthttp.StatusTooManyRequests}, // the /64's third join
		{"2001:db8:1:3::1", fasthttp.StatusAccepted},
		{"192.0.2.55", fasthttp.StatusAccepted},
	} {
		if res, _ := n.Client(tc.peer).Join(t, sale, fmt.Sprintf("v6-shopper-%d", i)); res.Status != tc.status {
			t.Errorf("join %d from %s = %d %s, want %d", i+1, tc.peer, res.Status, res.Body, tc.status)
		}
	}
}

// TestAddressLimitNeverKeyedOnAName: behind a trusted proxy, an
// X-Forwarded-For hop that is not an address is never a limit's key, so a
// client that can put one there cannot take a fresh budget per request:
// the key is the trusted proxy that wrote it. A client the proxy names by
// its address keeps a budget of its own.
func TestAddressLimitNeverKeyedOnAName(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "no-names"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.TrustedProxies = "10.0.0.0/8"
	cfg.LimitJoinIP = "2-M"
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	proxy := n.Client("10.0.0.1")
	for i, tc := range []struct {
		xff    string
		status int
	}{
		{"unknown", fasthttp.StatusAccepted},
		{"client-1", fasthttp.StatusAccepted},
		{"client-2", fasthttp.StatusTooManyRequests}, // the proxy's third join
		{"198.51.100.4, client-3", fasthttp.StatusTooManyRequests},
		{"198.51.100.4", fasthttp.StatusAccepted}, // an address: its own budget
	} {
		res := proxy.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue",
			Token: edgetest.UserToken(t, fmt.Sprintf("named-%d", i)), Header: map[string]string{"X-Forwarded-For": tc.xff}})
		if res.Status != tc.status {
			t.Errorf("join %d behind the proxy, X-Forwarded-For %q = %d %s, want %d", i+1, tc.xff, res.Status, res.Body, tc.status)
		}
	}
}

// TestAccountLimitFirst: a request over its account's limit is refused
// before it counts against its address, so one account hammering from a
// shared address does not use up the address's budget for the others.
func TestAccountLimitFirst(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "acct-first"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.LimitJoinAccount, cfg.LimitJoinIP = "1-M", "2-M"
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	office := n.Client("198.51.100.20")
	if res, _ := office.Join(t, sale, "hammer"); res.Status != fasthttp.StatusAccepted {
		t.Fatalf("first join of hammer = %d %s, want 202", res.Status, res.Body)
	}
	for i := range 3 {
		if res, _ := office.Join(t, sale, "hammer"); res.Status != fasthttp.StatusTooManyRequests {
			t.Fatalf("join %d of hammer = %d %s, want 429", i+2, res.Status, res.Body)
		}
	}
	if res, _ := office.Join(t, sale, "colleague"); res.Status != fasthttp.StatusAccepted {
		t.Errorf("a colleague's join from the same address = %d %s, want 202: the refused joins must not count against the address", res.Status, res.Body)
	}
}

// TestLimitKeysBounded: a flood of status polls from distinct addresses
// (behind a trusted proxy) leaves the per-address limit holding no more
// than FLASHGATE_LIMIT_MAX_KEYS keys: the rest were forgotten, as
// flashgate_edge_limit_keys_evicted_total counts.
func TestLimitKeysBounded(t *testing.T) {
	t.Parallel()
	origin := edgetest.NewStubOrigin(t)
	const sale = "flood"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(t), origin.URL)
	cfg.TrustedProxies = "10.0.0.0/8"
	cfg.LimitPollIP, cfg.LimitMaxKeys = "100-H", 500
	n := edgetest.StartNode(t, cfg)
	n.WaitSale(t, sale)
	res, joined := n.Join(t, sale, "flooder")
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join = %d %s", res.Status, res.Body)
	}
	proxy, user := n.Client("10.0.0.1"), edgetest.Owner(t, joined.QueueToken)
	const flood = 3000
	for i := range flood {
		res := proxy.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale + "/queue/status", Token: joined.QueueToken, User: user,
			Header: map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:%x:%x::1", i>>8, i&0xff)}})
		if res.Status != fasthttp.StatusOK {
			t.Fatalf("poll %d = %d %s, want 200", i+1, res.Status, res.Body)
		}
	}
	metrics := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
	m := regexp.MustCompile(`(?m)^flashgate_edge_limit_keys_evicted_total\{limit="poll_ip"\} (\d+)$`).FindSubmatch(metrics.Body)
	if m == nil {
		t.Fatalf("/metrics has no flashgate_edge_limit_keys_evicted_total for poll_ip:\n%s", metrics.Body)
	}
	if evicted, _ := strconv.Atoi(string(m[1])); evicted != flood-cfg.LimitMaxKeys {
		t.Errorf("poll_ip keys evicted = %d, want %d: %d distinct /64s into a limit that holds %d", evicted, flood-cfg.LimitMaxKeys, flood, cfg.LimitMaxKeys)
	}
}
