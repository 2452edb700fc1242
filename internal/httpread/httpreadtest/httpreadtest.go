// Package httpreadtest is one suite, run against the edge's and the
// origin's servers on real TCP listeners, of how a server treats what
// arrives before its handlers: idle and slow connections, large heads and
// heads that are not strict HTTP/1.x.
package httpreadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/httpread"
)

// Options describe the server under test.
type Options struct {
	// ReadTimeout is the server's read timeout; keep it short (a few
	// hundred milliseconds): the suite waits it out several times.
	ReadTimeout time.Duration
	// MaxHeadBytes is the server's request head limit.
	MaxHeadBytes int
	// Path answers GET with 200 without credentials, e.g. /healthz.
	Path string
}

// Serve serves srv on a new 127.0.0.1 TCP listener, through
// httpread.Listener as the binaries do, until the test ends, and returns
// the listener's address.
func Serve(t testing.TB, srv *fasthttp.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	served := httpread.Listener(ln)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(served)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shut down the test listener: %v", err)
		}
		<-done
		if err := served.Shutdown(ctx); err != nil {
			t.Errorf("finish the test listener's lingering closes: %v", err)
		}
	})
	return ln.Addr().String()
}

// Run runs the suite against the server at addr.
func Run(t *testing.T, addr string, o Options) {
	t.Run("a new connection that carries nothing is closed without an answer", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		_ = c.SetReadDeadline(time.Now().Add(o.ReadTimeout + 5*time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read an idle connection: %v (want the server to close it after %v)", err, o.ReadTimeout)
		}
		if len(got) != 0 {
			t.Errorf("the server wrote %q on a connection that carried no request, want nothing", got)
		}
	})

	t.Run("a keep-alive client's pooled connection that carried nothing", func(t *testing.T) {
		t.Parallel()
		pooledConnection(t, addr, o)
	})

	t.Run("a head cut off part-way is answered 408", func(t *testing.T) {
		t.Parallel()
		res := exchange(t, addr, "GET "+o.Path+" HTTP/1.1\r\nHost: flashgate.test\r\nAccept: */*\r\n", o.ReadTimeout)
		res.want(t, http.StatusRequestTimeout, "request_timeout")
		if !res.close {
			t.Errorf("a 408 keeps the connection open, want Connection: close")
		}
	})

	t.Run("a body cut off part-way is answered 408", func(t *testing.T) {
		t.Parallel()
		res := exchange(t, addr, "POST "+o.Path+" HTTP/1.1\r\nHost: flashgate.test\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"sku\":", o.ReadTimeout)
		res.want(t, http.StatusRequestTimeout, "request_timeout")
	})

	// A head just inside the limit: a shopper's cookies and tokens.
	t.Run("a head of the limit's size is served", func(t *testing.T) {
		t.Parallel()
		head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: flashgate.test\r\nCookie: %s\r\n\r\n", o.Path, cookies(o.MaxHeadBytes-len(o.Path)-128))
		exchange(t, addr, head, 0).want(t, http.StatusOK, "")
	})

	t.Run("a head over the limit is answered 431", func(t *testing.T) {
		t.Parallel()
		head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: flashgate.test\r\nCookie: %s\r\n\r\n", o.Path, cookies(o.MaxHeadBytes+1))
		exchange(t, addr, head, 0).want(t, http.StatusRequestHeaderFieldsTooLarge, "request_header_too_large")
	})

	for _, tc := range []struct {
		name   string
		head   string
		status int
		code   string
	}{
		{"HTTP/1.1", "GET {path} HTTP/1.1\r\nHost: flashgate.test\r\nX-Trace: a b\r\n\r\n", http.StatusOK, ""},
		{"HTTP/1.0", "GET {path} HTTP/1.0\r\n\r\n", http.StatusOK, ""},
		{"a header name with a space", "GET {path} HTTP/1.1\r\nHost: flashgate.test\r\nX Trace: 1\r\n\r\n", http.StatusBadRequest, "bad_request"},
		{"a header name with a tab", "GET {path} HTTP/1.1\r\nHost: flashgate.test\r\nX\tTrace: 1\r\n\r\n", http.StatusBadRequest, "bad_request"},
		{"HTTP/3.0", "GET {path} HTTP/3.0\r\nHost: flashgate.test\r\n\r\n", http.StatusBadRequest, "bad_request"},
		{"HTTP/1.2", "GET {path} HTTP/1.2\r\nHost: flashgate.test\r\n\r\n", http.StatusBadRequest, "bad_request"},
		{"a folded header", "GET {path} HTTP/1.1\r\nHost: flashgate.test\r\nX-Trace: 1\r\n 2\r\n\r\n", http.StatusBadRequest, "bad_request"},
		{"a header folded with a tab", "GET {path} HTTP/1.1\r\nHost: flashgate.test\r\nX-Trace: 1\r\n\t2\r\n\r\n", http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exchange(t, addr, strings.ReplaceAll(tc.head, "{path}", o.Path), 0).want(t, tc.status, tc.code)
		})
	}
}

// cookies returns a Cookie header value of n bytes, as a shop sets them.
func cookies(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "shop_c%d=%s; ", i, strings.Repeat("v", 60))
	}
	return b.String()[:n]
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type response struct {
	status int
	code   string // the error body's code; "" when there is none
	close  bool
	body   []byte
}

func (r response) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status || r.code != code {
		t.Errorf("answer = %d %q (%q), want %d %q", r.status, r.code, r.body, status, code)
	}
}

// exchange writes raw on a new connection and reads one response, waiting
// up to the server's read timeout readTimeout and then some.
func exchange(t *testing.T, addr, raw string, readTimeout time.Duration) response {
	t.Helper()
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(readTimeout + 10*time.Second))
	// The server may answer (431) before it has read it all.
	go func() { _, _ = io.WriteString(c, raw) }()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %.60q: %v", raw, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read the body of the answer to %.60q: %v", raw, err)
	}
	out := response{status: res.StatusCode, close: res.Close, body: body}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			out.code = fmt.Sprintf("(not JSON: %.60q)", body)
		} else {
			out.code = e.Error
		}
	}
	return out
}

// pooledConnection: a net/http client dials for a request that is then
// cancelled, so the transport keeps the new connection in its pool
// without having sent anything on it, as browsers' preconnects and CDNs'
// warm pools do. Whatever the server writes on it before the client's
// next request is an answer to nothing: net/http logs it as an
// unsolicited response, and a request written at that moment would get it
// as its answer. The server must only close it, and the client's next
// request must succeed.
func pooledConnection(t *testing.T, addr string, o Options) {
	var (
		mu     sync.Mutex
		pooled *recordingConn
	)
	dialed, release := make(chan struct{}), make(chan struct{})
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			first := pooled == nil
			if first {
				pooled = &recordingConn{Conn: c, answered: make(chan struct{})}
				c = pooled
			}
			mu.Unlock()
			if first {
				close(dialed)
				<-release
			}
			return c, nil
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "http://" + addr + o.Path

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	<-dialed
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request succeeded; the test needs it to leave its connection unused")
	}
	close(release) // the dial completes and the transport pools the connection

	select {
	case <-pooled.answered:
	case <-time.After(o.ReadTimeout + 5*time.Second):
		t.Fatalf("the server neither wrote nor closed a connection idle for %v", o.ReadTimeout+5*time.Second)
	}
	if got := pooled.got(); len(got) != 0 {
		t.Errorf("the server wrote %q on a pooled connection that carried no request, want nothing", got)
	}
	res, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s after the pooled connection was closed: %v", o.Path, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s after the pooled connection was closed = %d, want 200", o.Path, res.StatusCode)
	}
}

// recordingConn keeps what the server sent and closes answered at the
// first read that returns bytes or an error.
type recordingConn struct {
	net.Conn
	answered chan struct{}
	once     sync.Once
	mu       sync.Mutex
	read     []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	if n > 0 || err != nil {
		c.once.Do(func() { close(c.answered) })
	}
	return n, err
}

func (c *recordingConn) got() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.read...)
}

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago, for a server that opens its own listener.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// HoldRequest starts a POST to path at addr and stops half-way through its
// body once the server has read the head (it answers 100 Continue), so the
// server is busy with it and its drain waits; the test's end, or the
// returned function, lets it go.
func HoldRequest(t testing.TB, addr, path string) (release func()) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	release = func() { _ = c.Close() }
	t.Cleanup(release)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	head := "POST " + path + " HTTP/1.1\r\nHost: flashgate.test\r\nContent-Type: application/json\r\nContent-Length: 40\r\nExpect: 100-continue\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatalf("write: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("answer to a head with Expect: 100-continue = %q, %v; want 100 Continue", line, err)
	}
	if _, err := io.WriteString(c, `{"sku":`); err != nil {
		t.Fatalf("write: %v", err)
	}
	return release
}

// Status GETs url and returns the status code, or 0 when there is no
// answer (the listener is closed).
func Status(url string) int {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// WaitStatus polls url until it answers want, and fails t after within.
func WaitStatus(t testing.TB, url string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := Status(url)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %d for %v, want %d (0: no answer)", url, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RefusedTooLarge starts a POST on c whose head declares a body of length
// bytes, reads the answer — it must be 413 — and then the end of what the
// server sends (it has closed or half-closed the connection). The caller
// may go on sending the body on c to see what a lingering close takes.
func RefusedTooLarge(t testing.TB, c net.Conn, length int64) {
	t.Helper()
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", length)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("answer = %d, want 413", res.StatusCode)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the answer: %q, %v; want the end of the server's side", rest, err)
	}
}
