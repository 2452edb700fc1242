package testenv

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// LoopbackOnly reports an error unless rawURL names a service on this
// machine (a loopback address, localhost, or a Unix socket folder):
// benchmarks load what they touch hard and must never be pointed elsewhere
// by accident.
func LoopbackOnly(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	host := u.Hostname()
	if h := u.Query().Get("host"); h != "" && host == "" {
		host = h // libpq style: postgres:///db?host=/run/postgresql
	}
	switch {
	case host == "localhost", strings.HasPrefix(host, "/"):
		return nil
	case host != "":
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%s://%s: benchmarks run against loopback services only", u.Scheme, u.Host)
}
