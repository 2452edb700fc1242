// Package naive is the baseline flashgate is measured against: the design
// the seeds start from, with no waiting room and no Redis — every buy is a
// conditional UPDATE straight on one Postgres row ("Fix A": correct, and
// serialized on the row's lock). It serves POST /naive/buy over fasthttp
// with an ordinary 64-connection pool, as a typical shop backend would.
//
// The server runs inside the simulator (Start, as its tests and make bench
// without a server of its own do) or as a process of its own on the stack's
// CPUs (bench/naiveserver), which the simulator drives through its admin
// routes with a Client.
package naive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/listenaddr"
)

// Options tune the baseline; zero values take the defaults.
type Options struct {
	// Addr is where the server listens; "" means 127.0.0.1 on a free port.
	// It must be a loopback address: the admin routes reset the sale.
	Addr string
	// PoolSize is the Postgres connections the server uses; 0 means 64.
	PoolSize int
	// Budget bounds one buy's database work; 0 means 10 s. A buy over
	// budget answers 503, as a backend's own timeout would.
	Budget time.Duration
	// Schema holds the baseline's two tables; "" means "naive_baseline".
	Schema string
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 64
	}
	if o.Budget <= 0 {
		o.Budget = 10 * time.Second
	}
	if o.Schema == "" {
		o.Schema = "naive_baseline"
	}
	return o
}

// Validate reports options Start would refuse.
func (o Options) Validate() error {
	if !listenaddr.Loopback(o.withDefaults().Addr) {
		return fmt.Errorf("naive: listen address %q: loopback only (127.0.0.1:port), its admin routes reset the sale", o.Addr)
	}
	if o.PoolSize < 0 || o.Budget < 0 {
		return errors.New("naive: pool size and budget must not be negative")
	}
	return nil
}

// State is the baseline's books: what its admin route answers.
type State struct {
	Orders    int `json:"orders"`     // successful buys
	StockLeft int `json:"stock_left"` // units still on sale
	PoolSize  int `json:"pool_size"`  // the server's Postgres connections
}

// Server is the baseline's HTTP server on a loopback port.
type Server struct {
	URL  string // http://127.0.0.1:<port>
	pool *pgxpool.Pool
	srv  *fasthttp.Server
	ln   net.Listener
	opts Options
	done chan struct{}
}

// Start creates the schema (dropping an old one), puts stock units on sale
// and serves on opts.Addr.
func Start(ctx context.Context, postgresURL string, stock int, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(postgresURL)
	if err != nil {
		return nil, fmt.Errorf("naive: postgres url: %w", err)
	}
	cfg.MaxConns = int32(opts.PoolSize)
	cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("naive: postgres: %w", err)
	}
	s := &Server{pool: pool, opts: opts, done: make(chan struct{})}
	if err := s.create(ctx, stock); err != nil {
		pool.Close()
		return nil, err
	}
	s.ln, err = net.Listen("tcp", opts.Addr)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("naive: listen: %w", err)
	}
	s.URL = "http://" + s.ln.Addr().String()
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "naive", ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s, nil
}

// create makes the schema afresh with stock units on sale.
func (s *Server) create(ctx context.Context, stock int) error {
	q := pgx.Identifier{s.opts.Schema}.Sanitize()
	for _, stmt := range []string{
		`DROP SCHEMA IF EXISTS ` + q + ` CASCADE`,
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.items (id integer PRIMARY KEY, stock integer NOT NULL)`,
		`CREATE TABLE ` + q + `.orders (id bigserial PRIMARY KEY, account text NOT NULL, at timestamptz NOT NULL DEFAULT now())`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("naive: set up: %w", err)
		}
	}
	return s.Reset(ctx, stock)
}

// Reset starts a new sale of stock units: the orders go, and both tables
// start from fresh files (TRUNCATE), so no run inherits another's dead rows.
// Run it between runs, not during one.
func (s *Server) Reset(ctx context.Context, stock int) error {
	if stock < 0 {
		return fmt.Errorf("naive: reset: stock %d is negative", stock)
	}
	q := pgx.Identifier{s.opts.Schema}.Sanitize()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `TRUNCATE `+q+`.items, `+q+`.orders RESTART IDENTITY`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+q+`.items (id, stock) VALUES (1, $1)`, stock)
		return err
	})
	if err != nil {
		return fmt.Errorf("naive: reset: %w", err)
	}
	return nil
}

// handle routes the server's requests:
//
//	POST /naive/buy?account=<id>        201 bought, 409 sold out, 503 when the
//	                                    database did not answer within the budget
//	POST /naive/admin/reset?stock=<n>   204: a new sale of n units (Reset)
//	GET  /naive/admin/state             200 State as JSON
//	GET  /healthz                       200
//
// The admin routes have no token: Start listens on loopback only.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	switch path := string(ctx.Path()); {
	case path == "/naive/buy" && ctx.IsPost():
		s.buy(ctx)
	case path == "/naive/admin/reset" && ctx.IsPost():
		stock, err := strconv.Atoi(string(ctx.QueryArgs().Peek("stock")))
		if err != nil || stock < 0 {
			ctx.Error(`{"error":"invalid_stock"}`, fasthttp.StatusBadRequest)
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Reset(c, stock); err != nil {
			ctx.Error(`{"error":"reset_failed"}`, fasthttp.StatusInternalServerError)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	case path == "/naive/admin/state" && ctx.IsGet():
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := s.State(c)
		if err != nil {
			ctx.Error(`{"error":"unavailable"}`, fasthttp.StatusServiceUnavailable)
			return
		}
		b, _ := json.Marshal(st)
		ctx.SetBody(b)
	case path == "/healthz" && ctx.IsGet():
		ctx.SetBodyString(`{"status":"ok"}`)
	default:
		ctx.Error(`{"error":"not_found"}`, fasthttp.StatusNotFound)
	}
}

// buy is one click on Buy: the conditional UPDATE and the order, in one
// transaction.
func (s *Server) buy(ctx *fasthttp.RequestCtx) {
	account := string(ctx.QueryArgs().Peek("account"))
	c, cancel := context.WithTimeout(context.Background(), s.opts.Budget)
	defer cancel()
	bought := false
	err := pgx.BeginFunc(c, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(c, `UPDATE items SET stock = stock - 1 WHERE id = 1 AND stock > 0`)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		bought = true
		_, err = tx.Exec(c, `INSERT INTO orders (account) VALUES ($1)`, account)
		return err
	})
	switch {
	case err != nil:
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"error":"unavailable"}`)
	case bought:
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetBodyString(`{"status":"bought"}`)
	default:
		ctx.SetStatusCode(fasthttp.StatusConflict)
		ctx.SetBodyString(`{"error":"sold_out"}`)
	}
}

// State reads the books: the orders, the stock left, the pool's size.
func (s *Server) State(ctx context.Context) (State, error) {
	st := State{PoolSize: s.opts.PoolSize}
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT stock FROM items WHERE id = 1)`).Scan(&st.Orders, &st.StockLeft); err != nil {
		return State{}, fmt.Errorf("naive: read sold: %w", err)
	}
	return st, nil
}

// Sold reads how many units were sold (orders) and the stock left.
func (s *Server) Sold(ctx context.Context) (orders, stockLeft int, err error) {
	st, err := s.State(ctx)
	return st.Orders, st.StockLeft, err
}

// Close stops the server and drops the schema.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	<-s.done
	_, dropErr := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{s.opts.Schema}.Sanitize()+` CASCADE`)
	s.pool.Close()
	return errors.Join(err, dropErr)
}
