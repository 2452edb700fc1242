package reservepeers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/flashgate/flashgate/internal/testenv"
)

//go:embed serializable.sql
var serializableSchema string

// The SQLSTATEs of a transaction Postgres gave up on to keep the others
// serializable; Serializable answers them 503 and does not retry.
const (
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
)

// errUnknownSKU is a reserve for a sale and SKU the books do not hold.
var errUnknownSKU = errors.New("unknown sale or sku")

// SerializableConfig is one serializable server, selling one SKU of one
// sale.
type SerializableConfig struct {
	PostgresURL string // the database; the server works in Schema
	// Schema is the Postgres schema Start creates (lowercase letters,
	// digits and _) and Stop drops, with the server's tables in it.
	Schema string
	Sale   string
	SKU    string
	Stock  int // units on sale at Start
	// PoolSize is the Postgres connections; 0 means 32, the origin's
	// pool (PostgresMaxConns). Start opens them all.
	PoolSize int
	// Budget bounds one request's transaction, waiting for a connection
	// included; 0 means DefaultBudget. A request over it is answered 503.
	Budget time.Duration
}

// Validate reports the first thing wrong with c.
func (c SerializableConfig) Validate() error {
	switch {
	case c.Sale == "" || c.SKU == "":
		return errors.New("serializable: sale and sku must not be empty")
	case c.Schema == "":
		return errors.New("serializable: a schema of its own is needed, so Stop drops only the server's tables")
	case c.Stock < 0 || c.PoolSize < 0 || c.Budget < 0:
		return errors.New("serializable: stock, pool size and budget must not be negative")
	}
	return nil
}

// Serializable is the textbook Postgres design (issue 31's second peer):
// per request one SERIALIZABLE transaction reads the SKU's available
// count and, if it is above zero, decrements it, inserts an order row and
// commits. Postgres's serializable isolation is what keeps two requests
// from taking the last unit; it does so by failing one of them
// (SQLSTATE 40001, or 40P01 for a deadlock), which the server answers 503
// {"error":"serialization_failure"} with no retry, as a client would
// see it: that unit stays on sale, and under a crowd most of the stock can
// still be unsold when the last shopper has tried.
//
// The account is the body's "account" field, taken as sent and unverified
// (the design trusts whatever session layer is in front, which the
// benchmark leaves out); the body's idempotency_key is recorded, never
// checked. A body without sku or account is answered 400.
type Serializable struct {
	Addr string // host:port
	URL  string // http://host:port

	cfg     SerializableConfig
	pool    *pgxpool.Pool
	drop    func(context.Context) error
	http    *server
	parsers fastjson.ParserPool
}

// StartSerializable creates the schema and its tables with c.Stock units
// of c.SKU on sale, opens the pool's connections, and serves.
func StartSerializable(ctx context.Context, c SerializableConfig) (_ *Serializable, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PoolSize == 0 {
		c.PoolSize = 32
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	schemaURL, drop, err := testenv.CreateSchema(ctx, c.PostgresURL, c.Schema)
	if err != nil {
		return nil, fmt.Errorf("serializable: %w", err)
	}
	s := &Serializable{cfg: c, drop: drop}
	defer func() {
		if err != nil {
			if s.pool != nil {
				s.pool.Close()
			}
			err = errors.Join(err, drop(context.WithoutCancel(ctx)))
		}
	}()
	pcfg, err := pgxpool.ParseConfig(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("serializable: postgres url: %w", err)
	}
	pcfg.MaxConns = int32(c.PoolSize)
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("serializable: postgres: %w", err)
	}
	if _, err := s.pool.Exec(ctx, serializableSchema); err != nil {
		return nil, fmt.Errorf("serializable: create tables: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO stock (sale_id, sku, total, available) VALUES ($1, $2, $3, $3)`,
		c.Sale, c.SKU, c.Stock); err != nil {
		return nil, fmt.Errorf("serializable: put stock on sale: %w", err)
	}
	if err := openAll(ctx, s.pool, c.PoolSize); err != nil {
		return nil, err
	}
	if s.http, err = serve("serializable", s.handle); err != nil {
		return nil, err
	}
	s.Addr, s.URL = s.http.addr, "http://"+s.http.addr
	return s, nil
}

// openAll opens n connections of pool and returns them to it, so the first
// requests do not pay for connecting.
func openAll(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("serializable: open connections: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// handle answers POST /v1/sales/{sale}/reserve.
func (s *Serializable) handle(ctx *fasthttp.RequestCtx) {
	sale, ok := reserveSale(ctx)
	if !ok {
		answer(ctx, fasthttp.StatusNotFound, bodyNotFound)
		return
	}
	p := s.parsers.Get()
	v, err := p.ParseBytes(ctx.PostBody())
	var sku, account, idem string
	if err == nil {
		sku, account, idem = string(v.GetStringBytes("sku")), string(v.GetStringBytes("account")), string(v.GetStringBytes("idempotency_key"))
	}
	s.parsers.Put(p)
	if sku == "" || account == "" {
		answer(ctx, fasthttp.StatusBadRequest, bodyInvalidBody)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.cfg.Budget)
	defer cancel()
	taken, err := s.reserve(c, string(sale), sku, account, idem)
	switch {
	case err != nil:
		status, body := statusOf(err)
		answer(ctx, status, body)
	case taken:
		answer(ctx, fasthttp.StatusCreated, bodyTaken)
	default:
		answer(ctx, fasthttp.StatusConflict, bodySoldOut)
	}
}

// reserve is one attempt in one SERIALIZABLE transaction: read the count,
// and if a unit is left take it and record the order. taken is false, with
// no error, when none was left.
func (s *Serializable) reserve(ctx context.Context, sale, sku, account, idem string) (taken bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		var available int
		err := tx.QueryRow(ctx, `SELECT available FROM stock WHERE sale_id = $1 AND sku = $2`, sale, sku).Scan(&available)
		if errors.Is(err, pgx.ErrNoRows) {
			return errUnknownSKU
		}
		if err != nil || available <= 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE stock SET available = available - 1 WHERE sale_id = $1 AND sku = $2`, sale, sku); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (sale_id, sku, account_id, idempotency_key) VALUES ($1, $2, $3, $4)`,
			sale, sku, account, idem); err != nil {
			return err
		}
		taken = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("serializable: reserve: %w", err)
	}
	return taken, nil
}

// statusOf maps a reserve's error to its answer.
func statusOf(err error) (status int, body []byte) {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, errUnknownSKU):
		return fasthttp.StatusNotFound, bodyUnknownSKU
	case errors.As(err, &pgErr) && (pgErr.Code == sqlstateSerializationFailure || pgErr.Code == sqlstateDeadlockDetected):
		return fasthttp.StatusServiceUnavailable, bodyTryAgain
	case errors.Is(err, context.DeadlineExceeded):
		return fasthttp.StatusServiceUnavailable, bodyUnavailable
	default:
		return fasthttp.StatusInternalServerError, bodyInternal
	}
}

// Sold is the orders the books hold for the server's SKU. It fails when
// they disagree with the stock row (total less available), which
// serializable isolation must prevent.
func (s *Serializable) Sold(ctx context.Context) (int, error) {
	var total, available, orders int
	err := s.pool.QueryRow(ctx, `SELECT total, available,
		(SELECT count(*) FROM orders o WHERE o.sale_id = s.sale_id AND o.sku = s.sku)
		FROM stock s WHERE sale_id = $1 AND sku = $2`, s.cfg.Sale, s.cfg.SKU).Scan(&total, &available, &orders)
	if err != nil {
		return 0, fmt.Errorf("serializable: read books: %w", err)
	}
	if total-available != orders {
		return orders, fmt.Errorf("serializable: books disagree: %d orders, %d units gone from the stock row", orders, total-available)
	}
	return orders, nil
}

// Stop stops accepting and drains the requests in hand, closes the pool and
// drops the schema, all within ctx.
func (s *Serializable) Stop(ctx context.Context) error {
	err := s.http.shutdown(ctx)
	s.pool.Close()
	return errors.Join(err, s.drop(ctx))
}
