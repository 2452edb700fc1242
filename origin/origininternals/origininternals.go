// Package origininternals opens the origin's internals to the benchmarks under
// bench/, which Go's internal rule keeps out of origin/internal: they measure
// the real reserve path (checkout.Reserver), its real journal (the ledger in
// Postgres) and the real HTTP handler (app.App), not copies of them. Only
// bench/ imports it.
package origininternals

import (
	"context"
	"log/slog"

	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// The origin's types under names bench/ can reach.
type (
	App             = app.App
	Config          = app.Config
	Store           = checkout.Store
	Counts          = intent.Stock
	Reserver        = checkout.Reserver
	ReserverOptions = checkout.ReserverOptions
	ReserveRequest  = checkout.ReserveRequest
	Outcome         = checkout.Outcome
	Journal         = checkout.Journal
	Ledger          = ledger.Store // its RecordGrants is the origin's reserve journal
	LedgerSale      = ledger.Sale
	LedgerSKU       = ledger.SKU
)

// Created is the outcome of a reserve that took a unit.
const Created = checkout.Created

// The origin's constructors.
var (
	DefaultConfig = app.DefaultConfig
	NewStore      = checkout.NewStore
	NewKeys       = checkout.NewKeys
	NewReserver   = checkout.NewReserver
	NewLedger     = ledger.New
	Migrate       = ledger.Migrate // the ledger's schema, reserve journal included
)

// NewApp builds an origin and connects it once (app.New, then
// App.Connect): the benchmarks measure a ready origin, and a dependency
// that is down fails them rather than waits.
func NewApp(ctx context.Context, cfg Config, log *slog.Logger) (*App, error) {
	a, err := app.New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := a.Connect(ctx); err != nil {
		_ = a.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return a, nil
}
