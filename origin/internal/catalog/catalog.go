// Package catalog keeps the origin's in-memory copy of the sales it serves,
// so the reserve path never asks Postgres what a sale is.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// ErrUnknownSale: no sale with that id.
var ErrUnknownSale = errors.New("catalog: unknown sale")

// Loader reads sales from the ledger.
type Loader interface {
	Sale(ctx context.Context, id string) (ledger.Sale, error)
	Sales(ctx context.Context) ([]ledger.Sale, error)
}

var _ Loader = (*ledger.Store)(nil)

// Catalog caches sale definitions. Definitions never change once created,
// so a cached sale is never stale; only new sales need finding.
type Catalog struct {
	loader  Loader
	log     *slog.Logger
	refresh time.Duration

	mu     sync.RWMutex           // guards sales and misses
	sales  map[string]ledger.Sale // by id
	misses map[string]time.Time   // unknown ids and when they were last looked up
}

// New returns a Catalog over loader that looks for new sales every refresh
// (0 means 2 s) while Run runs.
func New(loader Loader, log *slog.Logger, refresh time.Duration) *Catalog {
	if refresh <= 0 {
		refresh = 2 * time.Second
	}
	return &Catalog{loader: loader, log: log, refresh: refresh, sales: map[string]ledger.Sale{}, misses: map[string]time.Time{}}
}

// missTTL bounds how often an unknown id costs a Postgres query, so a flood
// of requests for made-up sales cannot reach the database.
const missTTL = time.Second

// Get returns a sale, asking Postgres only for an id not seen within missTTL.
func (c *Catalog) Get(ctx context.Context, id string) (ledger.Sale, error) {
	c.mu.RLock()
	sale, ok := c.sales[id]
	missed, recent := c.misses[id]
	c.mu.RUnlock()
	if ok {
		return sale, nil
	}
	if recent && time.Since(missed) < missTTL {
		return ledger.Sale{}, fmt.Errorf("sale %s: %w", id, ErrUnknownSale)
	}
	sale, err := c.loader.Sale(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		c.mu.Lock()
		if len(c.misses) > 10000 {
			c.misses = map[string]time.Time{} // bounded: forget old misses wholesale
		}
		c.misses[id] = time.Now()
		c.mu.Unlock()
		return ledger.Sale{}, fmt.Errorf("sale %s: %w", id, ErrUnknownSale)
	}
	if err != nil {
		return ledger.Sale{}, err
	}
	c.Put(sale)
	return sale, nil
}

// Put adds a sale, as when this origin has just created it.
func (c *Catalog) Put(sale ledger.Sale) {
	c.mu.Lock()
	c.sales[sale.ID] = sale
	delete(c.misses, sale.ID)
	c.mu.Unlock()
}

// All returns every known sale, ordered by id.
func (c *Catalog) All() []ledger.Sale {
	c.mu.RLock()
	out := make([]ledger.Sale, 0, len(c.sales))
	for _, s := range c.sales {
		out = append(out, s)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Refresh loads every current sale once.
func (c *Catalog) Refresh(ctx context.Context) error {
	sales, err := c.loader.Sales(ctx)
	if err != nil {
		return fmt.Errorf("refresh catalog: %w", err)
	}
	for _, s := range sales {
		c.Put(s)
	}
	return nil
}

// Run refreshes the catalog until ctx ends.
func (c *Catalog) Run(ctx context.Context) {
	t := time.NewTicker(c.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, c.refresh)
			if err := c.Refresh(rctx); err != nil && ctx.Err() == nil {
				c.log.Warn("catalog refresh failed", "err", err)
			}
			cancel()
		}
	}
}

// SaleIDs returns the ids of every known sale, ordered.
func (c *Catalog) SaleIDs() []string {
	all := c.All()
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	return ids
}
