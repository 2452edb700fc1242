// Package snapshot keeps the edge's copy of every current sale's snapshot,
// fetched from the origin a few times a second, so the edge answers "what
// is this sale and is it sold out" from memory.
//
// Each sale keeps its last good snapshot and the moment it was fetched: a
// failing or slow fetch never discards the others, and callers decide from
// the age whether the snapshot is still good enough to answer from. Fetches
// run concurrently, bounded, and a fetch still running when its round ends
// keeps running on its own while later rounds skip that sale, so one slow
// sale never holds the others back.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

// SKU is one product line of a snapshot.
type SKU struct {
	SKU           string `json:"sku"`
	Name          string `json:"name"`
	PriceMinor    int64  `json:"price_minor"`
	Currency      string `json:"currency"`
	AvailableHint int64  `json:"available_hint"`
}

// Sale is the origin's snapshot of a sale (docs/API.md).
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

// Ended reports whether the origin said the sale is over: its snapshot will
// not change again, so it is not fetched again.
func (s Sale) Ended() bool { return s.Status == "ended" }

// Available is the units the snapshot shows available, summed over its
// SKUs (a negative hint counts as none).
func (s Sale) Available() int64 {
	var n int64
	for _, k := range s.SKUs {
		n += max(k.AvailableHint, 0)
	}
	return n
}

// Entry is a sale's last good snapshot and when the fetch that brought it
// started (the snapshot is at least that old).
type Entry struct {
	Sale      Sale
	FetchedAt time.Time
}

// Fetcher reads from the origin: Get returns the status and body of a path.
// It must bound its own time (the edge's origin pools have a timeout).
type Fetcher interface {
	Get(path string, dst []byte) (int, []byte, error)
}

// Presence is what the cache can tell about a sale id.
type Presence int

const (
	// Unknown: no list of the origin's sales younger than the asked age,
	// and the id was not on the last one; the cache cannot say.
	Unknown Presence = iota
	// Listed: the origin's last list has the sale.
	Listed
	// Absent: a list younger than the asked age does not have the sale.
	Absent
)

// Options tune a Cache.
type Options struct {
	// Concurrency bounds the snapshot fetches in flight at once, across
	// rounds; it should leave the list a connection of the origin pool.
	// Below 1 means 1.
	Concurrency int
	// Clock is the clock; nil means clock.Real.
	Clock clock.Clock
}

// Cache holds the last good snapshot of every sale the origin lists.
type Cache struct {
	origin Fetcher
	log    *slog.Logger
	now    func() time.Time
	slots  chan struct{} // one token per fetch in flight
	kick   chan struct{} // a refresh wanted before the next period; holds at most one
	// fetches counts fetch goroutines, including those that outlive their
	// round, so Wait can see them end.
	fetches sync.WaitGroup

	mu       sync.RWMutex // guards sales, listed, listedAt and inflight
	sales    map[string]Entry
	listed   map[string]bool // ids on the last good list; nil before the first
	listedAt time.Time       // when the last good list was asked for
	inflight map[string]bool // ids whose fetch is running
}

// New returns a Cache over origin.
func New(origin Fetcher, log *slog.Logger, opts Options) *Cache {
	return &Cache{
		origin: origin, log: log, now: clock.Or(opts.Clock).Now,
		slots:    make(chan struct{}, max(opts.Concurrency, 1)),
		kick:     make(chan struct{}, 1),
		sales:    map[string]Entry{},
		inflight: map[string]bool{},
	}
}

// Refresh lists the origin's current sales, drops the ones it no longer
// lists, and fetches every listed sale's snapshot concurrently; when the
// list fails, it fetches the sales it holds. A sale whose fetch fails keeps
// its last good snapshot (and its age). Sales whose last snapshot says
// ended, and sales whose fetch from an earlier round is still running, are
// skipped. Refresh returns when the round's fetches are done or ctx ends,
// whichever is first, with every failure it saw joined.
func (c *Cache) Refresh(ctx context.Context) error {
	var errs []error
	ids, err := c.list()
	if err != nil {
		errs = append(errs, err)
		ids = c.held()
	}
	results := make(chan error, len(ids)) // buffered: a late fetch never blocks
	running := 0
claim:
	for _, id := range ids {
		if !c.claim(id) {
			continue
		}
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			c.unclaim(id)
			break claim
		}
		running++
		c.fetches.Add(1)
		go func() {
			defer c.fetches.Done()
			err := c.fetch(id)
			<-c.slots
			results <- err
		}()
	}
	for running > 0 {
		select {
		case err := <-results:
			running--
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%d snapshot fetches still running at the end of the round: %w", running, ctx.Err()))
			running = 0
		}
	}
	return errors.Join(errs...)
}

// list asks the origin which sales are current and forgets the others.
func (c *Cache) list() ([]string, error) {
	asked := c.now()
	status, body, err := c.origin.Get("/v1/sales", nil)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	if status != 200 {
		return nil, fmt.Errorf("list sales: origin answered %d", status)
	}
	var list struct {
		Sales []struct {
			SaleID string `json:"sale_id"`
		} `json:"sales"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	ids := make([]string, 0, len(list.Sales))
	listed := make(map[string]bool, len(list.Sales))
	for _, s := range list.Sales {
		if s.SaleID != "" && !listed[s.SaleID] {
			listed[s.SaleID] = true
			ids = append(ids, s.SaleID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listed, c.listedAt = listed, asked
	for id := range c.sales {
		if !listed[id] {
			delete(c.sales, id)
		}
	}
	return ids, nil
}

// held returns the ids of the sales the cache holds a snapshot of.
func (c *Cache) held() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := make([]string, 0, len(c.sales))
	for id := range c.sales {
		ids = append(ids, id)
	}
	return ids
}

// claim marks a sale's fetch as running, unless one already is or the sale
// has ended.
func (c *Cache) claim(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[id] || c.sales[id].Sale.Ended() {
		return false
	}
	c.inflight[id] = true
	return true
}

func (c *Cache) unclaim(id string) {
	c.mu.Lock()
	delete(c.inflight, id)
	c.mu.Unlock()
}

// fetch reads one sale's snapshot and keeps it if the sale is still listed.
func (c *Cache) fetch(id string) error {
	defer c.unclaim(id)
	started := c.now()
	status, body, err := c.origin.Get("/v1/sales/"+id, nil)
	if err != nil {
		return fmt.Errorf("snapshot of sale %s: %w", id, err)
	}
	if status != 200 {
		return fmt.Errorf("snapshot of sale %s: origin answered %d", id, status)
	}
	var sale Sale
	if err := json.Unmarshal(body, &sale); err != nil {
		return fmt.Errorf("snapshot of sale %s: %w", id, err)
	}
	if sale.SaleID != id {
		return fmt.Errorf("snapshot of sale %s: origin answered for sale %q", id, sale.SaleID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed[id] { // a list taken meanwhile may have dropped it
		c.sales[id] = Entry{Sale: sale, FetchedAt: started}
	}
	return nil
}

// Get returns the last good snapshot of a sale, however old.
func (c *Cache) Get(id string) (Sale, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.sales[id]
	return e.Sale, ok
}

// All returns the last good snapshot of every listed sale, with its age,
// ordered by sale id.
func (c *Cache) All() []Entry {
	c.mu.RLock()
	out := make([]Entry, 0, len(c.sales))
	for _, e := range c.sales {
		out = append(out, e)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Sale.SaleID < out[j].Sale.SaleID })
	return out
}

// Listed returns the ids on the origin's last good list, ordered.
func (c *Cache) Listed() []string {
	c.mu.RLock()
	ids := make([]string, 0, len(c.listed))
	for id := range c.listed {
		ids = append(ids, id)
	}
	c.mu.RUnlock()
	sort.Strings(ids)
	return ids
}

// Presence tells whether the origin lists sale id, trusting a list only
// when it is at most maxAge old.
func (c *Cache) Presence(id string, maxAge time.Duration) Presence {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.listed[id]:
		return Listed
	case c.listed != nil && c.now().Sub(c.listedAt) <= maxAge:
		return Absent
	default:
		return Unknown
	}
}

// ListAge is how old the last good list of the origin's sales is, and false
// before the first.
func (c *Cache) ListAge() (time.Duration, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.listed == nil {
		return 0, false
	}
	return c.now().Sub(c.listedAt), true
}

// Kick asks for a refresh before the next period, as when a shopper holds a
// token for a sale the last list did not have yet (it was created a moment
// ago). Kicks coalesce: at most one waits.
func (c *Cache) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Kicks delivers the refreshes Kick asked for, to the loop that runs
// Refresh.
func (c *Cache) Kicks() <-chan struct{} { return c.kick }

// Wait blocks until every fetch has ended (each is bounded by the
// Fetcher's own timeout); call it after the refresh loop has stopped.
func (c *Cache) Wait() { c.fetches.Wait() }
