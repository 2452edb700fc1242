// Package snapshot keeps the edge's copy of every sale's snapshot, fetched
// from the origin a few times a second, so the edge answers "what is this
// sale and is it sold out" from memory.
package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// SKU is one product line of a snapshot.
type SKU struct {
	SKU           string `json:"sku"`
	Name          string `json:"name"`
	PriceMinor    int64  `json:"price_minor"`
	Currency      string `json:"currency"`
	AvailableHint int64  `json:"available_hint"`
}

// Sale is the origin's snapshot of a sale (shared/API.md).
type Sale struct {
	SaleID      string    `json:"sale_id"`
	Name        string    `json:"name"`
	Status      string    `json:"status"`
	StartsAt    time.Time `json:"starts_at"`
	EndsAt      time.Time `json:"ends_at"`
	NowServing  int64     `json:"now_serving"`
	QueueLength int64     `json:"queue_length"`
	SKUs        []SKU     `json:"skus"`
	SoldOut     bool      `json:"sold_out"`
	Final       bool      `json:"final"`
}

// Fetcher reads from the origin: Get returns the status and body of a path.
type Fetcher interface {
	Get(path string, dst []byte) (int, []byte, error)
}

// Cache holds the latest snapshot of every sale the origin lists.
type Cache struct {
	origin Fetcher
	log    *slog.Logger
	now    func() time.Time

	mu    sync.RWMutex // guards sales and okAt
	sales map[string]Sale
	okAt  time.Time // last time a whole refresh succeeded
}

// New returns a Cache over origin; now is the clock (nil means time.Now).
func New(origin Fetcher, log *slog.Logger, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{origin: origin, log: log, now: now, sales: map[string]Sale{}}
}

// Refresh lists the origin's sales and fetches each snapshot. A sale the
// origin no longer lists is dropped.
func (c *Cache) Refresh(ctx context.Context) error {
	status, body, err := c.origin.Get("/v1/sales", nil)
	if err != nil {
		return fmt.Errorf("list sales: %w", err)
	}
	if status != 200 {
		return fmt.Errorf("list sales: origin answered %d", status)
	}
	var list struct {
		Sales []struct {
			SaleID string `json:"sale_id"`
		} `json:"sales"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("list sales: %w", err)
	}
	fresh := make(map[string]Sale, len(list.Sales))
	var buf []byte
	for _, s := range list.Sales {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var status int
		status, buf, err = c.origin.Get("/v1/sales/"+s.SaleID, buf)
		if err != nil {
			return fmt.Errorf("snapshot of sale %s: %w", s.SaleID, err)
		}
		if status != 200 {
			return fmt.Errorf("snapshot of sale %s: origin answered %d", s.SaleID, status)
		}
		var sale Sale
		if err := json.Unmarshal(buf, &sale); err != nil {
			return fmt.Errorf("snapshot of sale %s: %w", s.SaleID, err)
		}
		fresh[sale.SaleID] = sale
	}
	c.mu.Lock()
	c.sales = fresh
	c.okAt = c.now()
	c.mu.Unlock()
	return nil
}

// Get returns the latest snapshot of a sale.
func (c *Cache) Get(id string) (Sale, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.sales[id]
	return s, ok
}

// All returns the latest snapshot of every sale.
func (c *Cache) All() []Sale {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Sale, 0, len(c.sales))
	for _, s := range c.sales {
		out = append(out, s)
	}
	return out
}

// Age is how old the last successful refresh is; a large age means the
// origin is unreachable.
func (c *Cache) Age() time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.okAt.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return c.now().Sub(c.okAt)
}
