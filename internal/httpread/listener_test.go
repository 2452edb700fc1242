package httpread_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
)

// socketBuffer is the send and receive buffer of both ends in these tests,
// so that what a client has written is, give or take slack, what the
// server has read (on loopback the kernel's buffers grow to megabytes).
const socketBuffer = 64 << 10

// slack is what the buffers between the client and the server may hold.
const slack = 512 << 10

// serveLingering serves, until the test ends, a server that takes bodies of
// up to 1 KiB, answers read failures 413 or 400 through ErrorHandler and
// closes idle connections after idle, on a NewListener with o.
func serveLingering(t *testing.T, o httpread.Lingering, idle time.Duration) (string, *httpread.ServerListener) {
	t.Helper()
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") },
		ErrorHandler: httpread.ErrorHandler(func(ctx *fasthttp.RequestCtx, f httpread.Failure) {
			if f == httpread.BodyTooLarge {
				ctx.SetStatusCode(http.StatusRequestEntityTooLarge)
				return
			}
			ctx.SetStatusCode(http.StatusBadRequest)
		}),
		MaxRequestBodySize: 1024,
		ReadTimeout:        idle,
		IdleTimeout:        idle,
		Logger:             log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := httpread.NewListener(smallBuffers{ln}, o)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Shutdown(ctx)
	})
	return ln.Addr().String(), l
}

// smallBuffers is a listener whose connections read through socketBuffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return c, c.(*net.TCPConn).SetReadBuffer(socketBuffer)
}

// refused starts a POST with a 1 GiB body on a new connection, reads its
// 413 and the end of what the server sends (it has closed or half-closed
// the connection), and returns the connection to send the body on.
func refused(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.(*net.TCPConn).SetWriteBuffer(socketBuffer); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	httpreadtest.RefusedTooLarge(t, c, 1<<30)
	return c
}

// send writes chunk on c, pausing after each write, until a write fails or
// 10 seconds have passed, and returns how much it wrote and the error.
func send(c net.Conn, chunk []byte, pause time.Duration) (int64, error) {
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	var n int64
	for {
		m, err := c.Write(chunk)
		n += int64(m)
		if err != nil {
			return n, err
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// cut fails t unless err is the server closing the connection.
func cut(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close the connection in 10 s")
	}
}

// TestLingeringBytes: a client that keeps sending after its 413 may send
// MaxBytes more, then the connection is closed.
func TestLingeringBytes(t *testing.T) {
	t.Parallel()
	const maxBytes = 1 << 20
	addr, _ := serveLingering(t, httpread.Lingering{MaxBytes: maxBytes, MaxTime: time.Minute}, 5*time.Second)
	n, err := send(refused(t, addr), make([]byte, 16<<10), 0)
	cut(t, err)
	if n < maxBytes || n > maxBytes+slack {
		t.Errorf("the client sent %d bytes after its answer, want %d (MaxBytes) to %d", n, maxBytes, maxBytes+slack)
	}
}

// TestLingeringTime: a client that keeps sending slowly after its 413 may
// do so for MaxTime, then the connection is closed.
func TestLingeringTime(t *testing.T) {
	t.Parallel()
	const maxTime = 300 * time.Millisecond
	addr, _ := serveLingering(t, httpread.Lingering{MaxBytes: 1 << 30, MaxTime: maxTime}, 5*time.Second)
	c := refused(t, addr)
	start := time.Now()
	_, err := send(c, make([]byte, 1024), 10*time.Millisecond)
	cut(t, err)
	// The server's clock starts a moment before the client's.
	if took := time.Since(start); took < maxTime/2 {
		t.Errorf("the connection was closed %v after the answer, want about %v (MaxTime)", took, maxTime)
	}
}

// TestLingeringMaxConnsAndShutdown: beyond MaxConns a connection closes at
// once; Shutdown closes those lingering when its context ends, and none
// lingers after it.
func TestLingeringMaxConnsAndShutdown(t *testing.T) {
	t.Parallel()
	addr, l := serveLingering(t, httpread.Lingering{MaxConns: 1, MaxTime: time.Minute}, 5*time.Second)
	lingering := refused(t, addr)

	n, err := send(refused(t, addr), make([]byte, 16<<10), 0)
	cut(t, err)
	if n > slack {
		t.Errorf("a connection beyond MaxConns took %d bytes after its answer, want it closed at once", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a connection lingering for a minute = %v, want it closed when the context ends", err)
	}
	_, err = send(lingering, make([]byte, 16<<10), 0)
	cut(t, err)

	n, err = send(refused(t, addr), make([]byte, 16<<10), 0)
	cut(t, err)
	if n > slack {
		t.Errorf("a connection answered after Shutdown took %d bytes after its answer, want it closed at once", n)
	}
}

// TestLingeringShutdownWaits: Shutdown returns once the lingering
// connections are closed by their clients.
func TestLingeringShutdownWaits(t *testing.T) {
	t.Parallel()
	addr, l := serveLingering(t, httpread.Lingering{MaxTime: time.Minute}, 5*time.Second)
	c := refused(t, addr)
	if _, err := c.Write(make([]byte, 1024)); err != nil {
		t.Fatalf("send after the answer: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- l.Shutdown(ctx)
	}()
	_ = c.Close()
	if err := <-done; err != nil {
		t.Errorf("Shutdown after the client closed = %v, want nil", err)
	}
}

// TestNoLingeringWhenNothingIsUnread: keep-alive requests are served as
// before, and neither an idle keep-alive connection nor a new one that
// carried nothing lingers when the server closes it.
func TestNoLingeringWhenNothingIsUnread(t *testing.T) {
	t.Parallel()
	const idle = 200 * time.Millisecond
	addr, l := serveLingering(t, httpread.Lingering{MaxTime: time.Minute}, idle)

	keptAlive, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer keptAlive.Close()
	_ = keptAlive.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(keptAlive)
	for i := range 3 {
		if _, err := io.WriteString(keptAlive, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to request %d on one connection: %v", i+1, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close || !bytes.Equal(body, []byte("ok")) {
			t.Fatalf("answer to request %d = %d %q close=%v, want 200 ok, kept alive", i+1, res.StatusCode, body, res.Close)
		}
	}

	empty, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	_ = empty.SetDeadline(time.Now().Add(10 * time.Second))

	// Both are closed after idle; the clients keep their ends open, so a
	// lingering close would last its minute.
	for name, r := range map[string]io.Reader{"the idle keep-alive connection": br, "the connection that carried nothing": empty} {
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Fatalf("%s: read %q, %v; want it closed without a word", name, rest, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nothing lingering", err)
	}
}
