package stripepay

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stripeMockInstall is how a machine gets the stripe-mock these tests run
// against (deploy/local/test.sh runs it when the binary is missing).
const stripeMockInstall = "go install github.com/stripe/stripe-mock@v0.203.0"

// findStripeMock is the stripe-mock binary: on PATH, or where go install
// puts it ($GOBIN, else each $GOPATH's bin).
func findStripeMock(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		if gobin, gopath, ok := strings.Cut(strings.TrimRight(string(out), "\n"), "\n"); ok {
			if gobin != "" {
				dirs = append(dirs, gobin)
			}
			for _, gp := range filepath.SplitList(gopath) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatalf("stripe-mock is not installed (looked in PATH and %v); install it with: %s", dirs, stripeMockInstall)
	return ""
}

// stripeMock starts stripe-mock (Stripe's mock server, which validates each
// request against Stripe's OpenAPI description and answers with its
// fixtures) on a free port, waits until it answers, and stops it when the
// test ends. It returns its base URL.
func stripeMock(t *testing.T) string {
	t.Helper()
	// -http-port 0: HTTP only (HTTPS off), on a port the system picks,
	// which stripe-mock prints.
	cmd := exec.Command(findStripeMock(t), "-http-port", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				select {
				case addrs <- a:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var port string
	select {
	case a := <-addrs:
		if _, port, err = net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			t.Fatalf("stripe-mock listens at %q: %v", a, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("stripe-mock did not say where it listens within 30 s; stderr: %s", stderr.String())
	}
	base := "http://127.0.0.1:" + port
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/charges", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock at %s did not answer 200 within 30 s (last: %v); stderr: %s", base, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testKey is a test-mode key, as stripe-mock wants one.
const testKey = "sk_test_flashgate"

// lockedBuffer is a bytes.Buffer a process writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

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
