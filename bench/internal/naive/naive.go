// Package naive is the baseline flashgate is measured against: the design
// the seeds start from, with no waiting room and no Redis — every buy is a
// conditional UPDATE straight on one Postgres row ("Fix A": correct, and
// serialized on the row's lock). It serves POST /naive/buy over fasthttp
// with an ordinary 64-connection pool, as a typical shop backend would.
package naive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"
)

// Options tune the baseline; zero values take the defaults.
type Options struct {
	// PoolSize is the Postgres connections the server uses; 0 means 64.
	PoolSize int
	// Budget bounds one buy's database work; 0 means 10 s. A buy over
	// budget answers 503, as a backend's own timeout would.
	Budget time.Duration
	// Schema holds the baseline's two tables; "" means "naive_baseline".
	Schema string
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
// and serves on 127.0.0.1.
func Start(ctx context.Context, postgresURL string, stock int, opts Options) (*Server, error) {
	if opts.PoolSize <= 0 {
		opts.PoolSize = 64
	}
	if opts.Budget <= 0 {
		opts.Budget = 10 * time.Second
	}
	if opts.Schema == "" {
		opts.Schema = "naive_baseline"
	}
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
	if err := s.reset(ctx, stock); err != nil {
		pool.Close()
		return nil, err
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.URL = "http://" + s.ln.Addr().String()
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "naive", ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s, nil
}

func (s *Server) reset(ctx context.Context, stock int) error {
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
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+q+`.items (id, stock) VALUES (1, $1)`, stock); err != nil {
		return fmt.Errorf("naive: set up: %w", err)
	}
	return nil
}

// handle: POST /naive/buy?account=<id> → 201 bought, 409 sold out, 503
// when the database did not answer within the budget.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) != "/naive/buy" || !ctx.IsPost() {
		ctx.Error(`{"error":"not_found"}`, fasthttp.StatusNotFound)
		return
	}
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
	ctx.SetContentType("application/json")
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

// Sold reads how many units were sold (orders) and the stock left.
func (s *Server) Sold(ctx context.Context) (orders, stockLeft int, err error) {
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT stock FROM items WHERE id = 1)`).Scan(&orders, &stockLeft); err != nil {
		return 0, 0, fmt.Errorf("naive: read sold: %w", err)
	}
	return orders, stockLeft, nil
}

// Close stops the server and drops the schema.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	<-s.done
	_, dropErr := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{s.opts.Schema}.Sanitize()+` CASCADE`)
	s.pool.Close()
	return errors.Join(err, dropErr)
}
