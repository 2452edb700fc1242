package api

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/limitstore"
	"github.com/flashgate/flashgate/edge/internal/proxy"
)

// TestAddressKey: per-address limits key a client by its IPv4 address, or
// by the /64 of its IPv6 address, whether it is the peer or, behind a
// trusted proxy, the address X-Forwarded-For names. A hop that is no
// address is never a key: the walk stops there, and the key is the trusted
// hop that wrote it (the peer when it is the last).
func TestAddressKey(t *testing.T) {
	s := &Server{opts: Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	tests := []struct {
		name, peer, xff, want string
	}{
		{"IPv4 peer", "192.0.2.7", "", "192.0.2.7"},
		{"untrusted peer's header", "192.0.2.7", "2001:db8::1", "192.0.2.7"},
		{"IPv4-mapped peer", "::ffff:192.0.2.7", "", "192.0.2.7"},
		{"IPv6 peer", "2001:db8:1:2:3:4:5:6", "", "2001:db8:1:2::/64"},
		{"IPv6 peer, same /64", "2001:db8:1:2::ffff", "", "2001:db8:1:2::/64"},
		{"IPv6 peer, next /64", "2001:db8:1:3::1", "", "2001:db8:1:3::/64"},
		{"right-most untrusted hop", "10.0.0.1", "2001:db8:9:9::1, 10.0.0.2", "2001:db8:9:9::/64"},
		{"IPv6 hop with a port", "10.0.0.1", "[2001:db8:9:a::1]:443", "2001:db8:9:a::/64"},
		{"IPv4 hop with a port", "10.0.0.1", "198.51.100.4:5000", "198.51.100.4"},
		{"hop with a zone", "10.0.0.1", "fe80::1%eth0", "fe80::/64"},
		{"no header", "10.0.0.1", "", "10.0.0.1"},
		{"every hop trusted", "10.0.0.1", "10.0.0.3, 10.0.0.2", "10.0.0.3"},
		{"a name", "10.0.0.1", "unknown", "10.0.0.1"},
		{"a name after an address", "10.0.0.1", "198.51.100.4, unknown", "10.0.0.1"},
		{"a name a trusted hop wrote", "10.0.0.1", "198.51.100.4, _hidden, 10.0.0.2", "10.0.0.2"},
		{"an empty entry", "10.0.0.1", "198.51.100.4, , 10.0.0.2", "10.0.0.2"},
		{"a trailing comma", "10.0.0.1", "198.51.100.4,", "10.0.0.1"},
		{"a name per request", "10.0.0.1", "client-8f3a", "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req fasthttp.Request
			if tt.xff != "" {
				req.Header.Set("X-Forwarded-For", tt.xff)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 1234}, nil)
			if got := s.addressKey(&ctx); got != tt.want {
				t.Errorf("addressKey(peer %s, X-Forwarded-For %q) = %q, want %q", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}

// TestSubnetKey: per-subnet limits key a client by the /24 of its IPv4
// address or the /48 of its IPv6 address, made of the same client address
// the per-address key is: behind a trusted proxy, X-Forwarded-For's
// right-most untrusted hop, and where the walk stops at a hop that is no
// address, the trusted hop that wrote it, never the hop itself.
func TestSubnetKey(t *testing.T) {
	s := &Server{opts: Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	tests := []struct {
		name, peer, xff, want string
	}{
		{"IPv4 peer", "192.0.2.7", "", "net:192.0.2.0/24"},
		{"IPv4 peer, same /24", "192.0.2.255", "", "net:192.0.2.0/24"},
		{"IPv4 peer, next /24", "192.0.3.1", "", "net:192.0.3.0/24"},
		{"IPv4-mapped peer", "::ffff:192.0.2.7", "", "net:192.0.2.0/24"},
		{"untrusted peer's header", "192.0.2.7", "198.51.100.4", "net:192.0.2.0/24"},
		{"IPv6 peer", "2001:db8:1:2:3:4:5:6", "", "net:2001:db8:1::/48"},
		{"IPv6 peer, another /64 of the /48", "2001:db8:1:ffff::1", "", "net:2001:db8:1::/48"},
		{"IPv6 peer, next /48", "2001:db8:2::1", "", "net:2001:db8:2::/48"},
		{"right-most untrusted hop", "10.0.0.1", "192.0.2.9, 198.51.100.4, 10.0.0.2", "net:198.51.100.0/24"},
		{"IPv6 hop with a port", "10.0.0.1", "[2001:db8:9:a::1]:443", "net:2001:db8:9::/48"},
		{"hop with a zone", "10.0.0.1", "fe80::1%eth0", "net:fe80::/48"},
		{"a name", "10.0.0.1", "unknown", "net:10.0.0.0/24"},
		{"a name after an address", "10.0.0.1", "198.51.100.4, client-8f3a", "net:10.0.0.0/24"},
		{"a name a trusted hop wrote", "10.0.0.1", "198.51.100.4, _hidden, 10.1.2.3", "net:10.1.2.0/24"},
		{"an empty entry", "10.0.0.1", "198.51.100.4, , 10.0.0.2", "net:10.0.0.0/24"},
	}
	l := limiter.New(limitstore.New(limitstore.Options{}), limiter.Rate{Period: time.Minute, Limit: 1})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req fasthttp.Request
			if tt.xff != "" {
				req.Header.Set("X-Forwarded-For", tt.xff)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 1234}, nil)
			a, _ := s.clientAddr(&ctx)
			if got := bySubnet(LimitJoinSubnet, l, a).key; got != tt.want {
				t.Errorf("subnet key(peer %s, X-Forwarded-For %q) = %q, want %q", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}

// TestSubnetCheckOnlyWhenSet: with no subnet limit the check is empty, its
// key never made.
func TestSubnetCheckOnlyWhenSet(t *testing.T) {
	if got := bySubnet(LimitJoinSubnet, nil, netip.MustParseAddr("192.0.2.7")); got != (limitCheck{}) {
		t.Errorf("bySubnet(no limiter) = %+v, want no check", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = bySubnet(LimitJoinSubnet, nil, netip.MustParseAddr("2001:db8::1")) }); n != 0 {
		t.Errorf("bySubnet(no limiter) allocates %v times, want 0", n)
	}
}

// TestForwarded: what the edge tells an upstream. The public host and the
// scheme are a trusted proxy's, when well-formed (the right-most entry,
// written by the nearest proxy); otherwise the configured public host (or
// none) and the edge's own listener's scheme, never the client's Host or
// its own X-Forwarded-Host and X-Forwarded-Proto.
func TestForwarded(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name, publicHost, peer string
		header                 map[string]string
		want                   proxy.Forwarded
	}{
		{"untrusted peer", "", "203.0.113.7",
			map[string]string{"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"},
			proxy.Forwarded{For: "203.0.113.7", Proto: "http"}},
		{"untrusted peer, public host configured", "sale.example.com", "203.0.113.7",
			map[string]string{"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"},
			proxy.Forwarded{For: "203.0.113.7", Host: "sale.example.com", Proto: "http"}},
		{"trusted proxy", "sale.example.com", "10.1.2.3",
			map[string]string{"X-Forwarded-For": "198.51.100.9", "X-Forwarded-Host": "shop.example.com:8443", "X-Forwarded-Proto": "HTTPS"},
			proxy.Forwarded{For: "198.51.100.9", Host: "shop.example.com:8443", Proto: "https"}},
		{"trusted proxy appending", "", "10.1.2.3",
			map[string]string{"X-Forwarded-For": "198.51.100.9", "X-Forwarded-Host": "evil.example, shop.example.com", "X-Forwarded-Proto": "https, http"},
			proxy.Forwarded{For: "198.51.100.9", Host: "shop.example.com", Proto: "http"}},
		{"trusted proxy naming nothing", "", "10.1.2.3", nil,
			proxy.Forwarded{For: "10.1.2.3", Proto: "http"}},
		{"trusted proxy, malformed", "sale.example.com", "10.1.2.3",
			map[string]string{"X-Forwarded-Host": "shop.example.com/login?next=evil", "X-Forwarded-Proto": "javascript"},
			proxy.Forwarded{For: "10.1.2.3", Host: "sale.example.com", Proto: "http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{opts: Options{TrustedProxies: trusted, PublicHost: tt.publicHost}}
			var req fasthttp.Request
			req.SetHost("client-chose-this.example")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 1234}, nil)
			if got := s.forwarded(&ctx); got != tt.want {
				t.Errorf("forwarded(peer %s, %v) = %+v, want %+v", tt.peer, tt.header, got, tt.want)
			}
		})
	}
}
