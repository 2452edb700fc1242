// Package cdntest runs the reference CDN configuration (deploy/cdn) in the
// real nginx in front of a real edge node, and checks what docs/CDN.md
// promises of it: the page and the snapshot from the cache as the edge's
// Cache-Control says, every personal route passed through, the client
// address the CDN saw and no other. nginx must be installed
// (deploy/local/test.sh installs it when it can); without it the tests fail.
package cdntest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/childproc"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/internal/testenv"
)

// templatePath is the reference configuration, from this package's folder.
const templatePath = "../../../deploy/cdn/nginx-flashgate.conf.template"

// placeholder is how the template marks what an operator fills in.
var placeholder = regexp.MustCompile(`\$\{(FLASHGATE_CDN_[A-Z_]+)\}`)

// fillTemplate is the template with each placeholder replaced by its value
// in vals, as envsubst would. It fails t on a placeholder vals lacks and on
// a value no placeholder asks for.
func fillTemplate(t testing.TB, vals map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatalf("read the CDN template: %v", err)
	}
	used := map[string]bool{}
	out := placeholder.ReplaceAllStringFunc(string(b), func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := vals[name]
		if !ok {
			t.Errorf("%s: placeholder ${%s} has no value in the test", templatePath, name)
		}
		used[name] = true
		return v
	})
	for name := range vals {
		if !used[name] {
			t.Errorf("%s has no placeholder ${%s}", templatePath, name)
		}
	}
	if i := strings.Index(out, "$FLASHGATE_CDN_"); i >= 0 {
		t.Errorf("%s: a placeholder not written ${LIKE_THIS} is left: %q", templatePath, out[i:min(len(out), i+40)])
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// nginxPath finds nginx: on PATH, or where Debian installs it (/usr/sbin,
// which a user's PATH may lack).
func nginxPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("this test runs nginx, which is not installed (Debian: apt-get install nginx-light, or nginx; make test installs it when it runs as root)")
	return ""
}

// CDN is a running nginx with the reference configuration.
type CDN struct {
	URL       string // http://127.0.0.1:<port>
	Dir       string // its prefix: configuration, cache, logs
	AccessLog string

	proc *childproc.Proc
}

// StartCDN runs nginx with the template filled in for this test, in front
// of the edge listeners edges (host:port), on a free 127.0.0.1 port, with
// its own prefix folder; it is stopped in t.Cleanup.
func StartCDN(t testing.TB, edges ...string) *CDN {
	t.Helper()
	bin := nginxPath(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "temp"), 0o755); err != nil {
		t.Fatal(err)
	}
	listen := httpreadtest.FreeAddr(t)
	var servers strings.Builder
	for _, e := range edges {
		fmt.Fprintf(&servers, "server %s; ", e)
	}
	c := &CDN{URL: "http://" + listen, Dir: dir, AccessLog: filepath.Join(dir, "access.log")}
	site := fillTemplate(t, map[string]string{
		"FLASHGATE_CDN_LISTEN":     listen + " default_server",
		"FLASHGATE_CDN_EDGES":      servers.String(),
		"FLASHGATE_CDN_CACHE_DIR":  filepath.Join(dir, "cache"),
		"FLASHGATE_CDN_ACCESS_LOG": c.AccessLog,
	})
	writeFile(t, filepath.Join(dir, "flashgate.conf"), site)
	writeFile(t, filepath.Join(dir, "nginx.conf"), mainConf(t, bin, dir))

	c.proc = &childproc.Proc{
		Name: "nginx", Path: bin,
		Args: []string{"-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;"},
		Log:  filepath.Join(dir, "nginx.log"),
	}
	if err := c.proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.proc.Stop(syscall.SIGTERM, 5*time.Second) })
	told := false // whether nginx's error.log is in the failure already, or not needed
	defer func() {
		if !told { // Eventually gave up
			t.Logf("nginx's error.log:\n%s", tail(filepath.Join(dir, "error.log"), 20))
		}
	}()
	testenv.Eventually(t, 10*time.Second, "nginx listening on "+listen, func() bool {
		conn, err := net.DialTimeout("tcp", listen, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return true
		}
		select {
		case <-c.proc.Exited():
			told = true
			t.Fatalf("nginx exited at start:\n%s\n%s", c.proc.Tail(20), tail(filepath.Join(dir, "error.log"), 20))
		default:
		}
		return false
	})
	told = true
	return c
}

// mainConf is the test's nginx.conf around the reference file, as a
// distribution's nginx.conf is: everything it names lives under dir. Its
// temporary folders are set for every module this nginx has, since nginx
// creates them all at start, by default where only a root install can.
func mainConf(t testing.TB, bin, dir string) string {
	t.Helper()
	v, err := exec.Command(bin, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -V: %v\n%s", err, v)
	}
	var temps strings.Builder
	for _, m := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		if m != "client_body" && m != "proxy" && strings.Contains(string(v), "--without-http_"+m+"_module") {
			continue
		}
		fmt.Fprintf(&temps, "    %s_temp_path %s;\n", m, filepath.Join(dir, "temp", m))
	}
	user := ""
	if os.Geteuid() == 0 {
		// Workers would run as nobody, who cannot enter the test's
		// temporary folders (0700, root's).
		user = "user root;\n"
	}
	return fmt.Sprintf(`%spid %s;
error_log %s notice;
worker_processes 2;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
%s    include %s;
}
`, user, filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"), temps.String(), filepath.Join(dir, "flashgate.conf"))
}

// ErrorLog is the tail of nginx's error log, for failure messages.
func (c *CDN) ErrorLog() string { return tail(filepath.Join(c.Dir, "error.log"), 30) }

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Edge is an edge node whose public handler listens on a real 127.0.0.1
// port (nginx dials TCP), and records every request that reaches it, with
// the X-Forwarded-For it came with and the connection it came on.
type Edge struct {
	Node *edgetest.Node
	Addr string // the public listener, 127.0.0.1:<port>: what the CDN is pointed at

	mu   sync.Mutex // guards seen
	seen []Seen
}

// Seen is one request that reached the edge.
type Seen struct {
	Method string
	URI    string // path and query, as they arrived
	XFF    string // X-Forwarded-For, every line joined
	Conn   uint64 // the connection's id (fasthttp's ConnID)
}

// StartEdge starts an edge node from cfg (edgetest.Config's, adjusted) and
// serves its public handler on a free 127.0.0.1 port; everything stops in
// t.Cleanup, the listener before the node.
func StartEdge(t testing.TB, cfg app.Config) *Edge {
	t.Helper()
	n := edgetest.StartNode(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	e := &Edge{Node: n, Addr: ln.Addr().String()}
	public := n.App.API.Public()
	srv := n.App.Server(func(ctx *fasthttp.RequestCtx) {
		var xff []string
		for _, v := range ctx.Request.Header.PeekAll("X-Forwarded-For") {
			xff = append(xff, string(v))
		}
		e.mu.Lock()
		e.seen = append(e.seen, Seen{Method: string(ctx.Method()), URI: string(ctx.RequestURI()),
			XFF: strings.Join(xff, ", "), Conn: ctx.ConnID()})
		e.mu.Unlock()
		public(ctx)
	})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() { // registered after StartNode's, so it runs first
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shut down the edge's TCP listener: %v", err)
		}
		<-served
	})
	return e
}

// Requests are the requests that reached the edge so far.
func (e *Edge) Requests() []Seen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Seen(nil), e.seen...)
}

// Fetches counts the requests for exactly uri (a path without a query
// matches only itself) with method that reached the edge.
func (e *Edge) Fetches(method, uri string) int {
	n := 0
	for _, r := range e.Requests() {
		if r.Method == method && r.URI == uri {
			n++
		}
	}
	return n
}

// Conns is how many connections the requests so far came on.
func (e *Edge) Conns() int {
	conns := map[uint64]bool{}
	for _, r := range e.Requests() {
		conns[r.Conn] = true
	}
	return len(conns)
}

// Answer is one answer through the CDN.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// CacheStatus is the answer's X-Cache-Status ("" when it has none).
func (a Answer) CacheStatus() string { return a.Header.Get("X-Cache-Status") }

// FromCache reports whether nginx answered from its cache rather than with
// what the edge just sent.
func (a Answer) FromCache() bool {
	switch a.CacheStatus() {
	case "HIT", "STALE", "UPDATING", "REVALIDATED":
		return true
	}
	return false
}

// Client sends requests to the CDN.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient is a client of c with connections enough for conns requests
// at once.
func NewClient(t testing.TB, c *CDN, conns int) *Client {
	tr := &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true,
		DialContext:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &Client{base: c.URL, hc: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

// Do sends method path with the headers (name, value pairs; "Host" names
// the request's host) and returns the answer; a transport failure is
// reported with t.Errorf (safe from any goroutine) and answers status 0.
func (c *Client) Do(t testing.TB, method, path string, body []byte, headers ...string) Answer {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return Answer{Header: http.Header{}}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1] // net/http sends req.Host, never a Host in req.Header
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return Answer{Header: http.Header{}}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read body: %v", method, path, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Get is Do with GET and no body.
func (c *Client) Get(t testing.TB, path string, headers ...string) Answer {
	return c.Do(t, http.MethodGet, path, nil, headers...)
}
