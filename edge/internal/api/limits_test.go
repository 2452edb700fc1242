package api

import (
	"net"
	"net/netip"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestAddressKey: per-address limits key a client by its IPv4 address, or
// by the /64 of its IPv6 address, whether it is the peer or, behind a
// trusted proxy, the address X-Forwarded-For names; a hop that is no
// address is its own key.
func TestAddressKey(t *testing.T) {
	s := &Server{opts: Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	tests := []struct {
		peer, xff, want string
	}{
		{"192.0.2.7", "", "192.0.2.7"},
		{"192.0.2.7", "2001:db8::1", "192.0.2.7"}, // an untrusted peer's X-Forwarded-For is not believed
		{"::ffff:192.0.2.7", "", "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", "", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::ffff", "", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "", "2001:db8:1:3::/64"},
		{"10.0.0.1", "2001:db8:9:9::1, 10.0.0.2", "2001:db8:9:9::/64"},
		{"10.0.0.1", "[2001:db8:9:a::1]:443", "2001:db8:9:a::/64"},
		{"10.0.0.1", "198.51.100.4:5000", "198.51.100.4"},
		{"10.0.0.1", "unknown", "unknown"},
		{"10.0.0.1", "", "10.0.0.1"},
	}
	for _, tt := range tests {
		var req fasthttp.Request
		if tt.xff != "" {
			req.Header.Set("X-Forwarded-For", tt.xff)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 1234}, nil)
		if got := s.addressKey(&ctx); got != tt.want {
			t.Errorf("addressKey(peer %s, X-Forwarded-For %q) = %q, want %q", tt.peer, tt.xff, got, tt.want)
		}
	}
}
