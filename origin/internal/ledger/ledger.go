// Package ledger is the sale's truth in Postgres: sales and their SKUs, the
// inventory rows whose CHECK keeps available + held + sold = total, the
// reservations and orders, and the bookkeeping that applies each intent from
// Redis exactly once.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// Errors callers branch on.
var (
	ErrNotFound   = errors.New("ledger: not found")
	ErrSaleExists = errors.New("ledger: a different sale with this id exists")
)

// Store reads and writes the ledger. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	times callTimes
}

// New returns a Store over pool; run Migrate first.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// NewObserved is New with the request paths' calls timed in
// flashgate_origin_postgres_seconds{op}, registered on reg.
func NewObserved(pool *pgxpool.Pool, reg prometheus.Registerer) *Store {
	return &Store{pool: pool, times: newCallTimes(reg)}
}

// Sale is a sale's definition.
type Sale struct {
	ID              string
	Name            string
	StartsAt        time.Time
	EndsAt          time.Time
	HoldTTL         time.Duration // whole seconds
	PerAccountLimit int
	// OneUnitPerPayer refuses, and refunds, a second paid order of the sale
	// from an instrument (a UPI VPA, a card) that has paid for one already.
	// The zero value is off; the API's default for a new sale is on.
	OneUnitPerPayer bool
	SKUs            []SKU
}

// SKU is one product of a sale with its starting stock.
type SKU struct {
	SKU        string
	Name       string
	PriceMinor int64
	Currency   string
	Stock      int
}

// CreateSale writes a sale, its SKUs and their inventory. Creating the same
// sale again is a no-op that reports created = false; a different sale under
// an existing id is ErrSaleExists.
func (s *Store) CreateSale(ctx context.Context, sale Sale) (created bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO sales (sale_id, name, starts_at, ends_at, hold_ttl_s, per_account_limit, one_unit_per_payer)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (sale_id) DO NOTHING`,
			sale.ID, sale.Name, sale.StartsAt, sale.EndsAt, int(sale.HoldTTL/time.Second), sale.PerAccountLimit, sale.OneUnitPerPayer)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errExists
		}
		for _, k := range sale.SKUs {
			if _, err := tx.Exec(ctx, `INSERT INTO skus (sale_id, sku, name, price_minor, currency) VALUES ($1, $2, $3, $4, $5)`,
				sale.ID, k.SKU, k.Name, k.PriceMinor, k.Currency); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO inventory (sale_id, sku, total, available, held, sold) VALUES ($1, $2, $3, $3, 0, 0)`,
				sale.ID, k.SKU, k.Stock); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errExists) {
		have, err := s.Sale(ctx, sale.ID)
		if err != nil {
			return false, fmt.Errorf("create sale %s: %w", sale.ID, err)
		}
		if !sameSale(have, sale) {
			return false, fmt.Errorf("create sale %s: %w", sale.ID, ErrSaleExists)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create sale %s: %w", sale.ID, err)
	}
	return true, nil
}

var errExists = errors.New("exists")

func sameSale(a, b Sale) bool {
	if a.Name != b.Name || !a.StartsAt.Equal(b.StartsAt) || !a.EndsAt.Equal(b.EndsAt) ||
		a.HoldTTL != b.HoldTTL || a.PerAccountLimit != b.PerAccountLimit || a.OneUnitPerPayer != b.OneUnitPerPayer ||
		len(a.SKUs) != len(b.SKUs) {
		return false
	}
	want := make(map[string]SKU, len(b.SKUs))
	for _, k := range b.SKUs {
		want[k.SKU] = k
	}
	for _, k := range a.SKUs {
		if want[k.SKU] != k {
			return false
		}
	}
	return true
}

const saleColumns = `sale_id, name, starts_at, ends_at, hold_ttl_s, per_account_limit, one_unit_per_payer`

// Sale reads one sale with its SKUs (Stock is each SKU's total), or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (Sale, error) {
	sales, err := s.sales(ctx, `SELECT `+saleColumns+` FROM sales WHERE sale_id = $1`, id)
	if err != nil {
		return Sale{}, err
	}
	if len(sales) == 0 {
		return Sale{}, fmt.Errorf("sale %s: %w", id, ErrNotFound)
	}
	return sales[0], nil
}

// Sales reads every sale that has not ended more than a day ago, with SKUs.
func (s *Store) Sales(ctx context.Context) ([]Sale, error) {
	return s.sales(ctx, `SELECT `+saleColumns+` FROM sales WHERE ends_at > now() - interval '1 day' ORDER BY starts_at`)
}

func (s *Store) sales(ctx context.Context, query string, args ...any) ([]Sale, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read sales: %w", err)
	}
	var sales []Sale
	byID := map[string]int{}
	for rows.Next() {
		var sale Sale
		var ttl int
		if err := rows.Scan(&sale.ID, &sale.Name, &sale.StartsAt, &sale.EndsAt, &ttl, &sale.PerAccountLimit, &sale.OneUnitPerPayer); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read sales: %w", err)
		}
		sale.HoldTTL = time.Duration(ttl) * time.Second
		sale.StartsAt, sale.EndsAt = sale.StartsAt.UTC(), sale.EndsAt.UTC()
		byID[sale.ID] = len(sales)
		sales = append(sales, sale)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sales: %w", err)
	}
	if len(sales) == 0 {
		return nil, nil
	}
	ids := make([]string, len(sales))
	for i, sale := range sales {
		ids[i] = sale.ID
	}
	rows, err = s.pool.Query(ctx, `SELECT k.sale_id, k.sku, k.name, k.price_minor, k.currency, i.total
		FROM skus k JOIN inventory i USING (sale_id, sku) WHERE k.sale_id = ANY($1) ORDER BY k.sale_id, k.sku`, ids)
	if err != nil {
		return nil, fmt.Errorf("read skus: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var saleID string
		var k SKU
		if err := rows.Scan(&saleID, &k.SKU, &k.Name, &k.PriceMinor, &k.Currency, &k.Stock); err != nil {
			return nil, fmt.Errorf("read skus: %w", err)
		}
		i := byID[saleID]
		sales[i].SKUs = append(sales[i].SKUs, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read skus: %w", err)
	}
	return sales, nil
}

// Inventory reads the inventory rows of a sale by SKU.
func (s *Store) Inventory(ctx context.Context, sale string) (map[string]intent.Stock, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku, total, available, held, sold FROM inventory WHERE sale_id = $1`, sale)
	if err != nil {
		return nil, fmt.Errorf("read inventory of sale %s: %w", sale, err)
	}
	defer rows.Close()
	out := map[string]intent.Stock{}
	for rows.Next() {
		var sku string
		var st intent.Stock
		if err := rows.Scan(&sku, &st.Total, &st.Available, &st.Held, &st.Sold); err != nil {
			return nil, fmt.Errorf("read inventory of sale %s: %w", sale, err)
		}
		out[sku] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inventory of sale %s: %w", sale, err)
	}
	return out, nil
}

// Reservation reads one reservation row, with its order's id, or ErrNotFound.
func (s *Store) Reservation(ctx context.Context, id string) (intent.Reservation, error) {
	defer s.observe(opReservation, time.Now())
	var r intent.Reservation
	err := s.pool.QueryRow(ctx, `SELECT r.reservation_id, r.sale_id, r.sku, r.account_id, r.status, r.idempotency_key,
		r.expires_at, r.created_at, coalesce(o.order_id, '')
		FROM reservations r LEFT JOIN orders o USING (reservation_id) WHERE r.reservation_id = $1`, id).
		Scan(&r.ID, &r.Sale, &r.SKU, &r.Account, &r.Status, &r.IdempotencyKey, &r.ExpiresAt, &r.CreatedAt, &r.OrderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return intent.Reservation{}, fmt.Errorf("reservation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return intent.Reservation{}, fmt.Errorf("read reservation %s: %w", id, err)
	}
	r.ExpiresAt, r.CreatedAt = r.ExpiresAt.UTC(), r.CreatedAt.UTC()
	return r, nil
}

// AppliedAmong returns which of the given intent ids the ledger has applied.
func (s *Store) AppliedAmong(ctx context.Context, sale string, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT intent_id FROM applied_intents WHERE sale_id = $1 AND intent_id = ANY($2)`, sale, ids)
	if err != nil {
		return nil, fmt.Errorf("read applied intents of sale %s: %w", sale, err)
	}
	var ferr error
	for _, id := range pgxStrings(rows, &ferr) {
		out[id] = true
	}
	if ferr != nil {
		return nil, fmt.Errorf("read applied intents of sale %s: %w", sale, ferr)
	}
	return out, nil
}

// LiveReservations reads a sale's held and paid reservations, each with its
// order's id and, once its payment started, the expiry the grace gave it.
func (s *Store) LiveReservations(ctx context.Context, sale string) ([]intent.Reservation, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.reservation_id, r.sale_id, r.sku, r.account_id, r.status, r.idempotency_key,
		greatest(r.expires_at, o.hold_until), r.created_at, coalesce(o.order_id, '')
		FROM reservations r LEFT JOIN orders o USING (reservation_id)
		WHERE r.sale_id = $1 AND r.status IN ('held', 'paid')`, sale)
	if err != nil {
		return nil, fmt.Errorf("read live reservations of sale %s: %w", sale, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (intent.Reservation, error) {
		var r intent.Reservation
		err := row.Scan(&r.ID, &r.Sale, &r.SKU, &r.Account, &r.Status, &r.IdempotencyKey, &r.ExpiresAt, &r.CreatedAt, &r.OrderID)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read live reservations of sale %s: %w", sale, err)
	}
	return out, nil
}

// Statuses returns the status of each reservation id that has a row.
func (s *Store) Statuses(ctx context.Context, ids []string) (map[string]intent.Status, error) {
	out := map[string]intent.Status{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT reservation_id, status FROM reservations WHERE reservation_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read reservation statuses: %w", err)
	}
	var id string
	var status intent.Status
	if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		out[id] = status
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read reservation statuses: %w", err)
	}
	return out, nil
}
