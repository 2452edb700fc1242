package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origininternals"
)

// OriginConfig is one in-process origin.
type OriginConfig struct {
	RedisURL    string
	PostgresURL string // the database; the origin works in Schema
	// Schema is the Postgres schema StartOrigin creates for the origin
	// (lowercase letters, digits and _) and Stop drops.
	Schema      string
	RedisPrefix string
	TokenKeys   string // admission-token key set spec (tokens.ParseKeySet)
	UserSecret  string // HS256 secret of user tokens
	// ReservePipelines and ReserveMaxBatch set the Reserver; 0 keeps the
	// origin's defaults.
	ReservePipelines, ReserveMaxBatch int
	Workers                           bool         // start the order writer, sweeper and catalog refresh
	NoJournal                         bool         // answer reserves without journaling them (FLASHGATE_RESERVE_JOURNAL=0)
	Log                               *slog.Logger // nil discards the origin's log
	// Sales are created in order through the admin handler.
	Sales []Sale
}

// Sale is one sale for StartOrigin to create: open from a minute before the start
// of the run for an hour, with Stock units of one SKU (0 makes a sale that
// is sold out from the start).
type Sale struct {
	Sale, SKU string
	Stock     int
}

// Origin is a running origin.
type Origin struct {
	Addr string // host:port of the public listener
	stop func(context.Context) error
}

// Stop stops accepting, drains, stops the app (reserver, workers, clients),
// then drops the origin's schema.
func (o *Origin) Stop(ctx context.Context) error { return o.stop(ctx) }

// LineAudience is the name the bench's origins take line requests for;
// the bench's edges sign for it.
const LineAudience = "flashgate-bench"

// StartOrigin creates the origin's schema, builds an origin with app.New, creates
// the sales through its admin handler, and serves its public handler on
// 127.0.0.1.
func StartOrigin(ctx context.Context, c OriginConfig) (_ *Origin, err error) {
	schemaURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, c.Schema)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, drop(context.WithoutCancel(ctx)))
		}
	}()
	cfg := origininternals.DefaultConfig()
	cfg.RedisURL = c.RedisURL
	cfg.PostgresURL = schemaURL
	cfg.RedisPrefix = c.RedisPrefix
	cfg.AdminToken = testenv.RandomHex(32) // 32 random bytes, as strong as the origin requires
	cfg.TokenKeys = c.TokenKeys
	cfg.UserTokenSecret = c.UserSecret
	cfg.Instance = c.RedisPrefix + "origin"
	// The origin is served on a listener of the run's own, not cfg.Addr:
	// it takes the edges' line requests signed for LineAudience.
	cfg.LineAudience = LineAudience
	if c.ReservePipelines > 0 {
		cfg.ReservePipelines = c.ReservePipelines
	}
	if c.ReserveMaxBatch > 0 {
		cfg.ReserveMaxBatch = c.ReserveMaxBatch
	}
	if c.NoJournal {
		cfg.ReserveJournal = false
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := origininternals.NewApp(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = a.Stop(context.WithoutCancel(ctx))
		}
	}()
	for _, sale := range c.Sales {
		if err := createSale(a.API.Admin(), cfg.AdminToken, sale); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("origin: listen: %w", err)
	}
	srv := a.PublicServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if c.Workers {
		a.Start()
	}
	return &Origin{Addr: ln.Addr().String(), stop: func(ctx context.Context) error {
		errs := []error{srv.ShutdownWithContext(ctx)}
		if err := <-served; err != nil {
			errs = append(errs, fmt.Errorf("origin: serve: %w", err))
		}
		errs = append(errs, a.Stop(ctx), drop(ctx))
		return errors.Join(errs...)
	}}, nil
}

// createSale posts the sale to the admin handler in memory, as an operator
// would over the admin listener: Postgres first, then Redis, then the catalog.
func createSale(admin fasthttp.RequestHandler, token string, c Sale) error {
	now := time.Now().UTC()
	body, err := json.Marshal(map[string]any{
		"sale_id":    c.Sale,
		"name":       "benchmark sale",
		"starts_at":  now.Add(-time.Minute),
		"ends_at":    now.Add(time.Hour),
		"hold_ttl_s": 600,
		"skus": []map[string]any{{
			"sku": c.SKU, "name": "bench unit", "price_minor": 100, "currency": "INR", "stock": c.Stock,
		}},
	})
	if err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/admin/sales")
	req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+token)
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	var rc fasthttp.RequestCtx
	rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	admin(&rc)
	if code := rc.Response.StatusCode(); code != fasthttp.StatusCreated {
		return fmt.Errorf("create sale %s: status %d: %s", c.Sale, code, rc.Response.Body())
	}
	return nil
}
