// Package reservescript runs the origin's reserve script as the origin runs
// it, through checkout.Reserver with its pipelines and durability options
// (the Postgres reserve journal, WAIT for replicas), with no HTTP, token
// check or catalog in front: the reserve benchmark's script path. Go's
// internal rule keeps origin/internal out of bench/, so it reaches the
// Reserver through origin/origininternals.
package reservescript

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/origin/origininternals"
)

// epoch is the epoch every benchmark sale is loaded under; the journal
// keeps only grants of it.
const epoch = "bench"

// Request is one reserve as the origin's handler would make it.
type Request struct {
	Sale, SKU, Account, TokenID, IdempotencyKey string
	HoldTTL                                     time.Duration
}

// ReserverOptions are checkout.ReserverOptions; zero fields take the
// Reserver's own defaults.
type ReserverOptions struct {
	Pipelines int `json:"pipelines"` // pipelines in flight at once
	MaxBatch  int `json:"max_batch"` // reserves per pipeline
}

// DefaultReserverOptions are the origin's configured defaults.
func DefaultReserverOptions() ReserverOptions {
	c := origininternals.DefaultConfig()
	return ReserverOptions{Pipelines: c.ReservePipelines, MaxBatch: c.ReserveMaxBatch}
}

// DefaultWaitTimeout is the origin's default for how long a reserve
// pipeline's WAIT waits for its replicas.
func DefaultWaitTimeout() time.Duration { return origininternals.DefaultConfig().ReserveWaitTimeout }

// Durable is how a Reserver makes a pipeline's grants durable before it
// answers them (checkout.ReserverOptions.Journal, WaitReplicas and
// WaitTimeout); the zero value adds nothing.
type Durable struct {
	Journal      *Journal      // nil: no journal
	WaitReplicas int           // 0: no WAIT
	WaitTimeout  time.Duration // 0: the origin's default
}

// Path is the reserve script on one Redis, with its keys under a prefix.
type Path struct{ store *origininternals.Store }

// New returns the script path over rdb, with keys under prefix; per-shopper
// keys expire after retention.
func New(rdb redis.UniversalClient, prefix string, retention time.Duration) *Path {
	return &Path{store: origininternals.NewStore(rdb, origininternals.NewKeys(prefix), retention)}
}

// Load puts stock units of sku into sale's inventory hash.
func (p *Path) Load(ctx context.Context, sale, sku string, stock int64) error {
	_, err := p.store.Load(ctx, sale, epoch, map[string]origininternals.Counts{sku: {Total: stock, Available: stock}})
	return err
}

// Reserver starts a checkout.Reserver with opts; Close it when done.
func (p *Path) Reserver(opts ReserverOptions) *Reserver { return p.DurableReserver(opts, Durable{}) }

// DurableReserver starts a checkout.Reserver with opts that makes its
// grants durable as d says; Close it when done.
func (p *Path) DurableReserver(opts ReserverOptions, d Durable) *Reserver {
	o := origininternals.ReserverOptions{Pipelines: opts.Pipelines, MaxBatch: opts.MaxBatch,
		WaitReplicas: d.WaitReplicas, WaitTimeout: d.WaitTimeout}
	if d.Journal != nil { // a nil *Journal in the interface would not read as "no journal"
		o.Journal = d.Journal.ledger
	}
	return &Reserver{origininternals.NewReserver(p.store, o)}
}

// Reserver is a running checkout.Reserver.
type Reserver struct{ r *origininternals.Reserver }

// Run makes reserves reqs[d.First] to reqs[d.First+d.Calls-1] from
// d.Workers goroutines, each labelled with its outcome code.
func (r *Reserver) Run(ctx context.Context, d loadgen.Options, reqs []Request) loadgen.Result {
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

// Close stops the Reserver's pipelines.
func (r *Reserver) Close() { r.r.Close() }

// Created is the outcome code of a reserve that took a unit.
const Created = int(origininternals.Created)

// OutcomeName names an outcome code ("created", "sold_out", ...).
func OutcomeName(code int) string { return origininternals.Outcome(code).String() }

// Source reads reserve.lua from the repository that contains the working
// directory: the file checkout embeds when `go run` builds it.
func Source() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reserve.lua: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "origin", "internal", "checkout", "reserve.lua"))
		if err == nil {
			return string(b), nil
		}
		if _, statErr := os.Stat(filepath.Join(dir, "go.work")); statErr == nil {
			return "", fmt.Errorf("reserve.lua in the repository at %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("reserve.lua: run from inside the flashgate repository")
		}
		dir = parent
	}
}
