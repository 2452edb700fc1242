package app_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/app"
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
	const sale = "v6"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.LimitJoinIP = "2-M"
	})
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
	const sale = "no-names"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.TrustedProxies = "10.0.0.0/8"
		cfg.LimitJoinIP = "2-M"
	})
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
	const sale = "acct-first"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.LimitJoinAccount, cfg.LimitJoinIP = "1-M", "2-M"
	})
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
	const sale = "flood"
	const maxKeys = 500
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.TrustedProxies = "10.0.0.0/8"
		cfg.LimitPollIP, cfg.LimitMaxKeys = "100-H", maxKeys
	})
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
	if evicted, _ := strconv.Atoi(string(m[1])); evicted != flood-maxKeys {
		t.Errorf("poll_ip keys evicted = %d, want %d: %d distinct /64s into a limit that holds %d", evicted, flood-maxKeys, flood, maxKeys)
	}
}

// TestSubnetLimits: joins and status polls are limited per client network
// beside the per-address limits, counted from the client address a trusted
// proxy names in X-Forwarded-For: many addresses of one IPv4 /24, or of one
// IPv6 /48 (each address, each /64, well within its own budget) use up the
// network's budget and get 429 rate_limited with Retry-After, while an
// address of another /24 or /48 still gets through. The refusals are
// counted as join_subnet and poll_subnet, not as the per-address limits.
func TestSubnetLimits(t *testing.T) {
	t.Parallel()
	const sale = "subnets"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.TrustedProxies = "10.0.0.0/8"
		cfg.LimitJoinIP, cfg.LimitJoinSubnet = "2-M", "3-M"
		cfg.LimitPollIP, cfg.LimitPollSubnet = "2-M", "3-M" // a minute's period: no test run crosses a window
	})
	proxy := n.Client("10.0.0.1")
	res, joined := n.Join(t, sale, "poller") // from DefaultClientIP, outside every network below
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("the poller's join = %d %s, want 202", res.Status, res.Body)
	}
	poller := edgetest.Owner(t, joined.QueueToken)

	join := func(xff, account string) *edgetest.Response {
		return proxy.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue",
			Token: edgetest.UserToken(t, account), Header: map[string]string{"X-Forwarded-For": xff}})
	}
	poll := func(xff, _ string) *edgetest.Response {
		return proxy.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale + "/queue/status",
			Token: joined.QueueToken, User: poller, Header: map[string]string{"X-Forwarded-For": xff}})
	}
	for _, route := range []struct {
		name string
		do   func(xff, account string) *edgetest.Response
		ok   int
	}{{"join", join, fasthttp.StatusAccepted}, {"poll", poll, fasthttp.StatusOK}} {
		for _, fam := range []struct {
			name   string
			same   []string // addresses of one network: the first three use up its budget
			others []string // addresses of the networks beside it
		}{
			{"IPv4 /24", []string{"198.51.100.1", "198.51.100.77", "198.51.100.200", "198.51.100.254", "198.51.100.0"},
				[]string{"198.51.101.1", "198.51.99.255"}},
			{"IPv6 /48", []string{"2001:db8:aa:1::1", "2001:db8:aa:2::1", "2001:db8:aa:ffff::9", "2001:db8:aa:3::1", "2001:db8:aa:ffff:ffff:ffff:ffff:ffff"},
				[]string{"2001:db8:ab::1", "2001:db8:a9:ffff::1"}},
		} {
			t.Run(route.name+" "+fam.name, func(t *testing.T) {
				for i, a := range fam.same {
					res := route.do(a, route.name+"-"+a)
					switch {
					case i < 3 && res.Status != route.ok:
						t.Fatalf("%s %d from %s = %d %s, want %d", route.name, i+1, a, res.Status, res.Body, route.ok)
					case i >= 3 && (res.Status != fasthttp.StatusTooManyRequests || res.ErrorCode() != "rate_limited" || res.Get("Retry-After") == ""):
						t.Errorf("%s from %s, a fresh address of a network that used its budget = %d %s (Retry-After %q), want 429 rate_limited with Retry-After",
							route.name, a, res.Status, res.Body, res.Get("Retry-After"))
					}
				}
				for _, a := range fam.others {
					if res := route.do(a, route.name+"-"+a); res.Status != route.ok {
						t.Errorf("%s from %s, another network = %d %s, want %d", route.name, a, res.Status, res.Body, route.ok)
					}
				}
			})
		}
	}

	metrics := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/metrics"})
	for limit, want := range map[string]int{"join_subnet": 4, "poll_subnet": 4, "join_ip": 0, "poll_ip": 0} {
		m := regexp.MustCompile(`(?m)^flashgate_edge_limited_total\{limit="` + limit + `"\} (\d+)$`).FindSubmatch(metrics.Body)
		if m == nil {
			t.Errorf("/metrics has no flashgate_edge_limited_total for %s", limit)
			continue
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf(`flashgate_edge_limited_total{limit=%q} = %d, want %d`, limit, got, want)
		}
	}
	if m := regexp.MustCompile(`(?m)^flashgate_edge_rejections_total\{code="rate_limited"\} (\d+)$`).FindSubmatch(metrics.Body); m == nil || string(m[1]) != "8" {
		t.Errorf(`flashgate_edge_rejections_total{code="rate_limited"} = %q, want 8`, m)
	}
}

// TestSubnetLimitNeverKeyedOnAName: behind a trusted proxy, an
// X-Forwarded-For hop that is not an address never makes a subnet key of
// its own: the network counted is the trusted proxy's, which wrote it, so a
// client that can put names there gets no fresh budget per name. An
// address the proxy names still counts against its own network.
func TestSubnetLimitNeverKeyedOnAName(t *testing.T) {
	t.Parallel()
	const sale = "no-subnet-names"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.TrustedProxies = "10.0.0.0/8"
		cfg.LimitJoinSubnet = "2-M" // the per-address limit off: only the subnet limit counts
	})
	for i, tc := range []struct {
		peer, xff string
		status    int
	}{
		{"10.0.0.1", "unknown", fasthttp.StatusAccepted},
		{"10.0.0.2", "client-1", fasthttp.StatusAccepted},
		{"10.0.0.1", "client-2", fasthttp.StatusTooManyRequests}, // the proxies' /24's third join
		{"10.0.0.2", "198.51.100.4, client-3", fasthttp.StatusTooManyRequests},
		{"10.0.0.1", "2001:db8::1, _hidden", fasthttp.StatusTooManyRequests},
		{"10.0.0.1", "198.51.100.4", fasthttp.StatusAccepted}, // an address: its own network's budget
		{"10.0.0.1", "2001:db8::1", fasthttp.StatusAccepted},
	} {
		res := n.Client(tc.peer).Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue",
			Token: edgetest.UserToken(t, fmt.Sprintf("subnet-named-%d", i)), Header: map[string]string{"X-Forwarded-For": tc.xff}})
		if res.Status != tc.status {
			t.Errorf("join %d from proxy %s, X-Forwarded-For %q = %d %s, want %d", i+1, tc.peer, tc.xff, res.Status, res.Body, tc.status)
		}
	}
}

// TestAddressLimitBeforeSubnet: a join over its address's limit is refused
// before it counts against the address's network, so one address
// hammering does not use up the budget of its neighbours.
func TestAddressLimitBeforeSubnet(t *testing.T) {
	t.Parallel()
	const sale = "ip-first"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.LimitJoinIP, cfg.LimitJoinSubnet = "1-M", "3-M"
	})
	hammer := n.Client("198.51.100.20")
	for i := range 5 {
		want := fasthttp.StatusTooManyRequests
		if i == 0 {
			want = fasthttp.StatusAccepted
		}
		if res, _ := hammer.Join(t, sale, fmt.Sprintf("hammer-%d", i)); res.Status != want {
			t.Fatalf("join %d from 198.51.100.20 = %d %s, want %d", i+1, res.Status, res.Body, want)
		}
	}
	for _, a := range []string{"198.51.100.21", "198.51.100.22"} {
		if res, _ := n.Client(a).Join(t, sale, "neighbour-"+a); res.Status != fasthttp.StatusAccepted {
			t.Errorf("a neighbour's join from %s = %d %s, want 202: the refused joins must not count against the /24", a, res.Status, res.Body)
		}
	}
	if res, _ := n.Client("198.51.100.23").Join(t, sale, "third-neighbour"); res.Status != fasthttp.StatusTooManyRequests {
		t.Errorf("a third neighbour's join from 198.51.100.23 = %d %s, want 429: the /24 has had its 3", res.Status, res.Body)
	}
}

// TestRateLimitHeadersTightest: a join let through by several limits
// carries the X-RateLimit-* headers of the one with the least left: the
// address's while its network has more, the network's once it has less.
func TestRateLimitHeadersTightest(t *testing.T) {
	t.Parallel()
	const sale = "tightest"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.LimitJoinIP, cfg.LimitJoinSubnet, cfg.LimitJoinAccount = "3-M", "5-M", "10-M"
	})
	for i, tc := range []struct {
		peer, limit, remaining string
	}{
		{"198.51.100.1", "3", "2"}, // address 2 left, network 4, account 9
		{"198.51.100.1", "3", "1"}, // 1, 3, 8
		{"198.51.100.2", "3", "2"}, // 2, 2, 7: a tie goes to the first checked, the address
		{"198.51.100.3", "5", "1"}, // 2, 1, 6
		{"198.51.100.3", "5", "0"}, // 1, 0, 5
	} {
		res, _ := n.Client(tc.peer).Join(t, sale, "tight")
		if res.Status != fasthttp.StatusAccepted || res.Get("X-RateLimit-Limit") != tc.limit || res.Get("X-RateLimit-Remaining") != tc.remaining {
			t.Errorf("join %d from %s = %d (X-RateLimit-Limit %q, -Remaining %q), want 202 (%s, %s)",
				i+1, tc.peer, res.Status, res.Get("X-RateLimit-Limit"), res.Get("X-RateLimit-Remaining"), tc.limit, tc.remaining)
		}
	}
	res, _ := n.Client("198.51.100.4").Join(t, sale, "tight")
	if res.Status != fasthttp.StatusTooManyRequests || res.Get("X-RateLimit-Limit") != "5" || res.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("join 6 = %d (X-RateLimit-Limit %q, -Remaining %q), want 429 (5, 0): the network's budget is used",
			res.Status, res.Get("X-RateLimit-Limit"), res.Get("X-RateLimit-Remaining"))
	}
}

// TestSubnetLimitsOff: with the subnet settings empty no subnet limit
// applies: one /24 and one /48 each send more joins and polls than the
// default subnet budgets (1200 a minute, 300 a second) from many
// addresses, and all get through.
func TestSubnetLimitsOff(t *testing.T) {
	t.Parallel()
	const sale = "subnets-off"
	n := saleNode(t, sale, func(cfg *app.Config) {
		cfg.TrustedProxies = "10.0.0.0/8"
		cfg.LimitJoinIP, cfg.LimitPollIP = "100000-M", "100000-S" // checked, never reached
		cfg.LimitJoinSubnet, cfg.LimitPollSubnet = "", ""
	})
	res, joined := n.Join(t, sale, "poller")
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("the poller's join = %d %s, want 202", res.Status, res.Body)
	}
	proxy, poller := n.Client("10.0.0.1"), edgetest.Owner(t, joined.QueueToken)
	users := make([]string, 20) // accounts joining again get their place back, and count again
	for i := range users {
		users[i] = edgetest.UserToken(t, fmt.Sprintf("off-%d", i))
	}
	const joins, polls = 1250, 350
	for _, network := range []func(i int) string{
		func(i int) string { return fmt.Sprintf("198.51.100.%d", i%254+1) },
		func(i int) string { return fmt.Sprintf("2001:db8:aa:%x::1", i) },
	} {
		var refused atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 { // joins wait on Redis: eight at a time
			wg.Go(func() {
				for i := w; i < joins; i += 8 {
					if res := proxy.Do(t, edgetest.Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue",
						Token: users[i%len(users)], Header: map[string]string{"X-Forwarded-For": network(i)}}); res.Status != fasthttp.StatusAccepted && refused.Add(1) == 1 {
						t.Errorf("join %d from %s = %d %s, want 202", i+1, network(i), res.Status, res.Body)
					}
				}
			})
		}
		wg.Wait()
		if refused.Load() > 0 {
			t.Fatalf("%d of %d joins from one network refused, want none", refused.Load(), joins)
		}
		for i := range polls {
			if res := proxy.Do(t, edgetest.Request{Method: "GET", Path: "/v1/sales/" + sale + "/queue/status",
				Token: joined.QueueToken, User: poller, Header: map[string]string{"X-Forwarded-For": network(i)}}); res.Status != fasthttp.StatusOK {
				t.Fatalf("poll %d from %s = %d %s, want 200", i+1, network(i), res.Status, res.Body)
			}
		}
	}
}

// TestSubnetLimitDefaults: unless set, the subnet limits are ten times the
// per-address ones, so a shared network (a campus /24, a carrier NAT's
// pool) has room for ten addresses' worth of shoppers.
func TestSubnetLimitDefaults(t *testing.T) {
	c := app.DefaultConfig()
	for _, tc := range []struct{ name, subnet, ip, want string }{
		{"join", c.LimitJoinSubnet, c.LimitJoinIP, "1200-M"},
		{"poll", c.LimitPollSubnet, c.LimitPollIP, "300-S"},
	} {
		sub, err1 := limiter.NewRateFromFormatted(tc.subnet)
		ip, err2 := limiter.NewRateFromFormatted(tc.ip)
		if tc.subnet != tc.want || err1 != nil || err2 != nil || sub.Period != ip.Period || sub.Limit != 10*ip.Limit {
			t.Errorf("%s subnet limit = %q (per address %q), want %q: ten times the per-address limit", tc.name, tc.subnet, tc.ip, tc.want)
		}
	}
}
