package delayproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// serveTCP listens on a free 127.0.0.1 port and runs handle for every
// connection until the test ends; it returns the address.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echoServer echoes every byte back.
func echoServer(t *testing.T) string {
	return serveTCP(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

func dialProxy(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends a line and times its echo.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) time.Duration {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := fmt.Fprintln(c, line); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if got != line+"\n" {
		t.Fatalf("echo = %q, want %q", got, line+"\n")
	}
	return time.Since(start)
}

// The delay applies per direction, can change on an open connection, and
// goes back to nothing.
func TestDelaysAndChangesWhileOpen(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dialProxy(t, p)

	if d := roundTrip(t, c, r, "fast"); d > 80*time.Millisecond {
		t.Errorf("round trip without delay = %v, want well under 80 ms", d)
	}
	p.SetDelay(Delay{Min: 60 * time.Millisecond, Max: 60 * time.Millisecond}, Delay{Min: 40 * time.Millisecond, Max: 50 * time.Millisecond})
	if d := roundTrip(t, c, r, "slow"); d < 100*time.Millisecond || d > time.Second {
		t.Errorf("round trip with 60 ms up and 40–50 ms down = %v, want 100 ms to 1 s", d)
	}
	p.SetDelay(Delay{}, Delay{})
	if d := roundTrip(t, c, r, "fast again"); d > 80*time.Millisecond {
		t.Errorf("round trip after the delay was lifted = %v, want well under 80 ms", d)
	}
}

// Chunks held back by random delays still arrive in the order sent.
func TestKeepsOrder(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetDelay(Delay{Max: 5 * time.Millisecond}, Delay{Max: 5 * time.Millisecond})
	c, r := dialProxy(t, p)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		for i := range 200 {
			fmt.Fprintln(c, i)
			if i%20 == 0 {
				time.Sleep(time.Millisecond) // separate chunks
			}
		}
	}()
	for i := range 200 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if want := fmt.Sprintln(i); line != want {
			t.Fatalf("line %d = %q, want %q", i, line, want)
		}
	}
}

// A target that goes away takes its clients' connections with it.
func TestClosesClientWhenTargetCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p, err := New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dialProxy(t, p)
	select {
	case server := <-accepted:
		server.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not dial the target")
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("read after the target closed = %v, want EOF", err)
	}
}

// namedServer answers every connection with its name and closes it.
func namedServer(t *testing.T, name string) string {
	return serveTCP(t, func(c net.Conn) { fmt.Fprintln(c, name) })
}

// The resolver is asked per connection: a target that moves is followed by
// the connections opened after the move, and one it cannot name is refused.
func TestFollowsAMovingTarget(t *testing.T) {
	first, second := namedServer(t, "first"), namedServer(t, "second")
	var target atomic.Value
	target.Store(first)
	p, err := Listen("127.0.0.1:0", func(context.Context) (string, error) {
		addr := target.Load().(string)
		if addr == "" {
			return "", errors.New("no primary")
		}
		return addr, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	read := func() (string, error) {
		c, r := dialProxy(t, p)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return r.ReadString('\n')
	}
	for _, step := range []struct{ target, want string }{{first, "first\n"}, {second, "second\n"}} {
		target.Store(step.target)
		if got, err := read(); err != nil || got != step.want {
			t.Errorf("read %q, %v; want %q from the target resolved now", got, err, step.want)
		}
	}
	target.Store("")
	if got, err := read(); err != io.EOF {
		t.Errorf("with nothing to resolve: read %q, %v; want the connection closed", got, err)
	}
}
