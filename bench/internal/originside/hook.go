package originside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/origin/origininternals"
)

func defaultReserverOptions() ReserverOptions {
	c := origininternals.DefaultConfig()
	return ReserverOptions{Pipelines: c.ReservePipelines, MaxBatch: c.ReserveMaxBatch}
}

// benchEpoch is the epoch every benchmark sale is loaded under.
const benchEpoch = "bench"

type scriptPath struct{ store *origininternals.Store }

var _ ScriptPath = (*scriptPath)(nil)

func newScriptPath(rdb redis.UniversalClient, prefix string, retention time.Duration) (ScriptPath, error) {
	return &scriptPath{store: origininternals.NewStore(rdb, origininternals.NewKeys(prefix), retention)}, nil
}

func (s *scriptPath) Load(ctx context.Context, sale, sku string, stock int64) error {
	_, err := s.store.Load(ctx, sale, benchEpoch, map[string]origininternals.Counts{sku: {Total: stock, Available: stock}})
	return err
}

func (s *scriptPath) Reserver(opts ReserverOptions) Reserver {
	return s.DurableReserver(opts, Durable{})
}

func (s *scriptPath) DurableReserver(opts ReserverOptions, d Durable) Reserver {
	o := origininternals.ReserverOptions{Pipelines: opts.Pipelines, MaxBatch: opts.MaxBatch,
		WaitReplicas: d.WaitReplicas, WaitTimeout: d.WaitTimeout}
	if d.Journal != nil { // a nil *Journal in the interface would not read as "no journal"
		o.Journal = d.Journal.ledger
	}
	return reserver{origininternals.NewReserver(s.store, o)}
}

type reserver struct{ r *origininternals.Reserver }

func (r reserver) Run(ctx context.Context, d loadgen.Options, reqs []Request) loadgen.Result {
	return loadgen.Run(ctx, d, func() loadgen.Func {
		return func(ctx context.Context, i int) (int, error) {
			q := &reqs[i]
			res, err := r.r.Reserve(ctx, origininternals.ReserveRequest{
				Sale: q.Sale, SKU: q.SKU, Account: q.Account, TokenID: q.TokenID,
				IdempotencyKey: q.IdempotencyKey, HoldTTL: q.HoldTTL,
			})
			return int(res.Outcome), err
		}
	})
}

func (r reserver) Close() { r.r.Close() }

func (s *scriptPath) Created() int { return int(origininternals.Created) }

func (s *scriptPath) OutcomeName(code int) string { return origininternals.Outcome(code).String() }

func startOrigin(ctx context.Context, c OriginConfig) (_ *Origin, err error) {
	cfg := origininternals.DefaultConfig()
	cfg.RedisURL = c.RedisURL
	cfg.PostgresURL = c.PostgresURL
	cfg.RedisPrefix = c.RedisPrefix
	cfg.AdminToken = "reservebench-admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.Dev = true
	cfg.TokenKeys = c.TokenKeys
	cfg.UserTokenSecret = c.UserSecret
	cfg.Instance = c.RedisPrefix + "origin"
	if c.Reserver.Pipelines > 0 {
		cfg.ReservePipelines = c.Reserver.Pipelines
	}
	if c.Reserver.MaxBatch > 0 {
		cfg.ReserveMaxBatch = c.Reserver.MaxBatch
	}
	if c.NoJournal {
		cfg.ReserveJournal = false
	}
	a, err := origininternals.NewApp(ctx, cfg, c.Log)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = a.Stop(context.WithoutCancel(ctx))
		}
	}()
	for _, sale := range append([]SaleSpec{{Sale: c.Sale, SKU: c.SKU, Stock: c.Stock}}, c.Sales...) {
		if err := createSale(a.API.Admin(), cfg.AdminToken, sale); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("origin: listen: %w", err)
	}
	srv := a.Server(a.API.Public(), 64<<10) // as origin's run.go serves it
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
		errs = append(errs, a.Stop(ctx))
		return errors.Join(errs...)
	}}, nil
}

// createSale posts the sale to the admin handler in memory, as an operator
// would over the admin listener: Postgres first, then Redis, then the catalog.
func createSale(admin fasthttp.RequestHandler, token string, c SaleSpec) error {
	now := time.Now().UTC()
	body, err := json.Marshal(map[string]any{
		"sale_id":    c.Sale,
		"name":       "reservebench",
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
		return fmt.Errorf("create sale: status %d: %s", code, rc.Response.Body())
	}
	return nil
}
