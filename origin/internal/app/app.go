// Package app wires the origin's components from a Config: clients, stores,
// handlers and workers, with a start that waits for Redis and Postgres
// (start.go) and an ordered stop. Command origin gives it listeners and
// signals; tests start several in one process.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/serve"
	"github.com/flashgate/flashgate/origin/internal/api"
	"github.com/flashgate/flashgate/origin/internal/autotune"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/flashgate/flashgate/origin/internal/payment/razorpay"
	"github.com/flashgate/flashgate/origin/internal/payment/stripepay"
	"github.com/flashgate/flashgate/origin/internal/sales"
	"github.com/flashgate/flashgate/origin/internal/workers"
	"github.com/flashgate/flashgate/tokens"
)

// App is one origin.
type App struct {
	cfg  Config
	log  *slog.Logger
	rdb  redis.UniversalClient
	pool *pgxpool.Pool

	Catalog  *catalog.Catalog
	Checkout *checkout.Store // the sales' state in Redis
	Ledger   *ledger.Store   // the sales' books in Postgres
	Sales    *sales.Service
	Reserver *checkout.Reserver
	Writer   *workers.Writer
	Sweeper  *workers.Sweeper
	Orders   *orders.Service      // nil when payments are off
	Autotune *autotune.Controller // sets the rate of the sales ops switched autotune on for
	API      *api.Server

	// waitingFor is the start-up step (startSteps) the origin has not yet
	// done, nil once it is ready. Every request reads it, hence an atomic.
	waitingFor atomic.Pointer[string]

	stopWorkers context.CancelFunc
	workers     sync.WaitGroup // the start-up loop and the workers it starts
}

// New validates cfg and builds every component, touching no network: only
// a bad configuration fails it, never a dependency that is down. Its
// clients connect on first use; Connect, or Start, which retries Connect,
// makes the origin ready. Nothing runs until Start.
func New(cfg Config, log *slog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := tokens.ParseKeySet(cfg.TokenKeys)
	if err != nil {
		return nil, fmt.Errorf("token keys: %w", err)
	}
	users, err := userVerifier(cfg)
	if err != nil {
		return nil, err
	}
	edges, err := tokens.NewRequestVerifier(keys, tokens.RequestVerifierOptions{Audience: cfg.LineAudienceName()})
	if err != nil {
		return nil, fmt.Errorf("line requests: %w", err)
	}
	a := &App{cfg: cfg, log: log}
	if err := a.openClients(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(devModeGauge(cfg.Dev), a.readyGauge())
	a.buildStores(reg)
	if err := a.buildWorkers(reg); err != nil {
		return nil, err
	}
	a.buildAPI(reg, keys, users, edges)
	a.waitFor(a.startSteps()[0].name)
	return a, nil
}

// openClients makes the Redis client and the Postgres pool. Neither dials
// here: both connect on first use and again after a failure.
func (a *App) openClients() error {
	ropts, err := a.cfg.redis()
	if err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(a.cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("postgres url: %w", err)
	}
	// pgx's default (4 on a small machine) lets one slow transaction on the
	// hot inventory row stall every order and reservation read behind it.
	pcfg.MaxConns = int32(a.cfg.PostgresMaxConns)
	if a.rdb, err = redisconn.New(ropts); err != nil {
		return err
	}
	if a.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
		_ = a.rdb.Close()
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// buildStores builds the sales' state and books, the catalog, the reserve
// pipelines and the sales service over them.
func (a *App) buildStores(reg *prometheus.Registry) {
	cfg, log := a.cfg, a.log
	a.Checkout = checkout.NewStore(a.rdb, checkout.NewKeys(cfg.RedisPrefix), cfg.RedisRetention)
	a.Ledger = ledger.NewObserved(a.pool, reg)
	a.Catalog = catalog.New(a.Ledger, log, 0)
	ropt := checkout.ReserverOptions{
		Pipelines: cfg.ReservePipelines, MaxBatch: cfg.ReserveMaxBatch, Timeout: cfg.RequestBudget,
		WaitReplicas: cfg.ReserveWaitReplicas, WaitTimeout: cfg.ReserveWaitTimeout, Registerer: reg,
	}
	if cfg.ReserveJournal {
		ropt.Journal = a.Ledger
	} else {
		log.Warn("the reserve journal is off (FLASHGATE_RESERVE_JOURNAL=0): a Redis that loses its data loses the holds it granted since the order writer last ran")
	}
	a.Reserver = checkout.NewReserver(a.Checkout, ropt)
	a.Sales = sales.New(a.Checkout, a.Ledger, a.Catalog, a.Reserver,
		sales.Options{CheckEvery: cfg.RedisCheckInterval, MaxHoldsPerAccount: cfg.MaxHoldsPerAccount},
		log.With("component", "sales"), reg)
	// The sales' books on every scrape, for alerts (docs/OPERATIONS.md),
	// and whether the origin reaches the two stores they are read from.
	reg.MustRegister(sales.NewCollector(a.Sales,
		sales.Dependency{Name: "redis", Ping: func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() }},
		sales.Dependency{Name: "postgres", Ping: a.pool.Ping}))
}

// buildWorkers builds the order writer, the sweeper and, with a payment
// provider configured, the orders service.
func (a *App) buildWorkers(reg *prometheus.Registry) error {
	cfg, log := a.cfg, a.log
	a.Writer = workers.NewWriter(a.Checkout, a.Ledger, a.Catalog, workers.WriterOptions{
		Consumer: cfg.Instance, BatchSize: cfg.WriterBatch, ClaimIdle: cfg.WriterClaimIdle,
		Block: cfg.WriterPoll, Discover: cfg.WriterPoll,
	}, log.With("component", "writer"), reg)
	a.Sweeper = workers.NewSweeper(a.Checkout, a.Catalog, workers.SweeperOptions{Interval: cfg.SweepInterval},
		log.With("component", "sweeper"), reg)
	line := autotune.RedisLine{Client: a.rdb, Prefix: cfg.RedisPrefix}
	period := cfg.AutotunePeriod
	if period <= 0 {
		period = autotune.DefaultPeriod
	}
	a.Autotune = autotune.New(a.Ledger, &autotune.BackEnd{Gatherer: reg, Backlog: a.Sales.Backlog, Line: line.Read,
		MaxPeriod: 2 * period},
		autotune.Options{Period: period}, log.With("component", "autotune"), reg)
	if !cfg.PaymentsOn() {
		log.Warn("no payment provider configured (docs/PAYMENTS.md): orders and payments are off", "provider", cfg.PaymentProvider)
		return nil
	}
	provider, err := paymentProvider(cfg, reg)
	if err != nil {
		return err
	}
	log.Info("payments on", "provider", cfg.PaymentProvider)
	a.Orders = orders.New(a.Checkout, a.Ledger, a.Catalog, a.Sales, provider,
		orders.Options{
			Grace: cfg.PaymentGrace, ReturnURL: cfg.PaymentReturnURL,
			ReconcileEvery: cfg.ReconcileInterval, IntentWait: cfg.OrderIntentWait,
		}, log.With("component", "orders"), reg)
	return nil
}

// paymentProvider is the provider cfg chooses, with its own secrets.
func paymentProvider(cfg Config, reg prometheus.Registerer) (payment.Provider, error) {
	switch cfg.PaymentProvider {
	case ProviderStripe:
		return stripepay.New(stripepay.Config{
			SecretKey: cfg.StripeSecretKey, WebhookSecrets: secretList(cfg.StripeWebhookSecrets),
			BaseURL: cfg.StripeAPIURL, Registerer: reg,
		})
	case ProviderRazorpay:
		rc := razorpay.Config{
			KeyID: cfg.RazorpayKeyID, KeySecret: cfg.RazorpayKeySecret, WebhookSecrets: secrets(cfg.RazorpayWebhookSecrets),
			BaseURL: cfg.RazorpayAPIURL, Registerer: reg,
		}
		if err := rc.Validate(); err != nil {
			return nil, err
		}
		return razorpay.New(rc), nil
	default:
		return payment.NewClient(cfg.GatewayURL, cfg.GatewayAPIKey, payment.ClientOptions{
			Registerer: reg, WebhookSecrets: secrets(cfg.WebhookSecrets),
		}), nil
	}
}

// buildAPI builds the handlers of both listeners; edges checks the line
// requests, whose signatures the ledger records as taken.
func (a *App) buildAPI(reg *prometheus.Registry, keys *tokens.KeySet, users *tokens.UserVerifier, edges *tokens.RequestVerifier) {
	var issuer *tokens.Issuer
	if a.cfg.Dev {
		issuer = tokens.NewIssuer(keys, tokens.IssuerOptions{})
	}
	a.API = api.New(api.Deps{
		Catalog: a.Catalog, Sales: a.Sales, Ledger: a.Ledger, Orders: a.Orders,
		Verifier: tokens.NewVerifier(keys, tokens.VerifierOptions{}), Users: users, Issuer: issuer,
		Edges: edges, Signatures: a.Ledger,
		Log: a.log, Registry: reg, AdminToken: a.cfg.AdminToken, Ready: a.Ready,
	}, api.Options{Dev: a.cfg.Dev, Budget: a.cfg.RequestBudget})
}

// secrets splits a comma-separated list of webhook secrets.
func secrets(list string) [][]byte {
	var out [][]byte
	for _, s := range secretList(list) {
		out = append(out, []byte(s))
	}
	return out
}

// secretList splits a comma-separated list of secrets, dropping blanks.
func secretList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// devModeGauge is flashgate_dev_mode, 1 when dev mode is on: an alert on it
// finds a dev-mode origin wherever it runs.
func devModeGauge(dev bool) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashgate_dev_mode",
		Help: "1 when dev mode is on (FLASHGATE_DEV: dev admission tokens; user tokens checked with the dev secret), else 0."})
	if dev {
		g.Set(1)
	}
	return g
}

// userVerifier checks user tokens with the shop's key or, in dev mode,
// with the dev secret the edges' dev logins sign with: a production origin
// refuses dev logins' tokens, and a dev-mode origin the shop's.
func userVerifier(cfg Config) (*tokens.UserVerifier, error) {
	key := tokens.UserKey{HMACSecret: []byte(cfg.UserTokenSecret)}
	switch {
	case cfg.Dev:
		key = tokens.UserKey{HMACSecret: []byte(cfg.DevUserTokenSecret)}
	case cfg.UserTokenPublicKeyFile != "":
		pemBytes, err := os.ReadFile(cfg.UserTokenPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("user token key: %w", err)
		}
		pub, err := tokens.ParsePublicKeyPEM(pemBytes)
		if err != nil {
			return nil, fmt.Errorf("user token key: %w", err)
		}
		key = tokens.UserKey{PublicKey: pub}
	}
	v, err := tokens.NewUserVerifier(key, tokens.UserVerifierOptions{Issuer: cfg.UserTokenIssuer, Audience: cfg.UserTokenAudience})
	if err != nil {
		return nil, fmt.Errorf("user token key: %w", err)
	}
	return v, nil
}

// Body bounds of the two listeners, in bytes: a public request carries a
// reserve, an order, a line request or a gateway's webhook; an admin one a
// sale definition.
const (
	MaxPublicRequestBody = 64 << 10
	MaxAdminRequestBody  = 2 << 20
)

// PublicServer is the server of the public listener: Server for the
// public handler, bodies up to MaxPublicRequestBody.
func (a *App) PublicServer() *fasthttp.Server { return a.Server(a.API.Public(), MaxPublicRequestBody) }

// AdminServer is the server of the admin listener: Server for the admin
// handler, bodies up to MaxAdminRequestBody.
func (a *App) AdminServer() *fasthttp.Server { return a.Server(a.API.Admin(), MaxAdminRequestBody) }

// Server returns a fasthttp server for one of the app's handlers, with the
// limits every listener needs: heads up to MaxRequestHeadBytes, bodies up
// to maxBody, strict HTTP/1.x only.
func (a *App) Server(h fasthttp.RequestHandler, maxBody int) *fasthttp.Server {
	return serve.NewServer(h, serve.ServerOptions{
		Name: "flashgate-origin", MaxHeadBytes: a.cfg.MaxRequestHeadBytes, MaxBodyBytes: maxBody,
		ReadTimeout: a.cfg.ReadTimeout, WriteTimeout: 5 * time.Second,
	})
}

// Stop is the second half of an ordered shutdown, after the listeners have
// stopped and drained: it stops new reserves, then the start-up attempts
// if the origin is still waiting for its dependencies, or else the workers
// (each finishes the batch in hand), then closes the clients. ctx bounds
// the wait. It may follow New without Start.
func (a *App) Stop(ctx context.Context) error {
	a.Reserver.Close()
	if a.stopWorkers != nil {
		a.stopWorkers()
	}
	done := make(chan struct{})
	go func() {
		a.workers.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.New("workers did not stop in time")
	}
	a.closeClients()
	return err
}

func (a *App) closeClients() {
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
}
