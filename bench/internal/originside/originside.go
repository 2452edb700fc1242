// Package originside is the part of the reserve benchmark that runs origin
// code: checkout.Reserver against Redis, and app.App behind a real listener.
// Go's internal rule keeps origin/internal out of bench/, so this package
// reaches it through the small exported package origin/originbench.
package originside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/origin/origininternals"
)

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

// ScriptPath runs reserves through checkout.Reserver alone: no HTTP, no
// token check, no catalog.
type ScriptPath interface {
	// Load puts stock units of sku into sale's inventory hash.
	Load(ctx context.Context, sale, sku string, stock int64) error
	// Reserver starts a checkout.Reserver with opts; Close it when done.
	Reserver(opts ReserverOptions) Reserver
	// DurableReserver starts a checkout.Reserver with opts that makes its
	// grants durable as d says; Close it when done.
	DurableReserver(opts ReserverOptions, d Durable) Reserver
	// Created is the outcome code of a reserve that took a unit.
	Created() int
	// OutcomeName names an outcome code ("created", "sold_out", ...).
	OutcomeName(code int) string
}

// Durable is how a Reserver makes a pipeline's grants durable before it
// answers them (checkout.ReserverOptions.Journal, WaitReplicas and
// WaitTimeout); the zero value adds nothing.
type Durable struct {
	Journal      *Journal      // nil: no journal
	WaitReplicas int           // 0: no WAIT
	WaitTimeout  time.Duration // 0: the origin's default
}

// Journal is the origin's reserve journal (ledger.Store.RecordGrants into
// reserve_journal) in a Postgres schema of the benchmark's own.
type Journal struct {
	pool   *pgxpool.Pool
	ledger *origininternals.Ledger
}

// OpenJournal connects to pgURL, whose search_path names an empty schema,
// applies the ledger's migrations there and creates sale with stock units
// of sku (journal rows reference their sale). Close it when done.
func OpenJournal(ctx context.Context, pgURL, sale, sku string, stock int) (*Journal, error) {
	return openJournal(ctx, pgURL, sale, sku, stock)
}

// Reserver is a running checkout.Reserver.
type Reserver interface {
	// Run makes reserves reqs[d.First] to reqs[d.First+d.Calls-1] from
	// d.Workers goroutines, each labelled with its outcome code.
	Run(ctx context.Context, d loadgen.Options, reqs []Request) loadgen.Result
	// Close stops the Reserver's pipelines.
	Close()
}

// OriginConfig is one in-process origin.
type OriginConfig struct {
	RedisURL    string
	PostgresURL string // its search_path names the origin's own schema
	RedisPrefix string
	Sale, SKU   string
	Stock       int    // units of SKU in the sale
	TokenKeys   string // admission-token key set spec (tokens.ParseKeySet)
	UserSecret  string // HS256 secret of user tokens
	Reserver    ReserverOptions
	Workers     bool // start the order writer, sweeper and catalog refresh
	NoJournal   bool // answer reserves without journaling them (FLASHGATE_RESERVE_JOURNAL=0)
	Log         *slog.Logger
	// Sales are more sales to create after Sale, each with one SKU; nil
	// creates none.
	Sales []SaleSpec
}

// SaleSpec is one more sale for StartOrigin to create: open from a minute
// before the start of the run for an hour, with stock units of one SKU (0
// makes a sale that is sold out from the start).
type SaleSpec struct {
	Sale, SKU string
	Stock     int
}

// Origin is a running origin: app.New's App with its public handler served
// by App.Server on a 127.0.0.1 port of its own.
type Origin struct {
	Addr string // host:port of the public listener
	stop func(context.Context) error
}

// Stop stops accepting, drains, then stops the app (reserver, workers, clients).
func (o *Origin) Stop(ctx context.Context) error { return o.stop(ctx) }

// ReserveScriptSource reads reserve.lua from the repository that contains
// the working directory: the file checkout embeds when `go run` builds it.
func ReserveScriptSource() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reserve.lua: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "origin", "internal", "checkout", "reserve.lua"))
		if err == nil {
			return string(b), nil
		}
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			return "", fmt.Errorf("reserve.lua in module at %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("reserve.lua: run from inside the flashgate repository")
		}
		dir = parent
	}
}

// NewScriptPath returns the script path over rdb, with keys under prefix;
// per-shopper keys expire after retention.
func NewScriptPath(rdb redis.UniversalClient, prefix string, retention time.Duration) (ScriptPath, error) {
	return newScriptPath(rdb, prefix, retention)
}

// StartOrigin builds an origin with app.New, creates the sale through its
// admin handler, and serves its public handler on 127.0.0.1.
func StartOrigin(ctx context.Context, c OriginConfig) (*Origin, error) { return startOrigin(ctx, c) }

// DefaultWaitTimeout is the origin's default for how long a reserve
// pipeline's WAIT waits for its replicas.
func DefaultWaitTimeout() time.Duration { return origininternals.DefaultConfig().ReserveWaitTimeout }

// DefaultReserverOptions are the origin's configured defaults.
func DefaultReserverOptions() ReserverOptions { return defaultReserverOptions() }
