package stripepay

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/origin/internal/payment/stripepay/stripemock"
)

// stripeMock starts stripe-mock for the test and returns its base URL
// (stripemock.Start).
func stripeMock(t *testing.T) string { return stripemock.Start(t, testKey) }

// testKey is a test-mode key, as stripe-mock wants one.
const testKey = "sk_test_flashgate"

// sent is one request the adapter made, as it reached stripe-mock.
type sent struct {
	Method, Path string
	Form         url.Values // the form body of a POST, the query of a GET
	Header       http.Header
	Status       int // stripe-mock's answer
}

// recorder is a reverse proxy in front of stripe-mock that keeps each
// request, so tests can check what was sent as well as that stripe-mock
// took it.
type recorder struct {
	URL string
	mu  sync.Mutex
	got []sent
}

func record(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form := r.URL.Query()
		if r.Method == http.MethodPost {
			form, _ = url.ParseQuery(string(body))
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		rec.mu.Lock()
		rec.got = append(rec.got, sent{Method: r.Method, Path: r.URL.Path, Form: form, Header: r.Header.Clone(), Status: sw.status})
		rec.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

// statusWriter keeps the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// requests returns what was sent so far and forgets it.
func (r *recorder) requests() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}
