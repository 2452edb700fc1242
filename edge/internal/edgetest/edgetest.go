// Package edgetest starts real edge nodes for tests: each test gets its own
// Redis key prefix (NewRedis), a stand-in origin or shop when it needs one
// (StubOrigin, Upstream), and StartNode runs an app.App on in-memory
// listeners with a client that speaks the contract. Several nodes started on
// one prefix share the sale's queue keys, like a cluster of edge nodes.
//
// The Redis server comes from FLASHGATE_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0). A missing server fails the test, never skips it.
package edgetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// DefaultRedisURL is used when FLASHGATE_TEST_REDIS_URL is unset.
const DefaultRedisURL = testenv.DefaultRedisURL

// AdminToken is the admin bearer token of every test edge node: 32 random
// bytes in base64, as app.Config requires.
const AdminToken = "4HsDf6iGNz+oPrFNoESLYM86GpiwZ84eVOWgtHwtCW8="

// RedisURL is the Redis server the tests use.
func RedisURL() string { return testenv.RedisURL() }

// Redis is one test's share of a Redis server: its key prefix and a client
// for the test's own checks.
type Redis = testenv.Redis

// NewRedis makes a fresh key prefix on the test Redis and deletes every key
// under it (found with SCAN) in t.Cleanup. It fails t when Redis cannot be
// reached.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	return testenv.NewRedis(t, RedisURL())
}

// NewRedisAt is NewRedis on the server at url.
func NewRedisAt(t testing.TB, url string) *Redis {
	t.Helper()
	return testenv.NewRedis(t, url)
}

// RandomID returns n random bytes as lower-case hex.
func RandomID(t testing.TB, n int) string { return testenv.RandomHex(n) }

// Config returns the Config of a test edge node on r with origin as its
// origin: dev mode, the tokenstest keys, line audience and user secret, a 20 ms tick, a
// 50 ms snapshot refresh and no rate limits (the webhook allows any
// address).
func Config(r *Redis, originURL string) app.Config {
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.AdminAddr = "inmemory", "inmemory-admin"
	cfg.RedisURL = r.URL
	cfg.RedisPrefix = r.Prefix
	cfg.OriginURL = originURL
	cfg.AdminToken = AdminToken
	cfg.Dev = true
	cfg.TokenKeys = tokenstest.KeySet().String()
	cfg.LineAudience = tokenstest.LineAudience
	cfg.DevUserTokenSecret = string(tokenstest.UserSecret())
	cfg.Tick = 20 * time.Millisecond
	cfg.SnapshotRefresh = 50 * time.Millisecond
	cfg.LimitJoinIP, cfg.LimitJoinSubnet, cfg.LimitJoinAccount = "", "", ""
	cfg.LimitPollIP, cfg.LimitPollSubnet, cfg.LimitPollAccount = "", "", ""
	cfg.LimitReserveIP, cfg.LimitReserveAccount = "", ""
	cfg.LimitOrderAccount, cfg.LimitOrderReadAccount, cfg.LimitWebhookIP = "", "", ""
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// Node is one edge node on in-memory listeners.
type Node struct {
	App    *app.App
	Config app.Config
	// PublicLn and AdminLn are the in-memory listeners of the two handlers.
	PublicLn, AdminLn *fasthttputil.InmemoryListener

	public, admin *Client
}

// DefaultClientIP is the peer address of the node's default clients.
const DefaultClientIP = "192.0.2.1"

// NewNode builds a node from cfg with app.New and serves its handlers on
// in-memory listeners, without starting its loops: call Start, or run
// App.Snapshots.Refresh and App.Admission.Tick by hand. Everything stops in
// t.Cleanup.
func NewNode(t testing.TB, cfg app.Config) *Node {
	t.Helper()
	logw := testenv.NewLogWriter(t)
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(cfg, log)
	if err != nil {
		t.Fatalf("app.New = %v", err)
	}
	n := &Node{App: a, Config: cfg, PublicLn: fasthttputil.NewInmemoryListener(), AdminLn: fasthttputil.NewInmemoryListener()}
	public, admin := a.Server(a.API.Public()), a.Server(a.API.Admin())
	var served sync.WaitGroup
	for _, s := range []struct {
		srv *fasthttp.Server
		ln  net.Listener
	}{{public, n.PublicLn}, {admin, n.AdminLn}} {
		served.Add(1)
		go func() {
			defer served.Done()
			_ = s.srv.Serve(s.ln)
		}()
	}
	n.public = n.Client(DefaultClientIP)
	n.admin = newClient(n.AdminLn, DefaultClientIP)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for _, srv := range []*fasthttp.Server{public, admin} {
			if err := srv.ShutdownWithContext(ctx); err != nil {
				t.Errorf("shut down edge listener: %v", err)
			}
		}
		served.Wait()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("App.Stop = %v", err)
		}
		logw.Close()
	})
	return n
}

// StartNode is NewNode and App.Start.
func StartNode(t testing.TB, cfg app.Config) *Node {
	t.Helper()
	n := NewNode(t, cfg)
	n.App.Start()
	return n
}

// Client sends requests to the node's public listener from peer address ip.
func (n *Node) Client(ip string) *Client { return newClient(n.PublicLn, ip) }

// Do sends r to the public listener from DefaultClientIP.
func (n *Node) Do(t testing.TB, r Request) *Response { return n.public.Do(t, r) }

// DoAdmin sends r to the admin listener with the admin token unless r
// carries a token of its own.
func (n *Node) DoAdmin(t testing.TB, r Request) *Response {
	if r.Token == "" {
		r.Token = AdminToken
	}
	return n.admin.Do(t, r)
}

// WaitSale waits until the node serves sale's snapshot and has read its
// admission cursor with the line in Redis, and fails t after a few seconds.
func (n *Node) WaitSale(t testing.TB, sale string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "the edge node reading the cursor of sale "+sale+" and serving it", func() bool {
		if st, ok := n.App.Admission.State(sale); !ok || st.Lost {
			return false
		}
		return n.Do(t, Request{Method: "GET", Path: "/v1/sales/" + sale}).Status == fasthttp.StatusOK
	})
}

// Client is an HTTP client of one in-memory listener with a fixed peer
// address.
type Client struct {
	hc *fasthttp.HostClient
}

func newClient(ln *fasthttputil.InmemoryListener, ip string) *Client {
	local := &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}
	return &Client{hc: &fasthttp.HostClient{
		Addr:                "edge.test",
		Dial:                func(string) (net.Conn, error) { return ln.DialWithLocalAddr(local) },
		MaxConns:            4096,
		ReadTimeout:         20 * time.Second,
		WriteTimeout:        20 * time.Second,
		MaxIdleConnDuration: time.Minute,
	}}
}

// Request is one HTTP request.
type Request struct {
	Method string
	Path   string
	Token  string // bearer token; "" sends no Authorization header
	User   string // the shopper's user token in X-User-Token (status, reserve); "" sends none
	Body   []byte // sent as application/json
	Header map[string]string
}

// Response is an answer, owned by the caller.
type Response struct {
	Status int
	Body   []byte
	Header *fasthttp.ResponseHeader
}

// Get returns a response header's value.
func (r *Response) Get(name string) string { return string(r.Header.Peek(name)) }

// ErrorCode returns the error field of a JSON error body, or a description
// of why there is none.
func (r *Response) ErrorCode() string {
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		return "(not JSON: " + string(r.Body) + ")"
	}
	return e.Error
}

// Do sends r and returns the answer. A transport failure is reported with
// t.Errorf (safe from any goroutine) and answers status 0.
func (c *Client) Do(t testing.TB, r Request) *Response {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := &fasthttp.Response{}
	req.Header.SetMethod(r.Method)
	req.SetRequestURI("http://" + c.hc.Addr + r.Path)
	if r.Token != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+r.Token)
	}
	if r.User != "" {
		req.Header.Set("X-User-Token", r.User)
	}
	if r.Body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(r.Body)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	if err := c.hc.Do(req, resp); err != nil {
		t.Errorf("%s %s: %v", r.Method, r.Path, err)
		return &Response{Header: &resp.Header}
	}
	return &Response{Status: resp.StatusCode(), Body: append([]byte(nil), resp.Body()...), Header: &resp.Header}
}

// Users signs user tokens with the tokenstest user secret, as the shop's
// identity service would.
var Users = tokens.NewDevUserIssuer(tokenstest.UserSecret(), "", 0, nil)

// UserToken returns a user token for account.
func UserToken(t testing.TB, account string) string {
	t.Helper()
	tok, err := Users.Issue(account)
	if err != nil {
		t.Fatalf("Issue(%s) = %v", account, err)
	}
	return tok
}

// Owner returns a user token of the account a queue or admission token is
// for (its sub, read without checking the token): what the shopper holding
// the token sends beside it in X-User-Token. A token it cannot read gives
// "", which sends none.
func Owner(t testing.TB, token string) string {
	t.Helper()
	sub := Subject(token)
	if sub == "" {
		return ""
	}
	return UserToken(t, sub)
}

// Subject is a JWT's sub, read without checking the token; "" when it
// cannot be read.
func Subject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// QueueAnswer is the body of a join or a status poll.
type QueueAnswer struct {
	State          string `json:"state"`
	QueueToken     string `json:"queue_token"`
	Position       int64  `json:"position"`
	NowServing     int64  `json:"now_serving"`
	EstimatedWaitS int64  `json:"estimated_wait_s"`
	PollAfterMS    int64  `json:"poll_after_ms"`
	PreQueue       bool   `json:"pre_queue"`
	Paused         bool   `json:"paused"`
	AdmissionToken string `json:"admission_token"`
	Final          *bool  `json:"final"`
}

// Join posts a join for account to sale and returns the response and its
// decoded body.
func (c *Client) Join(t testing.TB, sale, account string) (*Response, QueueAnswer) {
	r := c.Do(t, Request{Method: "POST", Path: "/v1/sales/" + sale + "/queue", Token: UserToken(t, account)})
	var a QueueAnswer
	if r.Status == fasthttp.StatusAccepted {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Errorf("join answer %q: %v", r.Body, err)
		}
	}
	return r, a
}

// Status polls sale's queue status with a queue token, as the shopper it
// is for (with their user token: Owner).
func (c *Client) Status(t testing.TB, sale, queueToken string) (*Response, QueueAnswer) {
	r := c.Do(t, Request{Method: "GET", Path: "/v1/sales/" + sale + "/queue/status", Token: queueToken, User: Owner(t, queueToken)})
	var a QueueAnswer
	if r.Status == fasthttp.StatusOK {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Errorf("status answer %q: %v", r.Body, err)
		}
	}
	return r, a
}

// Join is Client.Join from DefaultClientIP.
func (n *Node) Join(t testing.TB, sale, account string) (*Response, QueueAnswer) {
	return n.public.Join(t, sale, account)
}

// JoinAgainWhileBusy is Join, joining again while the edge answers 503
// please_wait (on a busy machine its reading of the line goes stale), as a
// client does, for up to ten seconds. It is safe in any goroutine.
func (n *Node) JoinAgainWhileBusy(t testing.TB, sale, account string) (*Response, QueueAnswer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	again := time.NewTicker(50 * time.Millisecond)
	defer again.Stop()
	for {
		res, ans := n.Join(t, sale, account)
		if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" || time.Now().After(deadline) {
			return res, ans
		}
		t.Logf("join %s = 503 please_wait; joining again", account)
		<-again.C
	}
}

// Status is Client.Status from DefaultClientIP.
func (n *Node) Status(t testing.TB, sale, queueToken string) (*Response, QueueAnswer) {
	return n.public.Status(t, sale, queueToken)
}

// Admit joins account to the sale's line and polls its status until it is
// admitted, within the time given, and returns its admission token.
func (n *Node) Admit(t testing.TB, sale, account string, within time.Duration) string {
	t.Helper()
	res, joined := n.JoinAgainWhileBusy(t, sale, account)
	if res.Status != fasthttp.StatusAccepted {
		t.Fatalf("join %s = %d %s, want 202", account, res.Status, res.Body)
	}
	var st QueueAnswer
	testenv.Eventually(t, within, "status of "+account+" admitted", func() bool {
		_, st = n.Status(t, sale, joined.QueueToken)
		return st.State == "admitted"
	})
	return st.AdmissionToken
}
