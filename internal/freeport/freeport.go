// Package freeport finds free 127.0.0.1 ports for servers that open their
// own listeners (tests' Redis servers and binaries), below the kernel's
// ephemeral range: a port the kernel hands out for bind(":0") is also one
// it hands out as the local port of any outgoing connection, so under load
// another test's Redis or HTTP client took one between the check and the
// server's bind. Ports below the range are only ever taken on purpose.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the first port tried: above the well-known and most services'
// fixed ports (make run's from 7000 on, 8080, Postgres, Redis).
const lowest = 20000

// Ports finds n distinct free ports, holding each until all are found.
// Another process may still take one before it is bound; starting a server
// on it then fails and says so.
func Ports(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := listen()
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Addr is one free port as a 127.0.0.1 address.
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// listen binds the next free port between lowest and the ephemeral range,
// or, where that range is unknown or there is no room below it, lets the
// kernel pick one. A process walks up from a random start and hands out no
// port again before it has walked the whole range: one a test was given,
// bound and closed is free again to the kernel, not to this package.
func listen() (net.Listener, error) {
	first := ephemeralStart()
	if first <= lowest {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		next = lowest + rand.IntN(first-lowest)
	}
	for range first - lowest {
		port := next
		if next++; next >= first {
			next = lowest
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

var (
	mu   sync.Mutex // guards next
	next int        // the next port to try; 0 until the first call
)

// ephemeralStart is the first port of Linux's ephemeral range (0 when it
// cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return first
}
