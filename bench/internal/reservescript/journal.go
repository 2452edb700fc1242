package reservescript

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashgate/flashgate/origin/origininternals"
)

// Journal is the origin's reserve journal (ledger.Store.RecordGrants into
// reserve_journal) in a Postgres schema of the benchmark's own.
type Journal struct {
	pool   *pgxpool.Pool
	ledger *origininternals.Ledger
}

// OpenJournal connects to pgURL, whose search_path names an empty schema,
// applies the ledger's migrations there and creates sale with stock units
// of sku (journal rows reference their sale). Close it when done.
func OpenJournal(ctx context.Context, pgURL, sale, sku string, stock int) (_ *Journal, err error) {
	pcfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("journal: postgres url: %w", err)
	}
	// As many connections as the origin's pool: up to Pipelines journal
	// writes are in flight at once, and they must not queue for one.
	pcfg.MaxConns = int32(origininternals.DefaultConfig().PostgresMaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("journal: postgres: %w", err)
	}
	defer func() {
		if err != nil {
			pool.Close()
		}
	}()
	if err := origininternals.Migrate(ctx, pool); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	l := origininternals.NewLedger(pool)
	now := time.Now().UTC()
	if _, err := l.CreateSale(ctx, origininternals.LedgerSale{
		ID: sale, Name: "reserve benchmark journal", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		HoldTTL: 10 * time.Minute, PerAccountLimit: 1,
		SKUs: []origininternals.LedgerSKU{{SKU: sku, Name: "bench unit", PriceMinor: 100, Currency: "INR", Stock: stock}},
	}); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	// The journal keeps only grants of the sale's current epoch: the one
	// Path.Load loads every sale with.
	if _, err := l.SetRedisEpoch(ctx, sale, epoch, "", false); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{pool: pool, ledger: l}, nil
}

// Reset empties the journal, so a run does not pay for the rows of the runs
// before it.
func (j *Journal) Reset(ctx context.Context) error {
	if _, err := j.pool.Exec(ctx, "TRUNCATE reserve_journal"); err != nil {
		return fmt.Errorf("journal: reset: %w", err)
	}
	return nil
}

// Rows counts the journaled reserves: a run that journals must leave one
// row per created reserve.
func (j *Journal) Rows(ctx context.Context) (int, error) {
	var n int
	if err := j.pool.QueryRow(ctx, "SELECT count(*) FROM reserve_journal").Scan(&n); err != nil {
		return 0, fmt.Errorf("journal: count: %w", err)
	}
	return n, nil
}

// Close closes the journal's connections.
func (j *Journal) Close() { j.pool.Close() }
