// Package sales administers the origin's sales over its two stores: Redis
// (checkout), the live gate, and Postgres (ledger), which has the last word.
// It creates a sale in both, takes reserves within a sale's window and
// limits, shows a sale's stock as shoppers see it and its
// books as ops see them (Redis and Postgres side by side, with the drift
// between them), finds a reservation wherever it stands, and guards against
// Redis losing a sale: it detects the loss, reports it, and rebuilds the
// sale from Postgres and the reserve journal — on its watch, at start-up,
// and when ops ask.
package sales

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Errors the API maps to answers. The stores' own sentinels come through
// as they are: catalog.ErrUnknownSale, ledger.ErrSaleExists and
// checkout.ErrStockMismatch.
var (
	// ErrUnknownReservation: no such reservation (for this account).
	ErrUnknownReservation = errors.New("sales: no such reservation")
	// ErrRestoring: Redis lost the sale and it is being restored from
	// Postgres; the same call succeeds shortly.
	ErrRestoring = errors.New("sales: the sale is being restored from postgres; try again shortly")
	// ErrRebuildRunning: a rebuild was asked for while another rebuild of
	// the sale runs.
	ErrRebuildRunning = errors.New("sales: a rebuild of this sale is already running")
	// ErrDrainTimeout: the intents did not drain in time; nothing was rebuilt.
	ErrDrainTimeout = errors.New("sales: pending intents did not drain in time")
)

// Options tune the service.
type Options struct {
	// CheckEvery is how often Run checks that Redis still holds each
	// current sale. Required for Run (app.Config.RedisCheckInterval).
	CheckEvery time.Duration
	// Clock is the service's time (which sales are current, a snapshot's
	// status, whether a sale takes reserves) and Run's; nil means clock.Real.
	Clock clock.Clock
	// MaxHoldsPerAccount caps the holds one account may take in a sale,
	// those that ran out or were cancelled included (a hold that runs out
	// returns its unit to the line, but an account must not keep it by
	// holding it over and over); 0 means no cap
	// (app.Config.MaxHoldsPerAccount).
	MaxHoldsPerAccount int
}

// Reserver takes units in Redis: checkout.Reserver.
type Reserver interface {
	Reserve(ctx context.Context, req checkout.ReserveRequest) (checkout.ReserveResult, error)
}

var _ Reserver = (*checkout.Reserver)(nil)

// Service administers sales. It is safe for concurrent use.
type Service struct {
	checkout *checkout.Store
	ledger   *ledger.Store
	catalog  *catalog.Catalog
	reserver Reserver
	opts     Options
	log      *slog.Logger
	m        metrics
}

// New returns a Service that takes reserves through rs; its metrics
// register on reg.
func New(cs *checkout.Store, ls *ledger.Store, cat *catalog.Catalog, rs Reserver, opts Options, log *slog.Logger, reg prometheus.Registerer) *Service {
	opts.Clock = clock.Or(opts.Clock)
	return &Service{checkout: cs, ledger: ls, catalog: cat, reserver: rs, opts: opts, log: log, m: newMetrics(reg)}
}

// Create records a sale in Postgres, loads its stock into Redis from what
// Postgres then holds, and adds it to the catalog. created is false when
// Postgres already had this very definition: a repeat, which loads Redis
// again if it lost the sale. It fails with ledger.ErrSaleExists when
// another definition has the id, and checkout.ErrStockMismatch when Redis
// holds other stock figures for the sale (rebuild it from Postgres).
func (s *Service) Create(ctx context.Context, sale ledger.Sale) (created bool, err error) {
	created, err = s.ledger.CreateSale(ctx, sale)
	if err != nil {
		return false, err
	}
	if err := s.load(ctx, sale); err != nil {
		return false, err
	}
	s.catalog.Put(sale)
	if created {
		s.log.Info("sale created", "sale", sale.ID, "skus", len(sale.SKUs), "starts_at", sale.StartsAt)
	}
	return created, nil
}

// load puts a sale into Redis. The first time, the stock goes in from
// Postgres under a new epoch, which Postgres then records. Once Postgres has
// an epoch, Redis may hold holds Postgres has not seen yet; a Redis that lost
// the sale meanwhile is restored the guarded way (journal and all), or left
// to the watch if its intents have not drained.
func (s *Service) load(ctx context.Context, sale ledger.Sale) error {
	epoch, _, _, err := s.ledger.RedisEpoch(ctx, sale.ID)
	if err != nil {
		return err
	}
	if epoch != "" {
		_, err := s.check(ctx, []ledger.Sale{sale}, 0)
		return err
	}
	stock, err := s.ledger.Inventory(ctx, sale.ID)
	if err != nil {
		return err
	}
	fresh, err := checkout.NewEpoch()
	if err != nil {
		return err
	}
	replid, err := s.checkout.ReplicationID(ctx, sale.ID)
	if err != nil {
		return err
	}
	have, err := s.checkout.Load(ctx, sale.ID, fresh, stock)
	if err != nil {
		return err
	}
	_, err = s.ledger.SetRedisEpoch(ctx, sale.ID, have, replid, true)
	return err
}

// skuIDs lists a sale's SKU ids in their order.
func skuIDs(sale ledger.Sale) []string {
	ids := make([]string, len(sale.SKUs))
	for i, k := range sale.SKUs {
		ids[i] = k.SKU
	}
	return ids
}
