package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// downDependency points an origin's env at one dependency on a closed port
// and returns what brings it up there, for real.
type downDependency struct {
	name string // as the origin names it in logs and /readyz
	down func(t *testing.T, e *origintest.Env, env map[string]string) (up func())
}

// downDependencies are Redis (a redis-server of the test's own, started
// late on the port) and Postgres (a TCP forwarder to the real one, opened
// late on the port).
var downDependencies = []downDependency{
	{"redis", func(t *testing.T, _ *origintest.Env, env map[string]string) func() {
		ports, err := freeport.Ports(1)
		if err != nil {
			t.Fatal(err)
		}
		env["FLASHGATE_REDIS_URL"] = "redis://127.0.0.1:" + strconv.Itoa(ports[0]) + "/0"
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv, err := redisserver.Start(ctx, redisserver.Options{Dir: t.TempDir(), Port: ports[0]})
			if err != nil {
				t.Fatalf("this test runs a redis-server of its own (redis-server on PATH): %v", err)
			}
			t.Cleanup(srv.Kill)
		}
	}},
	{"postgres", func(t *testing.T, e *origintest.Env, env map[string]string) func() {
		u, err := url.Parse(e.PostgresURL)
		if err != nil {
			t.Fatal(err)
		}
		target, addr := u.Host, httpreadtest.FreeAddr(t)
		u.Host = addr
		env["FLASHGATE_POSTGRES_URL"] = u.String()
		return func() { forward(t, addr, target) }
	}},
}

// An origin started while Redis or Postgres is unreachable does not exit:
// its listeners answer, /healthz 200, /readyz 503 not_ready, its sale and
// admin routes 503 please_wait, /metrics works; it logs the dependency it
// waits for once, not once per retry. Once the dependency is up it becomes
// ready by itself within seconds, and sales, snapshots and reserves work.
func TestRunWaitsForDependencies(t *testing.T) {
	t.Parallel()
	for _, dep := range downDependencies {
		t.Run(dep.name, func(t *testing.T) {
			t.Parallel()
			e := origintest.NewEnv(t)
			env, admin := baseEnv(t, e, "origin-wait-"+dep.name)
			up := dep.down(t, e, env)
			o := startRun(t, env, admin)
			o.waitLog(t, `"msg":"origin start-up waiting for `+dep.name+`"`) // the first attempt failed
			wantWaiting(t, o, dep.name)

			up()
			httpreadtest.WaitStatus(t, o.url(false, "/readyz"), http.StatusOK, 15*time.Second)
			wantServing(t, o, "after-"+dep.name)
			logs := o.stop(t)
			for _, want := range []struct {
				msg   string
				count int
			}{
				{`"msg":"origin start-up waiting for ` + dep.name + `"`, 1},
				{`"msg":"origin start-up: ` + dep.name + ` recovered"`, 1},
				{`"msg":"origin ready"`, 1},
			} {
				if got := strings.Count(logs, want.msg); got != want.count {
					t.Errorf("the log has %s %d times, want %d:\n%s", want.msg, got, want.count, logs)
				}
			}
		})
	}
}

// An origin stopped while it waits for a dependency stops at once: the
// retries end, the listeners close, run returns nil.
func TestRunStopsWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, dep := range downDependencies {
		t.Run(dep.name, func(t *testing.T) {
			t.Parallel()
			e := origintest.NewEnv(t)
			env, admin := baseEnv(t, e, "origin-stop-"+dep.name)
			dep.down(t, e, env)
			o := startRun(t, env, admin)
			o.waitLog(t, `"msg":"origin start-up waiting for `+dep.name+`"`) // retrying now
			start := time.Now()
			o.stop(t)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("run took %v to stop while waiting for %s, want well under the shutdown timeout", took, dep.name)
			}
			for _, admin := range []bool{false, true} {
				if got := httpreadtest.Status(o.url(admin, "/healthz")); got != 0 {
					t.Errorf("GET %s after run returned = %d, want no answer", o.url(admin, "/healthz"), got)
				}
			}
		})
	}
}

// A configuration the origin cannot use fails run at once, with nothing
// to wait for (both dependencies down here); only unreachable dependencies
// are waited for.
func TestRunRefusesBadURLsAtOnce(t *testing.T) {
	t.Parallel()
	e := origintest.NewEnv(t)
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"redis url", "FLASHGATE_REDIS_URL", "http://127.0.0.1:1/0", "redis url"},
		{"postgres url", "FLASHGATE_POSTGRES_URL", "postgres://127.0.0.1:notaport/db", "postgres url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := baseEnv(t, e, "origin-bad-url")
			env["FLASHGATE_REDIS_URL"] = "redis://" + httpreadtest.FreeAddr(t) + "/0"
			env["FLASHGATE_POSTGRES_URL"] = "postgres://postgres@" + httpreadtest.FreeAddr(t) + "/db"
			env[tc.key] = tc.value
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, nil, func(k string) string { return env[k] }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || ctx.Err() != nil {
				t.Errorf("run with %s=%s = %v (context %v), want an error naming the %s at once", tc.key, tc.value, err, ctx.Err(), tc.want)
			}
		})
	}
}

// runningOrigin is run in a goroutine of the test's.
type runningOrigin struct {
	public, admin string
	logs          *lockedBuffer
	cancel        context.CancelFunc
	done          chan error
}

// startRun runs the origin with env until the test ends, and waits until
// both its listeners answer /healthz.
func startRun(t *testing.T, env map[string]string, admin string) *runningOrigin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &runningOrigin{public: env["FLASHGATE_ORIGIN_ADDR"], admin: admin, logs: &lockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { o.done <- run(ctx, nil, func(k string) string { return env[k] }, o.logs, io.Discard) }()
	t.Cleanup(func() { o.stop(t) })
	for _, admin := range []bool{false, true} {
		httpreadtest.WaitStatus(t, o.url(admin, "/healthz"), http.StatusOK, 10*time.Second)
	}
	return o
}

func (o *runningOrigin) url(admin bool, path string) string {
	if admin {
		return "http://" + o.admin + path
	}
	return "http://" + o.public + path
}

// stop cancels run and waits for it (a second call does nothing); it fails
// t unless run returns nil within 10 s, and returns what the origin logged.
func (o *runningOrigin) stop(t *testing.T) string {
	t.Helper()
	if o.done == nil {
		return o.logs.String()
	}
	o.cancel()
	select {
	case err := <-o.done:
		if err != nil {
			t.Errorf("run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("run did not return within 10 s of its context's end:\n%s", o.logs.String())
	}
	o.done = nil
	return o.logs.String()
}

// waitLog waits until the origin has logged msg, and fails t after 10 s.
func (o *runningOrigin) waitLog(t *testing.T, msg string) {
	t.Helper()
	logged := func() bool { return strings.Contains(o.logs.String(), msg) }
	defer func() {
		if !logged() { // Eventually failed t: show what was logged instead
			t.Logf("the origin's log:\n%s", o.logs.String())
		}
	}()
	testenv.Eventually(t, 10*time.Second, "the origin logging "+msg, logged)
}

// wantWaiting checks what an origin waiting for dep answers, and that run
// has not returned.
func wantWaiting(t *testing.T, o *runningOrigin, dep string) {
	t.Helper()
	for _, admin := range []bool{false, true} {
		res := call(t, "GET", o.url(admin, "/readyz"), "", nil)
		var body struct{ Status, Error, Message, RequestID string }
		_ = json.Unmarshal(res.body, &body)
		if res.status != http.StatusServiceUnavailable || body.Status != "not_ready" || body.Error != "not_ready" ||
			!strings.Contains(body.Message, dep) || res.header.Get("Retry-After") == "" || res.header.Get("X-Request-Id") == "" {
			t.Errorf("GET /readyz (admin %v) with %s down = %d %s (Retry-After %q), want 503 not_ready naming %s, with Retry-After and a request id",
				admin, dep, res.status, res.body, res.header.Get("Retry-After"), dep)
		}
	}
	sale, _ := json.Marshal(origintest.OpenSale("early", 5, 600))
	for _, r := range []struct {
		method, url, token string
		body               []byte
	}{
		{"GET", o.url(false, "/v1/sales/early"), "", nil},
		{"GET", o.url(false, "/v1/sales"), "", nil},
		{"POST", o.url(false, "/v1/sales/early/reserve"), "not-checked-yet", []byte(`{"sku":"sku-1","idempotency_key":"k"}`)},
		{"POST", o.url(false, "/v1/payments/webhook"), "", []byte(`{}`)},
		{"GET", o.url(false, "/v1/lines/early"), "", nil},
		{"POST", o.url(true, "/admin/sales"), origintest.AdminToken, sale},
	} {
		res := call(t, r.method, r.url, r.token, r.body)
		if res.status != http.StatusServiceUnavailable || origintest.ErrorCode(res.body) != "please_wait" || res.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with %s down = %d %s (Retry-After %q), want 503 please_wait with Retry-After",
				r.method, r.url, dep, res.status, res.body, res.header.Get("Retry-After"))
		}
	}
	if res := call(t, "GET", o.url(true, "/metrics"), origintest.AdminToken, nil); res.status != http.StatusOK || !bytes.Contains(res.body, []byte("\nflashgate_origin_ready 0\n")) {
		t.Errorf("GET /metrics with %s down = %d, want 200 with flashgate_origin_ready 0", dep, res.status)
	}
	select {
	case err := <-o.done:
		o.done = nil
		t.Fatalf("run returned %v with %s down, want it to wait:\n%s", err, dep, o.logs.String())
	default:
	}
}

// wantServing checks that a ready origin takes a sale, shows its snapshot
// and reserves a unit of it.
func wantServing(t *testing.T, o *runningOrigin, sale string) {
	t.Helper()
	body, _ := json.Marshal(origintest.OpenSale(sale, 5, 600))
	if res := call(t, "POST", o.url(true, "/admin/sales"), origintest.AdminToken, body); res.status != http.StatusCreated {
		t.Fatalf("POST /admin/sales once ready = %d %s, want 201", res.status, res.body)
	}
	if res := call(t, "GET", o.url(false, "/v1/sales/"+sale), "", nil); res.status != http.StatusOK {
		t.Errorf("GET /v1/sales/%s once ready = %d %s, want 200", sale, res.status, res.body)
	}
	tok, _, err := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{}).Admission(sale, "buyer", 1)
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, "POST", o.url(false, "/v1/sales/"+sale+"/reserve"), tok, []byte(`{"sku":"sku-1","idempotency_key":"k-1"}`))
	if res.status != http.StatusCreated {
		t.Errorf("reserve once ready = %d %s, want 201", res.status, res.body)
	}
	if res := call(t, "GET", o.url(true, "/metrics"), origintest.AdminToken, nil); !bytes.Contains(res.body, []byte("\nflashgate_origin_ready 1\n")) {
		t.Errorf("GET /metrics once ready = %d, want flashgate_origin_ready 1", res.status)
	}
}

// answer is an HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request with a bearer token ("" for none) and a JSON body
// (nil for none); a transport failure fails t.
func call(t *testing.T, method, url, token string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

// forward accepts connections on addr and pipes each to target, until the
// test ends.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s, the port the origin was given: %v", addr, err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // guards conns and closed
		conns  []net.Conn
		closed bool
	)
	keep := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			_ = c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pipe(c, target, keep)
			}()
		}
	}()
}

// pipe copies between c and a new connection to target both ways until
// either side ends, then closes both.
func pipe(c net.Conn, target string, keep func(net.Conn) bool) {
	if !keep(c) {
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !keep(up) {
		_ = c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

// lockedBuffer is a bytes.Buffer safe for the origin's goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
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
