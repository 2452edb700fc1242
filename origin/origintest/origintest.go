// Package origintest starts real origins for tests: each test gets its own
// Redis key prefix and Postgres schema (NewEnv), and StartOrigin runs an
// app.App on in-memory listeners with a client that speaks the contract.
// Several origins started on one Env share the sale's Redis keys and ledger,
// like a cluster of origin instances.
package origintest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// Env is one test's Redis prefix and Postgres schema; see internal/testenv.
type Env = testenv.Env

// NewEnv makes a fresh Redis prefix and Postgres schema for t, removed in
// t.Cleanup. It fails t when Redis or Postgres cannot be reached.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	return testenv.New(t)
}

// AdminToken is the admin bearer token of every test origin: 32 random
// bytes in base64, as app.Config requires.
const AdminToken = "ISvBaq64UAgPI1ccurwGHv3uyHTtnH7ZDlXgQQ4xoMs="

// Body limits of the two listeners.
const (
	MaxPublicRequestBody = app.MaxPublicRequestBody
	MaxAdminRequestBody  = app.MaxAdminRequestBody
)

// Origin is one running origin and a client for its two listeners.
type Origin struct {
	App    *app.App
	Config app.Config
	Env    *Env
	// Public and Admin are the fasthttp servers behind the listeners, as
	// App.Server built them (their ErrorHandler and body limits included).
	Public, Admin *fasthttp.Server
	// PublicLn and AdminLn are the in-memory listeners, for raw connections.
	PublicLn, AdminLn *fasthttputil.InmemoryListener
	// Issuer signs admission and queue tokens with the origin's keys.
	Issuer *tokens.Issuer
	// Users signs user tokens with the origin's (dev mode) user-token secret.
	Users *tokens.DevUserIssuer

	public, admin *fasthttp.HostClient
	stop          func()
	stopOnce      sync.Once
}

// Stop shuts the origin down in its own order, as a SIGTERM would; it runs
// once, and again at the end of the test does nothing.
func (o *Origin) Stop() { o.stopOnce.Do(o.stop) }

// OnRedisCluster is a StartOrigin override that points the origin at a Redis
// Cluster (its nodes' host:port, comma-separated) instead of env's Redis;
// the keys keep env's prefix.
func OnRedisCluster(nodes string) func(*app.Config) {
	return func(c *app.Config) { c.RedisURL, c.RedisCluster = "redis://127.0.0.1/0", nodes }
}

// StartOrigin builds an origin with app.New on env (Dev on, the tokenstest
// keys and line audience, AdminToken, a quick sweeper), lets each override
// adjust the Config, connects it (App.Connect), serves App.API.Public() and
// Admin() on in-memory listeners, starts the workers, and stops it all in
// t.Cleanup.
func StartOrigin(t testing.TB, env *Env, overrides ...func(*app.Config)) *Origin {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.RedisURL = env.RedisURL
	cfg.PostgresURL = env.PostgresURL
	cfg.RedisPrefix = env.Prefix
	cfg.AdminToken = AdminToken
	cfg.Dev = true
	cfg.TokenKeys = tokenstest.KeySet().String()
	cfg.LineAudience = tokenstest.LineAudience
	cfg.DevUserTokenSecret = string(tokenstest.UserSecret())
	cfg.Instance = "origin-" + testenv.RandomHex(4)
	cfg.SweepInterval = 50 * time.Millisecond
	// A new sale's intents reach Postgres, and a stopping writer returns, within 100 ms rather than a second.
	cfg.WriterPoll = 100 * time.Millisecond
	// Tests share one Postgres (100 connections here) among dozens of origins at once.
	cfg.PostgresMaxConns = 8
	for _, o := range overrides {
		o(&cfg)
	}

	logw := testenv.NewLogWriter(t)
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", cfg.Instance)
	a, err := app.New(cfg, log)
	if err != nil {
		t.Fatalf("app.New(%s) = %v", cfg.Instance, err)
	}
	// Ready before the first request, as a test expects: Start would wait
	// for Redis and Postgres in the background.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = a.Connect(ctx)
	cancel()
	if err != nil {
		_ = a.Stop(context.Background())
		t.Fatalf("App.Connect(%s) = %v", cfg.Instance, err)
	}
	o := &Origin{
		App: a, Config: cfg, Env: env,
		Public:   a.PublicServer(),
		Admin:    a.AdminServer(),
		PublicLn: fasthttputil.NewInmemoryListener(),
		AdminLn:  fasthttputil.NewInmemoryListener(),
		Issuer:   tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{}),
		Users:    tokens.NewDevUserIssuer(tokenstest.UserSecret(), "", 0, nil),
	}
	// fasthttp logs the requests it rejects itself; keep that in the test log.
	o.Public.Logger = slogPrintf{log}
	o.Admin.Logger = slogPrintf{log}
	var served sync.WaitGroup
	for _, s := range []struct {
		srv *fasthttp.Server
		ln  net.Listener
	}{{o.Public, o.PublicLn}, {o.Admin, o.AdminLn}} {
		served.Add(1)
		go func() {
			defer served.Done()
			_ = s.srv.Serve(s.ln)
		}()
	}
	a.Start()
	o.public = hostClient("public", o.PublicLn)
	o.admin = hostClient("admin", o.AdminLn)

	o.stop = func() {
		// The origin's own shutdown order: stop the listeners and drain,
		// then reserves and workers, then the clients.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		o.public.CloseIdleConnections()
		o.admin.CloseIdleConnections()
		for _, srv := range []*fasthttp.Server{o.Public, o.Admin} {
			if err := srv.ShutdownWithContext(ctx); err != nil {
				t.Errorf("shut down %s: %v", cfg.Instance, err)
			}
		}
		served.Wait()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("App.Stop(%s) = %v", cfg.Instance, err)
		}
		logw.Close()
	}
	t.Cleanup(o.Stop)
	return o
}

func hostClient(name string, ln *fasthttputil.InmemoryListener) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                name,
		Dial:                func(string) (net.Conn, error) { return ln.Dial() },
		MaxConns:            4096,
		ReadTimeout:         20 * time.Second,
		WriteTimeout:        20 * time.Second,
		MaxIdleConnDuration: time.Minute,
	}
}

// Request is one HTTP request to a listener.
type Request struct {
	Method      string
	Path        string
	Token       string // bearer token; "" sends no Authorization header
	ContentType string // "" means application/json when there is a body
	Body        []byte
	Header      map[string]string
	Host        string // the Host header; "" means the listener's name ("public" or "admin")
}

// Do sends r to the public listener and returns the status and body. A
// transport failure is reported with t.Errorf (safe from any goroutine)
// and answers status 0.
func (o *Origin) Do(t testing.TB, r Request) (int, []byte) {
	return do(t, o.public, r)
}

// DoAdmin sends r to the admin listener.
func (o *Origin) DoAdmin(t testing.TB, r Request) (int, []byte) {
	return do(t, o.admin, r)
}

func do(t testing.TB, c *fasthttp.HostClient, r Request) (int, []byte) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI("http://" + c.Addr + r.Path)
	if r.Token != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+r.Token)
	}
	if r.Body != nil {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.SetContentType(ct)
		req.SetBody(r.Body)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	if r.Host != "" {
		req.UseHostHeader = true
		req.Header.SetHost(r.Host)
	}
	if err := c.Do(req, resp); err != nil {
		t.Errorf("%s %s: %v", r.Method, r.Path, err)
		return 0, nil
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// Reply is any JSON answer of the origin, decoded loosely: the fields of a
// reservation and of an error body.
type Reply struct {
	ReservationID string    `json:"reservation_id"`
	SaleID        string    `json:"sale_id"`
	SKU           string    `json:"sku"`
	Status        string    `json:"status"`
	ExpiresAt     time.Time `json:"expires_at"`
	OrderID       string    `json:"order_id"`
	Error         string    `json:"error"`
	Message       string    `json:"message"`
}

// ParseReply decodes body into a Reply, failing t (with Errorf) if it is not JSON.
func ParseReply(t testing.TB, body []byte) Reply {
	var r Reply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Errorf("answer %q is not JSON: %v", body, err)
	}
	return r
}

// Reserve posts {sku, idempotency_key} to sale's reserve endpoint with an
// admission token. Safe to call from many goroutines.
func (o *Origin) Reserve(t testing.TB, sale, token, sku, idemKey string) (int, Reply) {
	body, _ := json.Marshal(map[string]string{"sku": sku, "idempotency_key": idemKey})
	status, b := o.Do(t, Request{Method: "POST", Path: "/v1/sales/" + sale + "/reserve", Token: token, Body: body})
	if status == 0 {
		return 0, Reply{}
	}
	return status, ParseReply(t, b)
}

// Reservation reads GET /v1/reservations/{id} with a user token.
func (o *Origin) Reservation(t testing.TB, userToken, id string) (int, Reply) {
	status, b := o.Do(t, Request{Method: "GET", Path: "/v1/reservations/" + id, Token: userToken})
	if status == 0 {
		return 0, Reply{}
	}
	return status, ParseReply(t, b)
}

// AdmissionToken signs an admission token for account in sale with the
// origin's key, as the edge would.
func (o *Origin) AdmissionToken(t testing.TB, sale, account string) string {
	t.Helper()
	tok, _, err := o.Issuer.Admission(sale, account, 1)
	if err != nil {
		t.Fatalf("Admission(%s, %s) = %v", sale, account, err)
	}
	return tok
}

// DevAdmissionToken asks the admin listener's dev endpoint for an admission token.
func (o *Origin) DevAdmissionToken(t testing.TB, sale, account string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"sale_id": sale, "user_id": account})
	status, b := o.DoAdmin(t, Request{Method: "POST", Path: "/admin/dev/admission-token", Token: AdminToken, Body: body})
	var out struct {
		AdmissionToken string `json:"admission_token"`
	}
	if err := json.Unmarshal(b, &out); status != fasthttp.StatusOK || err != nil || out.AdmissionToken == "" {
		t.Fatalf("POST /admin/dev/admission-token = %d %s, want 200 with a token", status, b)
	}
	return out.AdmissionToken
}

// UserToken signs a user token for account with the origin's user secret.
func (o *Origin) UserToken(t testing.TB, account string) string {
	t.Helper()
	tok, err := o.Users.Issue(account)
	if err != nil {
		t.Fatalf("Issue(%s) = %v", account, err)
	}
	return tok
}

// SKU is one SKU of a sale definition.
type SKU struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceMinor int64  `json:"price_minor"`
	Currency   string `json:"currency"`
	Stock      int    `json:"stock"`
}

// Sale is the body of POST /admin/sales.
type Sale struct {
	SaleID          string    `json:"sale_id"`
	Name            string    `json:"name"`
	StartsAt        time.Time `json:"starts_at"`
	EndsAt          time.Time `json:"ends_at"`
	HoldTTLSeconds  int       `json:"hold_ttl_s"`
	PerAccountLimit int       `json:"per_account_limit"`
	// OneUnitPerPayer: nil leaves it out (the origin's default, on).
	OneUnitPerPayer *bool `json:"one_unit_per_payer,omitempty"`
	SKUs            []SKU `json:"skus"`
}

// OpenSale returns a sale that started a minute ago and ends in an hour,
// with one SKU "sku-1" of the given stock.
func OpenSale(id string, stock, holdTTLSeconds int) Sale {
	now := time.Now().UTC().Truncate(time.Second)
	return Sale{
		SaleID: id, Name: "Sale " + id, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		HoldTTLSeconds: holdTTLSeconds, PerAccountLimit: 1,
		SKUs: []SKU{{SKU: "sku-1", Name: "Phone", PriceMinor: 4999900, Currency: "INR", Stock: stock}},
	}
}

// CreateSale posts s to POST /admin/sales and returns the status and body.
func (o *Origin) CreateSale(t testing.TB, s Sale) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal sale: %v", err)
	}
	return o.DoAdmin(t, Request{Method: "POST", Path: "/admin/sales", Token: AdminToken, Body: body})
}

// MustCreateSale creates s and fails t unless the origin answers 201.
func (o *Origin) MustCreateSale(t testing.TB, s Sale) {
	t.Helper()
	if status, b := o.CreateSale(t, s); status != fasthttp.StatusCreated {
		t.Fatalf("POST /admin/sales %s = %d %s, want 201", s.SaleID, status, b)
	}
}

// Counts are one side's stock counters in the ledger answer.
type Counts struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}

// LedgerSKU is one SKU of GET /admin/sales/{sale}/ledger.
type LedgerSKU struct {
	SKU            string `json:"sku"`
	Total          int64  `json:"total"`
	Redis          Counts `json:"redis"`
	DB             Counts `json:"db"`
	Pending        Counts `json:"pending"`
	Drift          Counts `json:"drift"`
	PendingIntents int    `json:"pending_intents"`
}

// Ledger reads GET /admin/sales/{sale}/ledger, by SKU.
func (o *Origin) Ledger(t testing.TB, sale string) map[string]LedgerSKU {
	t.Helper()
	b := o.readLedger(t, sale)
	var out struct {
		SKUs []LedgerSKU `json:"skus"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("ledger answer %q: %v", b, err)
	}
	m := make(map[string]LedgerSKU, len(out.SKUs))
	for _, s := range out.SKUs {
		m[s.SKU] = s
	}
	return m
}

// readLedger answers GET /admin/sales/{sale}/ledger, asking again, up to
// ten times in all, while the origin answers 503 please_wait (its reads'
// budget spent on a loaded machine), as the route's callers are told to.
func (o *Origin) readLedger(t testing.TB, sale string) []byte {
	t.Helper()
	for range 10 {
		status, b := o.DoAdmin(t, Request{Method: "GET", Path: "/admin/sales/" + sale + "/ledger", Token: AdminToken})
		switch {
		case status == fasthttp.StatusOK:
			return b
		case status != fasthttp.StatusServiceUnavailable || !bytes.Contains(b, []byte(`"please_wait"`)):
			t.Fatalf("GET /admin/sales/%s/ledger = %d %s, want 200", sale, status, b)
		}
		t.Logf("GET /admin/sales/%s/ledger = 503 please_wait; asking again", sale)
	}
	t.Fatalf("GET /admin/sales/%s/ledger answered 503 please_wait ten times", sale)
	return nil
}

// Durability is the durability part of GET /admin/sales/{sale}/ledger.
type Durability struct {
	Epoch      string `json:"epoch"`
	RedisEpoch string `json:"redis_epoch"`
	RedisSeq   int64  `json:"redis_seq"`
	JournalSeq int64  `json:"journal_seq"`
	Restored   int    `json:"reservations_restored"`
	Lost       int    `json:"reservations_lost"`
	Losses     []struct {
		Kind       string     `json:"kind"`
		RedisSeq   int64      `json:"redis_seq"`
		JournalSeq int64      `json:"journal_seq"`
		Restored   int        `json:"restored"`
		Lost       int        `json:"lost"`
		RebuiltAt  *time.Time `json:"rebuilt_at"`
	} `json:"redis_losses"`
}

// Durability reads the ledger's durability fields of a sale.
func (o *Origin) Durability(t testing.TB, sale string) Durability {
	t.Helper()
	b := o.readLedger(t, sale)
	var d Durability
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("ledger answer %q: %v", b, err)
	}
	return d
}

// WaitDurability polls the ledger's durability fields until done accepts
// them, and returns that reading; it fails t after within.
func (o *Origin) WaitDurability(t testing.TB, sale string, within time.Duration, done func(Durability) bool) Durability {
	t.Helper()
	var d Durability
	testenv.Eventually(t, within, "durability of "+sale+" as expected", func() bool {
		d = o.Durability(t, sale)
		return done(d)
	})
	return d
}

// WaitLedger polls the ledger of sale until done accepts it, and returns
// that reading; it fails t after within.
func (o *Origin) WaitLedger(t testing.TB, sale string, within time.Duration, done func(map[string]LedgerSKU) bool) map[string]LedgerSKU {
	t.Helper()
	var l map[string]LedgerSKU
	testenv.Eventually(t, within, "ledger of "+sale+" as expected", func() bool {
		l = o.Ledger(t, sale)
		return done(l)
	})
	return l
}

// Snapshot is the sale snapshot of GET /v1/sales/{sale}.
type Snapshot struct {
	SaleID string `json:"sale_id"`
	Status string `json:"status"`
	SKUs   []struct {
		SKU           string `json:"sku"`
		AvailableHint int64  `json:"available_hint"`
	} `json:"skus"`
	SoldOut bool `json:"sold_out"`
	Final   bool `json:"final"`
}

// Snapshot reads the public sale snapshot.
func (o *Origin) Snapshot(t testing.TB, sale string) Snapshot {
	t.Helper()
	status, b := o.Do(t, Request{Method: "GET", Path: "/v1/sales/" + sale})
	if status != fasthttp.StatusOK {
		t.Fatalf("GET /v1/sales/%s = %d %s, want 200", sale, status, b)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("snapshot %q: %v", b, err)
	}
	return s
}

// Inventory reads the sale's inventory rows straight from Postgres.
func Inventory(t testing.TB, env *Env, sale string) map[string]intent.Stock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inv, err := ledger.New(env.DB).Inventory(ctx, sale)
	if err != nil {
		t.Fatalf("read inventory of %s: %v", sale, err)
	}
	return inv
}

// CheckInvariant fails t unless every inventory row of sale keeps
// available + held + sold = total with all three >= 0, read from Postgres.
func CheckInvariant(t testing.TB, env *Env, sale string) {
	t.Helper()
	for sku, s := range Inventory(t, env, sale) {
		if s.Available < 0 || s.Held < 0 || s.Sold < 0 || s.Available+s.Held+s.Sold != s.Total {
			t.Errorf("inventory of %s/%s = %+v; breaks available + held + sold = total, all >= 0", sale, sku, s)
		}
	}
}

// ReservationStatuses counts the sale's reservation rows in Postgres by status.
func ReservationStatuses(t testing.TB, env *Env, sale string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := env.DB.Query(ctx, `SELECT status, count(*) FROM reservations WHERE sale_id = $1 GROUP BY status`, sale)
	if err != nil {
		t.Fatalf("count reservations of %s: %v", sale, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			t.Fatalf("count reservations of %s: %v", sale, err)
		}
		out[status] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("count reservations of %s: %v", sale, err)
	}
	return out
}

// slogPrintf is fasthttp's Logger over slog, at debug level: the origin's
// ErrorHandler already answers what it reports.
type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}

// RawRequest writes raw bytes to a new connection of ln and reads one
// response, for requests a well-behaved client would not send. The write
// runs on its own goroutine and may fail once the server has answered.
func RawRequest(t testing.TB, ln *fasthttputil.InmemoryListener, raw []byte) (int, []byte) {
	t.Helper()
	conn, err := ln.Dial()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.Copy(conn, bytes.NewReader(raw)) }()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// ErrorCode returns the error field of a JSON error body, or a description
// of why there is none.
func ErrorCode(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Sprintf("(not JSON: %q)", body)
	}
	return e.Error
}
