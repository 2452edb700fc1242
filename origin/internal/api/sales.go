package api

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/rebuild"
)

type skuJSON struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceMinor int64  `json:"price_minor"`
	Currency   string `json:"currency"`
	Stock      int    `json:"stock"`
}

type saleJSON struct {
	SaleID          string    `json:"sale_id"`
	Name            string    `json:"name"`
	StartsAt        time.Time `json:"starts_at"`
	EndsAt          time.Time `json:"ends_at"`
	HoldTTLSeconds  int       `json:"hold_ttl_s"`
	PerAccountLimit int       `json:"per_account_limit"`
	SKUs            []skuJSON `json:"skus"`
}

// Limits on a sale definition.
const (
	maxSKUs      = 100
	maxStock     = 10_000_000
	maxHoldTTL   = 24 * 60 * 60
	maxNameBytes = 200
)

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

func invalid(code, format string, args ...any) error {
	return fail(fasthttp.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

// validateSale checks a definition and fills in defaults: hold_ttl_s 600,
// per_account_limit 1.
func validateSale(in *saleJSON) error {
	if !idPattern.MatchString(in.SaleID) {
		return invalid("invalid_sale_id", "sale_id must be 1 to 64 letters, digits, '_' or '-'.")
	}
	if !validName(in.Name) {
		return invalid("invalid_name", "name must be 1 to %d bytes of text without control characters.", maxNameBytes)
	}
	if in.StartsAt.IsZero() || in.EndsAt.IsZero() || !in.EndsAt.After(in.StartsAt) {
		return invalid("invalid_window", "starts_at and ends_at are required, and ends_at must be after starts_at.")
	}
	if in.HoldTTLSeconds == 0 {
		in.HoldTTLSeconds = 600
	}
	if in.HoldTTLSeconds < 1 || in.HoldTTLSeconds > maxHoldTTL {
		return invalid("invalid_hold_ttl", "hold_ttl_s must be 1 to %d seconds.", maxHoldTTL)
	}
	if in.PerAccountLimit == 0 {
		in.PerAccountLimit = 1
	}
	if in.PerAccountLimit != 1 {
		return invalid("invalid_per_account_limit", "per_account_limit must be 1: one unit per account.")
	}
	if len(in.SKUs) == 0 || len(in.SKUs) > maxSKUs {
		return invalid("invalid_skus", "A sale needs 1 to %d SKUs.", maxSKUs)
	}
	seen := map[string]bool{}
	for _, k := range in.SKUs {
		switch {
		case !idPattern.MatchString(k.SKU):
			return invalid("invalid_sku", "Each sku must be 1 to 64 letters, digits, '_' or '-'.")
		case seen[k.SKU]:
			return invalid("duplicate_sku", "SKU %s is listed twice.", k.SKU)
		case !validName(k.Name):
			return invalid("invalid_name", "SKU %s needs a name of 1 to %d bytes of text without control characters.", k.SKU, maxNameBytes)
		case k.PriceMinor < 0:
			return invalid("invalid_price", "SKU %s has a negative price.", k.SKU)
		case !currencyPattern.MatchString(k.Currency):
			return invalid("invalid_currency", "SKU %s needs an ISO 4217 currency such as INR.", k.SKU)
		case k.Stock < 0 || k.Stock > maxStock:
			return invalid("invalid_stock", "SKU %s needs a stock of 0 to %d.", k.SKU, maxStock)
		}
		seen[k.SKU] = true
	}
	return nil
}

// validName accepts 1 to maxNameBytes of text without control characters
// (Postgres text cannot hold a NUL).
func validName(s string) bool {
	return s != "" && len(s) <= maxNameBytes && !strings.ContainsFunc(s, unicode.IsControl)
}

func saleFromJSON(in saleJSON) ledger.Sale {
	sale := ledger.Sale{
		ID: in.SaleID, Name: in.Name,
		// Postgres keeps microseconds: round so a repeated create compares equal.
		StartsAt: in.StartsAt.UTC().Round(time.Microsecond), EndsAt: in.EndsAt.UTC().Round(time.Microsecond),
		HoldTTL: time.Duration(in.HoldTTLSeconds) * time.Second, PerAccountLimit: in.PerAccountLimit,
	}
	for _, k := range in.SKUs {
		sale.SKUs = append(sale.SKUs, ledger.SKU{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency, Stock: k.Stock})
	}
	return sale
}

func saleToJSON(sale ledger.Sale) saleJSON {
	out := saleJSON{
		SaleID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt,
		HoldTTLSeconds: int(sale.HoldTTL / time.Second), PerAccountLimit: sale.PerAccountLimit, SKUs: []skuJSON{},
	}
	for _, k := range sale.SKUs {
		out.SKUs = append(out.SKUs, skuJSON{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency, Stock: k.Stock})
	}
	return out
}

// createSale: POST /admin/sales. Writes Postgres, then loads the stock into
// Redis from what Postgres holds. A repeat of the same definition answers
// 200 and loads Redis again if it lost the sale.
func (s *Server) createSale(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	var in saleJSON
	if err := decodeJSON(ctx, s.opts.MaxAdminBody, &in); err != nil {
		return err
	}
	if err := validateSale(&in); err != nil {
		return err
	}
	sale := saleFromJSON(in)
	created, err := s.Ledger.CreateSale(c, sale)
	if errors.Is(err, ledger.ErrSaleExists) {
		return fail(fasthttp.StatusConflict, "sale_exists", "A different sale with this sale_id exists.")
	}
	if err != nil {
		return err
	}
	if err := s.loadSale(c, sale); err != nil {
		if errors.Is(err, checkout.ErrStockMismatch) {
			return fail(fasthttp.StatusConflict, "stock_mismatch", "Redis already holds other stock figures for this sale; rebuild it from Postgres.")
		}
		return err
	}
	s.Catalog.Put(sale)
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
		s.Log.Info("sale created", "sale", sale.ID, "skus", len(sale.SKUs), "starts_at", sale.StartsAt)
	}
	writeJSON(ctx, status, saleToJSON(sale))
	return nil
}

// loadSale puts a sale into Redis. The first time, the stock goes in from
// Postgres under a new epoch, which Postgres then records. Once Postgres has
// an epoch, Redis may hold holds Postgres has not seen yet; a Redis that lost
// the sale meanwhile is restored the guarded way (journal and all), or left
// to the origin's watch if its intents have not drained.
func (s *Server) loadSale(c context.Context, sale ledger.Sale) error {
	epoch, _, _, err := s.Ledger.RedisEpoch(c, sale.ID)
	if err != nil {
		return err
	}
	if epoch != "" {
		_, err := s.Guard.Check(c, []ledger.Sale{sale}, 0)
		return err
	}
	stock, err := s.Ledger.Inventory(c, sale.ID)
	if err != nil {
		return err
	}
	fresh, err := checkout.NewEpoch()
	if err != nil {
		return err
	}
	replid, err := s.Redis.ReplicationID(c)
	if err != nil {
		return err
	}
	have, err := s.Redis.Load(c, sale.ID, fresh, stock)
	if err != nil {
		return err
	}
	_, err = s.Ledger.SetRedisEpoch(c, sale.ID, have, replid, true)
	return err
}

type snapshotSKU struct {
	SKU           string `json:"sku"`
	Name          string `json:"name"`
	PriceMinor    int64  `json:"price_minor"`
	Currency      string `json:"currency"`
	AvailableHint int64  `json:"available_hint"`
}

// Snapshot is the sale snapshot of the contract.
type Snapshot struct {
	SaleID      string        `json:"sale_id"`
	Name        string        `json:"name"`
	Status      string        `json:"status"` // upcoming, open, sold_out or ended
	StartsAt    time.Time     `json:"starts_at"`
	EndsAt      time.Time     `json:"ends_at"`
	NowServing  int64         `json:"now_serving"`
	QueueLength int64         `json:"queue_length"`
	SKUs        []snapshotSKU `json:"skus"`
	SoldOut     bool          `json:"sold_out"`
	Final       bool          `json:"final"`
}

// snapshot: GET /v1/sales/{sale}. Stock comes from Redis, the live gate, or
// from Postgres when Redis cannot answer. The origin runs no queue, so
// now_serving and queue_length are 0 here; the edge fills them in.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !idPattern.MatchString(params[0]) {
		return saleError(fmt.Errorf("bad id: %w", errUnknownSale))
	}
	sale, err := s.Catalog.Get(c, params[0])
	if err != nil {
		return saleError(err)
	}
	counts, err := s.stock(c, sale)
	if err != nil {
		return err
	}
	snap := Snapshot{SaleID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt, SKUs: []snapshotSKU{}}
	var available, held int64
	for _, k := range sale.SKUs {
		st := counts[k.SKU]
		available += st.Available
		held += st.Held
		snap.SKUs = append(snap.SKUs, snapshotSKU{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency, AvailableHint: st.Available})
	}
	snap.SoldOut = available == 0
	snap.Final = snap.SoldOut && held == 0 // no hold left that could come back
	now := s.Clock()
	switch {
	case !now.Before(sale.EndsAt):
		snap.Status = "ended"
	case now.Before(sale.StartsAt):
		snap.Status = "upcoming"
	case snap.SoldOut:
		snap.Status = "sold_out"
	default:
		snap.Status = "open"
	}
	writeJSON(ctx, fasthttp.StatusOK, snap)
	return nil
}

// stock reads a sale's counters from Redis, falling back to Postgres.
func (s *Server) stock(c context.Context, sale ledger.Sale) (map[string]intent.Stock, error) {
	skus := make([]string, len(sale.SKUs))
	for i, k := range sale.SKUs {
		skus[i] = k.SKU
	}
	counts, redisErr := s.Redis.Inventory(c, sale.ID, skus)
	if redisErr == nil && len(counts) == len(skus) {
		return counts, nil
	}
	if redisErr == nil {
		// Redis lost the sale (it is being restored): Postgres's figures,
		// never a false "sold out".
		redisErr = fmt.Errorf("sale %s: %d of %d skus missing from redis", sale.ID, len(skus)-len(counts), len(skus))
	}
	rows, err := s.Ledger.Inventory(c, sale.ID)
	if err != nil {
		return nil, errors.Join(redisErr, err)
	}
	return rows, nil
}

var errUnknownSale = errors.New("unknown sale")

type countsJSON struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}

type ledgerSKU struct {
	SKU            string     `json:"sku"`
	Total          int64      `json:"total"`
	Redis          countsJSON `json:"redis"`
	DB             countsJSON `json:"db"`
	Pending        countsJSON `json:"pending"` // the effect of intents Postgres has not applied yet
	Drift          countsJSON `json:"drift"`   // redis - (db + pending); all zero when they agree
	PendingIntents int        `json:"pending_intents"`
}

// ledger: GET /admin/sales/{sale}/ledger. Redis and Postgres side by side;
// drift is what remains after the pending intents are accounted for.
func (s *Server) ledger(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !idPattern.MatchString(params[0]) {
		return saleError(fmt.Errorf("bad id: %w", errUnknownSale))
	}
	sale, err := s.Catalog.Get(c, params[0])
	if err != nil {
		return saleError(err)
	}
	skus := make([]string, len(sale.SKUs))
	for i, k := range sale.SKUs {
		skus[i] = k.SKU
	}
	inRedis, err := s.Redis.Inventory(c, sale.ID, skus)
	if err != nil {
		return err
	}
	inDB, err := s.Ledger.Inventory(c, sale.ID)
	if err != nil {
		return err
	}
	unapplied, err := rebuild.Unapplied(c, s.Redis, s.Ledger, sale.ID)
	if err != nil {
		return err
	}
	pending := map[string]*countsJSON{}
	count := map[string]int{}
	for _, in := range unapplied {
		p := pending[in.SKU]
		if p == nil {
			p = &countsJSON{}
			pending[in.SKU] = p
		}
		count[in.SKU]++
		available, held, sold := in.Kind.Effect()
		p.Available += int64(available)
		p.Held += int64(held)
		p.Sold += int64(sold)
	}
	durability, err := s.durability(c, sale.ID)
	if err != nil {
		return err
	}
	out := struct {
		SaleID string      `json:"sale_id"`
		SKUs   []ledgerSKU `json:"skus"`
		durabilityJSON
	}{SaleID: sale.ID, SKUs: []ledgerSKU{}, durabilityJSON: durability}
	for _, sku := range skus {
		r, d := inRedis[sku], inDB[sku]
		p := countsJSON{}
		if pending[sku] != nil {
			p = *pending[sku]
		}
		out.SKUs = append(out.SKUs, ledgerSKU{
			SKU:     sku,
			Total:   d.Total,
			Redis:   countsJSON{r.Available, r.Held, r.Sold},
			DB:      countsJSON{d.Available, d.Held, d.Sold},
			Pending: p,
			Drift: countsJSON{
				Available: r.Available - (d.Available + p.Available),
				Held:      r.Held - (d.Held + p.Held),
				Sold:      r.Sold - (d.Sold + p.Sold),
			},
			PendingIntents: count[sku],
		})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// durabilityJSON says whether Redis still holds what it promised: the epoch
// Postgres recorded and the one Redis holds, how many reserves each has
// numbered in it, and every loss found so far with what its rebuild did.
// Lost counts granted holds Postgres refused (a rebuild's replay or the
// order writer: their shoppers' reservations answer cancelled); it should
// always be 0.
type durabilityJSON struct {
	Epoch      string        `json:"epoch"`
	RedisEpoch string        `json:"redis_epoch"`
	RedisSeq   int64         `json:"redis_seq"`
	JournalSeq int64         `json:"journal_seq"`
	Restored   int           `json:"reservations_restored"`
	Lost       int           `json:"reservations_lost"`
	Losses     []ledger.Loss `json:"redis_losses"`
}

func (s *Server) durability(c context.Context, sale string) (durabilityJSON, error) {
	var d durabilityJSON
	var err error
	if d.Epoch, _, d.JournalSeq, err = s.Ledger.RedisEpoch(c, sale); err != nil {
		return d, err
	}
	if d.RedisEpoch, d.RedisSeq, err = s.Redis.Meta(c, sale); err != nil {
		return d, err
	}
	if d.Losses, err = s.Ledger.Losses(c, sale); err != nil {
		return d, err
	}
	if d.Losses == nil {
		d.Losses = []ledger.Loss{}
	}
	for _, l := range d.Losses {
		d.Restored += l.Restored
	}
	if d.Lost, err = s.Ledger.BrokenHolds(c, sale); err != nil {
		return d, err
	}
	return d, nil
}

// rebuildDrain bounds how long a rebuild waits for pending intents.
const rebuildDrain = 30 * time.Second

// rebuildSale: POST /admin/sales/{sale}/rebuild. Stops the sale's reserves
// (they answer please_wait) and sweeps, waits for the order writer to apply
// every pending intent, rebuilds Redis from Postgres, and lets the sale go
// on; answers the ledger as it then stands.
func (s *Server) rebuildSale(ctx *fasthttp.RequestCtx, _ context.Context, params []string) error {
	if !idPattern.MatchString(params[0]) {
		return saleError(fmt.Errorf("bad id: %w", errUnknownSale))
	}
	c, cancel := context.WithTimeout(context.Background(), rebuildDrain+10*time.Second)
	defer cancel()
	sale, err := s.Catalog.Get(c, params[0])
	if err != nil {
		return saleError(err)
	}
	_, err = s.Guard.Rebuild(c, sale, rebuildDrain)
	switch {
	case errors.Is(err, checkout.ErrRebuildInProgress):
		return fail(fasthttp.StatusConflict, "rebuild_in_progress", "A rebuild of this sale is already running.")
	case errors.Is(err, rebuild.ErrDrainTimeout):
		return fail(fasthttp.StatusConflict, "drain_timeout", "Pending intents did not drain in time (is the order writer running and Postgres up?); nothing was rebuilt.")
	case err != nil:
		return err
	}
	return s.ledger(ctx, c, params)
}
