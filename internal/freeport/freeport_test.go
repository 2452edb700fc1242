package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports are distinct, free (a server can bind each) and, on Linux, below
// the ephemeral range, where outgoing connections never land.
func TestPortsAreFreeAndOutsideTheEphemeralRange(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	first := ephemeralStart()
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if first > lowest && (p < lowest || p >= first) {
			t.Errorf("port %d outside [%d, %d)", p, lowest, first)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("bind port %d: %v", p, err)
			continue
		}
		ln.Close()
	}
}

// A port something else listens on is skipped: the next port this package
// would try is bound from outside it first.
func TestAddrSkipsATakenPort(t *testing.T) {
	if _, err := Addr(); err != nil { // sets the walk's start
		t.Fatal(err)
	}
	mu.Lock()
	taken := net.JoinHostPort("127.0.0.1", strconv.Itoa(next))
	mu.Unlock()
	if ln, err := net.Listen("tcp", taken); err == nil {
		defer ln.Close()
	} // else something else holds it already, which serves as well
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if addr == taken {
		t.Fatalf("Addr = %s, which another listener holds", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("Addr = %s, which cannot be bound: %v", addr, err)
	}
	ln.Close()
}

// A port handed out and closed again is not handed out again: two tests of
// one process never share a port between finding it and binding it.
func TestAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("Addr = %s a second time", addr)
		}
		seen[addr] = true
	}
}
