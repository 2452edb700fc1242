package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Status is where a sale stands for shoppers.
type Status string

const (
	Upcoming Status = "upcoming"
	Open     Status = "open"
	SoldOut  Status = "sold_out"
	Ended    Status = "ended"
)

// Snapshot is a sale with its stock as shoppers see it.
type Snapshot struct {
	Sale ledger.Sale
	// Stock is each SKU's counters: Redis's, the live gate, or Postgres's
	// when Redis cannot answer.
	Stock  map[string]intent.Stock
	Status Status
	// SoldOut: no unit is available. Final: sold out, and no hold is left
	// that could come back.
	SoldOut, Final bool
}

// Snapshot returns a sale's snapshot, or catalog.ErrUnknownSale.
func (s *Service) Snapshot(ctx context.Context, saleID string) (Snapshot, error) {
	sale, err := s.catalog.Get(ctx, saleID)
	if err != nil {
		return Snapshot{}, err
	}
	stock, err := s.stock(ctx, sale)
	if err != nil {
		return Snapshot{}, err
	}
	var available, held int64
	for _, k := range sale.SKUs {
		available += stock[k.SKU].Available
		held += stock[k.SKU].Held
	}
	snap := Snapshot{Sale: sale, Stock: stock, SoldOut: available == 0}
	snap.Final = snap.SoldOut && held == 0
	now := s.opts.Clock.Now()
	switch {
	case !now.Before(sale.EndsAt):
		snap.Status = Ended
	case now.Before(sale.StartsAt):
		snap.Status = Upcoming
	case snap.SoldOut:
		snap.Status = SoldOut
	default:
		snap.Status = Open
	}
	return snap, nil
}

// stock reads a sale's counters from Redis, falling back to Postgres.
func (s *Service) stock(ctx context.Context, sale ledger.Sale) (map[string]intent.Stock, error) {
	skus := skuIDs(sale)
	counts, redisErr := s.checkout.Inventory(ctx, sale.ID, skus)
	if redisErr == nil && len(counts) == len(skus) {
		return counts, nil
	}
	if redisErr == nil {
		// Redis lost the sale (it is being restored): Postgres's figures,
		// never a false "sold out".
		redisErr = fmt.Errorf("sale %s: %d of %d skus missing from redis", sale.ID, len(skus)-len(counts), len(skus))
	}
	rows, err := s.ledger.Inventory(ctx, sale.ID)
	if err != nil {
		return nil, errors.Join(redisErr, err)
	}
	return rows, nil
}

// Books are a sale's stock in Redis and in Postgres side by side, and
// whether Redis still holds what it promised, shaped as GET
// /admin/sales/{sale_id}/ledger answers them (docs/API.md).
type Books struct {
	SaleID string     `json:"sale_id"`
	SKUs   []SKUBooks `json:"skus"`
	// WriterLagSeconds is how long the oldest intent Postgres has not
	// applied yet has waited in the stream; 0 when none is pending.
	WriterLagSeconds float64 `json:"writer_lag_s"`
	Durability
}

// Counts are one SKU's stock counters without the total.
type Counts struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}

// SKUBooks are one SKU's counters: Redis's, Postgres's, the effect of the
// intents Postgres has not applied yet, and what remains between them.
type SKUBooks struct {
	SKU            string `json:"sku"`
	Total          int64  `json:"total"`
	Redis          Counts `json:"redis"`
	DB             Counts `json:"db"`
	Pending        Counts `json:"pending"`
	Drift          Counts `json:"drift"` // redis - (db + pending); all zero when they agree
	PendingIntents int    `json:"pending_intents"`
	// FirstZeroAt and LastZeroAt are when Redis's available count first
	// and last reached 0, and ReturnedAt when a unit last came back to it
	// at 0 (nil if not since the SKU was loaded or rebuilt): sold-out news
	// is timed from them.
	FirstZeroAt *time.Time `json:"first_zero_at"`
	LastZeroAt  *time.Time `json:"last_zero_at"`
	ReturnedAt  *time.Time `json:"returned_at"`
}

// Durability says whether Redis still holds what it promised: the epoch
// Postgres recorded and the one Redis holds, how many reserves each has
// numbered in it, and every loss found so far with what its rebuild did.
// Lost counts granted holds Postgres refused (a rebuild's replay or the
// order writer: their shoppers' reservations answer cancelled); it should
// always be 0.
type Durability struct {
	Epoch      string        `json:"epoch"`
	RedisEpoch string        `json:"redis_epoch"`
	RedisSeq   int64         `json:"redis_seq"`
	JournalSeq int64         `json:"journal_seq"`
	Restored   int           `json:"reservations_restored"`
	Lost       int           `json:"reservations_lost"`
	Losses     []ledger.Loss `json:"redis_losses"`
}

// Books returns a sale's books, or catalog.ErrUnknownSale.
func (s *Service) Books(ctx context.Context, saleID string) (Books, error) {
	sale, err := s.catalog.Get(ctx, saleID)
	if err != nil {
		return Books{}, err
	}
	return s.books(ctx, sale)
}

func (s *Service) books(ctx context.Context, sale ledger.Sale) (Books, error) {
	skus, oldest, err := s.stockBooks(ctx, sale)
	if err != nil {
		return Books{}, err
	}
	moments, err := s.checkout.Moments(ctx, sale.ID, skuIDs(sale))
	if err != nil {
		return Books{}, err
	}
	for i, k := range skus {
		m := moments[k.SKU]
		if !m.Zero.IsZero() {
			skus[i].FirstZeroAt, skus[i].LastZeroAt = &m.FirstZero, &m.Zero
		}
		if !m.Back.IsZero() {
			skus[i].ReturnedAt = &m.Back
		}
	}
	out := Books{SaleID: sale.ID, SKUs: skus}
	if !oldest.IsZero() {
		out.WriterLagSeconds = max(s.opts.Clock.Now().Sub(oldest), 0).Seconds()
	}
	if out.Durability, err = s.durability(ctx, sale.ID); err != nil {
		return Books{}, err
	}
	return out, nil
}

// Backlog is what the admission controller (origin/internal/autotune)
// reads of a sale's books: the units Redis has available, the intents
// Postgres has not applied yet, and when the oldest of them entered the
// stream (zero when none).
func (s *Service) Backlog(ctx context.Context, saleID string) (available int64, pending int, oldest time.Time, err error) {
	sale, err := s.catalog.Get(ctx, saleID)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	skus, oldest, err := s.stockBooks(ctx, sale)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	for _, k := range skus {
		available += k.Redis.Available
		pending += k.PendingIntents
	}
	return available, pending, oldest, nil
}

// stockBooks are the SKU part of a sale's books, and when the oldest intent
// Postgres has not applied yet entered the stream (zero when none has):
// the ledger answer and the sale metrics (Collector) both read them here.
func (s *Service) stockBooks(ctx context.Context, sale ledger.Sale) ([]SKUBooks, time.Time, error) {
	skus := skuIDs(sale)
	inRedis, err := s.checkout.Inventory(ctx, sale.ID, skus)
	if err != nil {
		return nil, time.Time{}, err
	}
	inDB, err := s.ledger.Inventory(ctx, sale.ID)
	if err != nil {
		return nil, time.Time{}, err
	}
	unapplied, err := s.unapplied(ctx, sale.ID)
	if err != nil {
		return nil, time.Time{}, err
	}
	pending := map[string]Counts{}
	count := map[string]int{}
	var oldest time.Time
	for _, in := range unapplied {
		available, held, sold := in.Kind.Effect()
		p := pending[in.SKU]
		p.Available += int64(available)
		p.Held += int64(held)
		p.Sold += int64(sold)
		pending[in.SKU] = p
		count[in.SKU]++
		added, err := checkout.EntryTime(in.ID)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("sale %s: %w", sale.ID, err)
		}
		if oldest.IsZero() || added.Before(oldest) {
			oldest = added
		}
	}
	out := make([]SKUBooks, 0, len(skus))
	for _, sku := range skus {
		r, d, p := inRedis[sku], inDB[sku], pending[sku]
		out = append(out, SKUBooks{
			SKU:     sku,
			Total:   d.Total,
			Redis:   Counts{r.Available, r.Held, r.Sold},
			DB:      Counts{d.Available, d.Held, d.Sold},
			Pending: p,
			Drift: Counts{
				Available: r.Available - (d.Available + p.Available),
				Held:      r.Held - (d.Held + p.Held),
				Sold:      r.Sold - (d.Sold + p.Sold),
			},
			PendingIntents: count[sku],
		})
	}
	return out, oldest, nil
}

func (s *Service) durability(ctx context.Context, sale string) (Durability, error) {
	var d Durability
	var err error
	if d.Epoch, _, d.JournalSeq, err = s.ledger.RedisEpoch(ctx, sale); err != nil {
		return d, err
	}
	if d.RedisEpoch, d.RedisSeq, err = s.checkout.Meta(ctx, sale); err != nil {
		return d, err
	}
	if d.Losses, err = s.ledger.Losses(ctx, sale); err != nil {
		return d, err
	}
	if d.Losses == nil {
		d.Losses = []ledger.Loss{}
	}
	for _, l := range d.Losses {
		d.Restored += l.Restored
	}
	if d.Lost, err = s.ledger.BrokenHolds(ctx, sale); err != nil {
		return d, err
	}
	return d, nil
}
