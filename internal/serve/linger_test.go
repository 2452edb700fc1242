package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// socketBuffer is the send and receive buffer of both ends in these tests.
// On loopback the kernel's buffers grow to hold a whole 2 MiB body, which
// then is sent before the server answers; across a network most of it is
// still on its way, which small buffers stand in for.
const socketBuffer = 16 << 10

// TestNewServerBodyTooLarge: a net/http client that sends a body far over
// the limit without waiting for 100 Continue (asked for or not) reads the
// 413 in the contract's shape, not a connection reset; requests within the
// limit on one keep-alive connection are served as before, on that
// connection.
func TestNewServerBodyTooLarge(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	srv := NewServer(func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString("got " + strconv.Itoa(len(ctx.PostBody())))
	}, ServerOptions{Name: "test", MaxHeadBytes: 4096, MaxBodyBytes: maxBody, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	url := "http://" + serveTCP(t, srv, smallBuffers) + "/upload"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return c, c.(*net.TCPConn).SetWriteBuffer(socketBuffer)
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	big := bytes.Repeat([]byte("a"), 2<<20)

	for _, tc := range []struct {
		name   string
		body   func() io.Reader
		expect bool // send Expect: 100-continue, and the body without waiting (the Transport's ExpectContinueTimeout is 0)
	}{
		{"with Content-Length", func() io.Reader { return bytes.NewReader(big) }, false},
		{"chunked", func() io.Reader { return io.MultiReader(bytes.NewReader(big)) }, false}, // no length net/http can see
		{"with Expect: 100-continue, not waiting", func() io.Reader { return bytes.NewReader(big) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A reset is a race the client loses often, not every time.
			for i := range 20 {
				req, err := http.NewRequest(http.MethodPost, url, tc.body())
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				if tc.expect {
					req.Header.Set("Expect", "100-continue")
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatalf("POST %d of 2 MiB: %v, want 413", i+1, err)
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("read the answer to POST %d: %v", i+1, err)
				}
				var e struct {
					Error     string `json:"error"`
					Message   string `json:"message"`
					RequestID string `json:"request_id"`
				}
				if res.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(body, &e) != nil || e.Error != "body_too_large" || e.Message == "" {
					t.Fatalf("POST %d of 2 MiB = %d %q, want 413 body_too_large in the contract's shape", i+1, res.StatusCode, body)
				}
				if !res.Close {
					t.Errorf("a 413 keeps the connection open, want Connection: close")
				}
			}
		})
	}

	t.Run("keep-alive within the limit", func(t *testing.T) {
		reused := 0
		for i := range 3 {
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			}}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, url, bytes.NewReader(big[:maxBody]))
			if err != nil {
				t.Fatal(err)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatalf("POST %d within the limit: %v", i+1, err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK || string(body) != "got 65536" {
				t.Fatalf("POST %d within the limit = %d %q, %v; want 200 got 65536", i+1, res.StatusCode, body, err)
			}
		}
		if reused != 2 {
			t.Errorf("%d of 3 requests reused a connection, want 2 (one keep-alive connection)", reused)
		}
	})
}

// smallBuffers gives c socketBuffer bytes of receive buffer.
func smallBuffers(c net.Conn) error { return c.(*net.TCPConn).SetReadBuffer(socketBuffer) }

// TestRunCutsLingeringAtItsBudget: a client that holds its connection open
// after a 413, which then lingers, holds Run up to its shutdown budget, not
// to the end of the lingering (5 seconds by default).
func TestRunCutsLingeringAtItsBudget(t *testing.T) {
	const budget = 300 * time.Millisecond
	addr := httpreadtest.FreeAddr(t)
	srv := NewServer(func(ctx *fasthttp.RequestCtx) {}, ServerOptions{Name: "test", MaxHeadBytes: 4096, MaxBodyBytes: 1024, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	var logs bytes.Buffer // written by Run, read after it returns
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, slog.New(slog.NewTextHandler(&logs, nil)), &recorder{}, budget, Listener{"public", addr, srv})
	}()

	var c net.Conn
	testenv.Eventually(t, 5*time.Second, "Run's listener open", func() bool {
		var err error
		c, err = net.Dial("tcp", addr)
		return err == nil
	})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	httpreadtest.RefusedTooLarge(t, c, 1<<20)

	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil: a lingering close cut short is no failure", err)
	}
	if took := time.Since(start); took > budget+2*time.Second {
		t.Errorf("Run took %v to stop with a lingering connection, want about its budget %v", took, budget)
	}
	if !strings.Contains(logs.String(), "lingering closes cut short") {
		t.Errorf("Run's log does not say it cut a lingering close short:\n%s", logs.String())
	}
}
