// Package app wires an edge node from a Config: Redis, the origin and shop
// upstreams, tokens, limits and handlers, with the loops that keep its
// views fresh, a start and an ordered stop. Command edge gives it
// listeners and signals; tests start several in one process.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/api"
	"github.com/flashgate/flashgate/edge/internal/assets"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/edge/internal/limitstore"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/proxy"
	"github.com/flashgate/flashgate/edge/internal/roster"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/serve"
	"github.com/flashgate/flashgate/static"
	"github.com/flashgate/flashgate/tokens"
)

// App is one edge node.
type App struct {
	cfg Config
	log *slog.Logger
	rdb redis.UniversalClient

	Snapshots *snapshot.Cache
	Admission *admission.Controller // the tick, and the views handlers answer from
	Cursor    *admission.Cursor     // the controller's, for benchmarks that read it
	Line      *line.Keeper
	Defences  *defence.Defences // the tarpit, trust rules and network limits, shared with the other nodes
	Roster    *roster.Roster    // the nodes sharing this Redis, for the ops dashboard
	API       *api.Server

	stopLoops context.CancelFunc
	loops     sync.WaitGroup
}

// snapshotConns is the origin pool of the snapshot refresh: a few requests
// every refresh, which no other traffic may crowd out. Snapshot fetches use
// all but one of them at once, so the list of sales always finds one free.
const snapshotConns = 8

// New builds an edge node; nothing runs until Start. Neither Redis nor the
// origin need be up: the node answers please_wait until they are.
func New(cfg Config, log *slog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log}
	ropts, err := cfg.redis()
	if err != nil {
		return nil, err
	}
	if a.rdb, err = redisconn.New(ropts); err != nil {
		return nil, err
	}

	keys, err := tokens.ParseKeySet(cfg.TokenKeys)
	if err != nil {
		return nil, fmt.Errorf("token keys: %w", err)
	}
	users, devUsers, err := userTokens(cfg)
	if err != nil {
		return nil, err
	}
	// Three pools to the origin, so no kind of traffic can take another's
	// connections: reserves, payments (orders, reservations, the webhook),
	// and the snapshot refresh every status poll is answered from.
	origin, err := proxy.New(cfg.OriginURL, proxy.Options{MaxConns: cfg.OriginMaxConns, Timeout: cfg.OriginTimeout, QueueTimeout: cfg.OriginQueueTimeout})
	if err != nil {
		return nil, err
	}
	payments, err := proxy.New(cfg.OriginURL, proxy.Options{MaxConns: cfg.OriginPaymentsMaxConns, Timeout: cfg.OriginTimeout, QueueTimeout: cfg.OriginPaymentsQueueTimeout})
	if err != nil {
		return nil, err
	}
	// A snapshot is dated from the start of its fetch, so one that takes
	// longer than SnapshotStaleAfter would arrive stale: stop waiting then.
	control, err := proxy.New(cfg.OriginURL, proxy.Options{MaxConns: snapshotConns, Timeout: min(cfg.OriginTimeout, cfg.SnapshotStaleAfter)})
	if err != nil {
		return nil, err
	}
	var shop *proxy.Upstream
	if cfg.ShopURL != "" {
		if shop, err = proxy.New(cfg.ShopURL, proxy.Options{MaxConns: cfg.ShopMaxConns, Timeout: cfg.ShopTimeout}); err != nil {
			return nil, err
		}
	}
	page, err := assets.Handler(static.Files)
	if err != nil {
		return nil, err
	}
	trusted, err := cfg.trustedProxies()
	if err != nil {
		return nil, err
	}
	webhookAllow, err := cfg.webhookAllow()
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(devModeGauge(cfg.Dev))

	qkeys := line.NewKeys(cfg.RedisPrefix)
	a.Snapshots = snapshot.New(control, log, snapshot.Options{Concurrency: snapshotConns - 1})
	a.Cursor = admission.NewCursor(a.rdb, qkeys, nil)
	// The line's durable copy lives in the origin, written over a pool of
	// its own with requests signed by the token keys.
	lineStore, err := line.NewOriginStore(cfg.OriginURL, keys, cfg.LineAudience, cfg.OriginTimeout)
	if err != nil {
		return nil, err
	}
	a.Line = line.New(line.NewLines(a.rdb, qkeys, nil), lineStore, a.Cursor, line.Options{
		DefaultRatePerSecond: cfg.DefaultRatePerSecond, BlockWindow: cfg.LineBlockWindow, MinBlock: int64(cfg.LineMinBlock),
		Joiner: line.JoinerOptions{Pipelines: cfg.JoinPipelines},
	}, log.With("component", "line"), reg)
	var hold func() bool
	if cfg.AdmissionHoldAfter > 0 {
		hold = admission.CheckoutHold(cfg.AdmissionHoldAfter, map[string]admission.Sojourns{"origin": origin, "origin_payments": payments}, reg)
	}
	a.Admission = admission.New(a.Cursor, a.Snapshots, a.Line, admission.Options{
		StaleAfter: cfg.StaleAfter, SnapshotStaleAfter: cfg.SnapshotStaleAfter, Hold: hold,
		// The API, made below and before the first tick, decides the
		// difficulty a join needs; the snapshot publishes its challenge.
		Challenge: func(sale string, saleBits int, now time.Time) (admission.Challenge, bool) {
			return a.API.PublishChallenge(sale, saleBits, now)
		},
	}, reg)
	challenges, err := challenge.New(keys, challenge.Options{})
	if err != nil {
		return nil, err
	}
	a.Defences = defence.New(a.rdb, cfg.RedisPrefix, defence.Options{
		Defaults: defence.DefaultSettings(cfg.LimitJoinSubnet, cfg.LimitPollSubnet),
		Log:      log.With("component", "defences"), Registry: reg,
	})
	a.Roster = roster.New(a.rdb, cfg.RedisPrefix, instanceName(cfg.Instance), func() roster.State {
		r := a.Admission.Readiness()
		return roster.State{Ready: r.Ready, OriginOK: r.ListCurrent, RedisOK: r.TickCurrent}
	})
	a.API = api.New(api.Deps{
		Admission: a.Admission, Line: a.Line, Challenges: challenges, Defences: a.Defences,
		Snapshots: a.Snapshots, Ops: lineStore, Roster: a.Roster,
		// Ops' defence changes and tarpit releases are recorded at the
		// origin through the same store before they are made.
		Audit:    lineStore,
		Tokens:   tokens.NewVerifier(keys, tokens.VerifierOptions{}),
		Issuer:   tokens.NewIssuer(keys, tokens.IssuerOptions{AdmissionTTL: cfg.AdmissionTokenTTL}),
		Users:    users,
		DevUsers: devUsers,
		Origin:   origin, Payments: payments, Shop: shop, Static: page,
		Limits:     limits(cfg, reg),
		Log:        log,
		Registry:   reg,
		AdminToken: cfg.AdminToken,
	}, api.Options{TrustedProxies: trusted, PublicHost: cfg.PublicHost, WebhookAllow: webhookAllow, WebhookMaxBodyBytes: cfg.WebhookMaxBodyBytes,
		MaxHeldSnapshots: cfg.MaxHeldSnapshots})
	return a, nil
}

// userTokens returns the verifier of user tokens and, in dev mode, the
// issuer of POST /v1/dev/login. Dev mode signs and checks with its own
// secret, never the shop's: a dev login cannot mint a token the shop's
// production key accepts, nor can the shop's tokens be used in dev mode.
func userTokens(cfg Config) (*tokens.UserVerifier, *tokens.DevUserIssuer, error) {
	key := tokens.UserKey{HMACSecret: []byte(cfg.UserTokenSecret)}
	switch {
	case cfg.Dev:
		key = tokens.UserKey{HMACSecret: []byte(cfg.DevUserTokenSecret)}
	case cfg.UserTokenPublicKeyFile != "":
		pemBytes, err := os.ReadFile(cfg.UserTokenPublicKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("user token key: %w", err)
		}
		pub, err := tokens.ParsePublicKeyPEM(pemBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("user token key: %w", err)
		}
		key = tokens.UserKey{PublicKey: pub}
	}
	v, err := tokens.NewUserVerifier(key, tokens.UserVerifierOptions{Issuer: cfg.UserTokenIssuer, Audience: cfg.UserTokenAudience})
	if err != nil {
		return nil, nil, fmt.Errorf("user token key: %w", err)
	}
	var dev *tokens.DevUserIssuer
	if cfg.Dev {
		dev = tokens.NewDevUserIssuer([]byte(cfg.DevUserTokenSecret), cfg.UserTokenIssuer, 0, nil)
	}
	return v, dev, nil
}

// devModeGauge is flashgate_dev_mode, 1 when dev mode is on: an alert on it
// finds a dev-mode node wherever it runs.
func devModeGauge(dev bool) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashgate_dev_mode",
		Help: "1 when dev mode is on (FLASHGATE_DEV: POST /v1/dev/login signs user tokens for any account), else 0."})
	if dev {
		g.Set(1)
	}
	return g
}

// limits builds the in-memory limiters: a status poll must cost no Redis
// call, so limits are per node (a shopper's budget is the limit times the
// number of nodes the load balancer spreads them over). Each limit has a
// store of its own holding at most cfg.LimitMaxKeys keys; the keys pushed
// out at the cap are counted on /metrics.
func limits(cfg Config, reg prometheus.Registerer) api.Limits {
	newStore := func(name string) *limitstore.Store {
		store := limitstore.New(limitstore.Options{MaxKeys: cfg.LimitMaxKeys})
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "flashgate_edge_limit_keys_evicted_total",
			Help:        "Rate-limit keys forgotten before their window ended because the limit held FLASHGATE_LIMIT_MAX_KEYS keys.",
			ConstLabels: prometheus.Labels{"limit": name},
		}, func() float64 { return float64(store.Evicted()) }))
		return store
	}
	build := func(name, format string) *limiter.Limiter {
		if format == "" {
			return nil
		}
		rate, _ := limiter.NewRateFromFormatted(format) // checked by Validate
		return limiter.New(newStore(name), rate)
	}
	return api.Limits{
		JoinIP:           build(api.LimitJoinIP, cfg.LimitJoinIP),
		JoinSubnet:       newStore(api.LimitJoinSubnet), // at the defence settings' rate, which ops tune
		JoinAccount:      build(api.LimitJoinAccount, cfg.LimitJoinAccount),
		PollIP:           build(api.LimitPollIP, cfg.LimitPollIP),
		PollSubnet:       newStore(api.LimitPollSubnet),
		PollAccount:      build(api.LimitPollAccount, cfg.LimitPollAccount),
		ReserveIP:        build(api.LimitReserveIP, cfg.LimitReserveIP),
		ReserveAccount:   build(api.LimitReserveAccount, cfg.LimitReserveAccount),
		OrderAccount:     build(api.LimitOrderAccount, cfg.LimitOrderAccount),
		OrderReadAccount: build(api.LimitOrderReadAccount, cfg.LimitOrderReadAccount),
		WebhookIP:        build(api.LimitWebhookIP, cfg.LimitWebhookIP),
	}
}

// Redis is the node's Redis client, for tests that count its commands.
func (a *App) Redis() redis.UniversalClient { return a.rdb }

// Start runs the loops that keep the node's views fresh: snapshots from
// origin (also as soon as a handler kicks the cache), and the admission
// tick.
func (a *App) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopLoops = cancel
	a.every(ctx, a.cfg.SnapshotRefresh, a.Snapshots.Kicks(), "snapshot refresh", a.Snapshots.Refresh)
	a.every(ctx, a.cfg.Tick, nil, "admission tick", a.Admission.Tick)
	a.every(ctx, time.Second, nil, "defences sync", a.Defences.Sync)
	a.every(ctx, time.Second, nil, "roster beat", a.Roster.Beat)
}

// instanceName is the node's name on the roster: name, or the host name
// and a suffix random to this start (two nodes on one host, or in one
// test process, are two nodes).
func instanceName(name string) string {
	if name != "" {
		return name
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "edge"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// every runs f now, then every period and whenever wake delivers (nil:
// never), until ctx ends, logging failures once per change of state rather
// than every tick.
func (a *App) every(ctx context.Context, period time.Duration, wake <-chan struct{}, what string, f func(context.Context) error) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		failing := false
		for {
			c, cancel := context.WithTimeout(ctx, max(period, time.Second))
			err := f(c)
			cancel()
			switch {
			case err != nil && !failing && ctx.Err() == nil:
				a.log.Warn(what+" failing", "err", err)
				failing = true
			case err == nil && failing:
				a.log.Info(what + " recovered")
				failing = false
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-wake:
			}
		}
	}()
}

// Server returns a fasthttp server for one of the node's handlers, with
// the limits every listener needs: heads up to MaxRequestHeadBytes and
// strict HTTP/1.x only.
func (a *App) Server(h fasthttp.RequestHandler) *fasthttp.Server {
	return serve.NewServer(h, serve.ServerOptions{
		Name: "flashgate-edge", MaxHeadBytes: a.cfg.MaxRequestHeadBytes, MaxBodyBytes: maxRequestBodyBytes,
		ReadTimeout: a.cfg.ReadTimeout, WriteTimeout: 10 * time.Second,
	})
}

// Stop, after the listeners have drained: stop the loops, then the line's
// joins and steps in flight, close Redis. ctx bounds the wait.
func (a *App) Stop(ctx context.Context) error {
	if a.stopLoops != nil {
		a.stopLoops()
	}
	done := make(chan struct{})
	go func() {
		a.loops.Wait()
		a.Snapshots.Wait() // fetches that outlived their round
		a.Line.Close()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.New("edge loops did not stop in time")
	}
	_ = a.rdb.Close()
	return err
}
