package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread"
)

// TestNewServerExpectContinue: a request with Expect: 100-continue whose
// head already says how it will be refused (a declared body over the limit,
// a head that is not strict HTTP/1.x) gets that final answer at once, in the
// contract's shape, and is never told 100 Continue; one within the limit is
// told 100 Continue and served once its body arrives.
func TestNewServerExpectContinue(t *testing.T) {
	t.Parallel()
	const maxBody = 64
	srv := NewServer(func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString("got " + strconv.Itoa(len(ctx.PostBody())))
	}, ServerOptions{Name: "test", MaxHeadBytes: 4096, MaxBodyBytes: maxBody, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	addr := serveTCP(t, srv, nil)

	for _, tc := range []struct {
		name   string
		head   string // the request head; its body is sent only after 100 Continue
		body   string
		status int
		code   string // the error body's code, or the success body
	}{
		{"within the limit", "Content-Length: 10\r\nExpect: 100-continue\r\n", "0123456789", http.StatusOK, "got 10"},
		{"at the limit", "Content-Length: 64\r\nExpect: 100-continue\r\n", strings.Repeat("a", maxBody), http.StatusOK, "got 64"},
		{"over the limit", "Content-Length: 65\r\nExpect: 100-continue\r\n", strings.Repeat("a", maxBody+1), http.StatusRequestEntityTooLarge, "body_too_large"},
		{"far over the limit", "Content-Length: 1073741824\r\nExpect: 100-continue\r\n", "", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"expectation in capitals", "Content-Length: 65\r\nExpect: 100-Continue\r\n", "", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"over the limit, request id kept", "Content-Length: 65\r\nExpect: 100-continue\r\nX-Request-Id: cdn-abc.1\r\n", "", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"over the limit without Expect", "Content-Length: 65\r\n", "", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"head not strict", "Content-Length: 10\r\nExpect: 100-continue\r\nX Trace: 1\r\n", "0123456789", http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: flashgate.test\r\nContent-Type: application/json\r\n"+tc.head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read the answer to the head: %v (the server waits for a body it was not invited to?)", err)
			}
			if strings.HasPrefix(line, "HTTP/1.1 100 ") {
				if tc.status != http.StatusOK {
					t.Fatalf("answer to the head = %q, want %d at once without inviting the body", line, tc.status)
				}
				if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
					t.Fatalf("after 100 Continue: %q, %v; want the blank line", blank, err)
				}
				if _, err := io.WriteString(c, tc.body); err != nil {
					t.Fatal(err)
				}
				line, err = br.ReadString('\n')
				if err != nil {
					t.Fatalf("read the answer to the body: %v", err)
				}
			} else if tc.status == http.StatusOK {
				t.Fatalf("answer to the head = %q, want HTTP/1.1 100 Continue", line)
			}
			res, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line), br)), nil)
			if err != nil {
				t.Fatalf("read the final answer: %v", err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("read the final answer's body: %v", err)
			}
			if res.StatusCode != tc.status {
				t.Fatalf("answer = %d %q, want %d", res.StatusCode, body, tc.status)
			}
			if tc.status == http.StatusOK {
				if string(body) != tc.code {
					t.Errorf("body = %q, want %q", body, tc.code)
				}
				return
			}
			var e struct {
				Error     string `json:"error"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", body, err)
			}
			if e.Error != tc.code || e.Message == "" {
				t.Errorf("error body = %q, want code %q and a message", body, tc.code)
			}
			if id := res.Header.Get("X-Request-Id"); id == "" || id != e.RequestID {
				t.Errorf("X-Request-Id = %q, body's request_id = %q; want the same id in both", id, e.RequestID)
			}
			if want := "cdn-abc.1"; strings.Contains(tc.head, want) && e.RequestID != want {
				t.Errorf("request_id = %q, want the request's own %q", e.RequestID, want)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if !res.Close {
				t.Errorf("a refused expectation keeps the connection open, want Connection: close (the client may be sending its body)")
			}
		})
	}
}

// serveTCP serves srv on a new 127.0.0.1 listener, as Run does, until the
// test ends, and returns its address. accepted, when not nil, sets up each
// connection before the server has it.
func serveTCP(t *testing.T, srv *fasthttp.Server, accepted func(net.Conn) error) string {
	t.Helper()
	var ln net.Listener
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if accepted != nil {
		ln = setUp{ln, accepted}
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
		_ = srv.ShutdownWithContext(ctx)
		<-done
		if err := served.Shutdown(ctx); err != nil {
			t.Errorf("lingering closes at the test's end: %v", err)
		}
	})
	return ln.Addr().String()
}

// setUp is a listener that runs accepted on each connection.
type setUp struct {
	net.Listener
	accepted func(net.Conn) error
}

func (l setUp) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := l.accepted(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
