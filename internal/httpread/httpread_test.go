package httpread_test

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpread"
)

func TestCheckHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\nCookie: a=1; b=2\r\n\r\n", true},
		{"GET / HTTP/1.0\r\n\r\n", true},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-A: with spaces and\ttabs\r\n\r\n", true},
		{"GET / HTTP/3.0\r\nHost: a\r\n\r\n", false},
		{"GET / HTTP/2.0\r\nHost: a\r\n\r\n", false},
		{"GET / HTTP/1.2\r\nHost: a\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\nX A: 1\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\t2\r\n\r\n", false},
	} {
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(tc.head))); err != nil {
			t.Errorf("fasthttp cannot read %q: %v", tc.head, err)
			continue
		}
		if got := httpread.CheckHead(&h); got != tc.want {
			t.Errorf("CheckHead(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
}

// How Classify reads fasthttp's read errors, on a connection from Listener
// and on one from another listener, which cannot say whether a first
// request that stopped in its body had begun.
func TestClassify(t *testing.T) {
	t.Parallel()
	const readTimeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name     string
		wrapped  bool
		raw      []string // written in turn, the last one left hanging
		wantCode int      // 0: closed without an answer
	}{
		{"nothing", true, nil, 0},
		{"nothing, plain listener", false, nil, 0},
		{"head cut off", true, []string{"GET / HTTP/1.1\r\nHost: a\r\n"}, http.StatusRequestTimeout},
		{"head cut off, plain listener", false, []string{"GET / HTTP/1.1\r\nHost: a\r\n"}, http.StatusRequestTimeout},
		{"body cut off", true, []string{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nab"}, http.StatusRequestTimeout},
		{"body cut off, plain listener", false, []string{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nab"}, 0},
		{"second body cut off, plain listener", false, []string{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nab"}, http.StatusRequestTimeout},
		{"head too large", true, []string{"GET / HTTP/1.1\r\nHost: a\r\nCookie: " + strings.Repeat("c", 5000) + "\r\n\r\n"}, http.StatusRequestHeaderFieldsTooLarge},
		{"malformed", true, []string{"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: nope\r\n\r\n"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := &fasthttp.Server{
				Handler:     func(ctx *fasthttp.RequestCtx) {},
				ReadTimeout: readTimeout,
				Logger:      log.New(io.Discard, "", 0),
				ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
					switch httpread.Classify(ctx, err) {
					case httpread.NothingRead:
						httpread.HangUp(ctx)
					case httpread.Timeout:
						ctx.SetStatusCode(http.StatusRequestTimeout)
					case httpread.HeadTooLarge:
						ctx.SetStatusCode(http.StatusRequestHeaderFieldsTooLarge)
					default:
						ctx.SetStatusCode(http.StatusBadRequest)
					}
				},
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := ln
			if tc.wrapped {
				served = httpread.Listener(ln)
			}
			go func() { _ = srv.Serve(served) }()
			defer func() { _ = srv.Shutdown() }()

			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(readTimeout + 5*time.Second))
			br := bufio.NewReader(c)
			for i, raw := range tc.raw {
				if _, err := io.WriteString(c, raw); err != nil {
					t.Fatal(err)
				}
				if i < len(tc.raw)-1 { // an earlier request: read its answer
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("answer to request %d: %v", i+1, err)
					}
					res.Body.Close()
				}
			}
			if tc.wantCode == 0 {
				if got, err := io.ReadAll(br); err != nil || len(got) != 0 {
					t.Errorf("read = %q, %v; want the connection closed without an answer", got, err)
				}
				return
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("read the answer: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != tc.wantCode {
				t.Errorf("answer = %d, want %d", res.StatusCode, tc.wantCode)
			}
		})
	}
}

// The check runs on every request: a browser's head of about 1 KiB.
func BenchmarkCheckHead(b *testing.B) {
	head := "GET /v1/sales/s1/queue/status HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36\r\n" +
		"Accept: application/json\r\nAccept-Language: en-IN,en;q=0.9\r\nAuthorization: Bearer " + strings.Repeat("t", 300) + "\r\n" +
		"Cookie: " + strings.Repeat("c=v; ", 80) + "\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n"
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !httpread.CheckHead(&h) {
			b.Fatal("refused")
		}
	}
}
