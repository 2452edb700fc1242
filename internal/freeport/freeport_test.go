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

// A port something listens on is never handed out.
func TestAddrSkipsATakenPort(t *testing.T) {
	held := map[string]bool{}
	for range 200 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if held[addr] {
			t.Fatalf("Addr = %s, which is held", addr)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("Addr = %s, which cannot be bound: %v", addr, err)
		}
		defer ln.Close()
		held[addr] = true
	}
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
