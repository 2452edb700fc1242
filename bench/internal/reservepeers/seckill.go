package reservepeers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/flashgate/flashgate/internal/redisconn"
)

var (
	//go:embed take.lua
	takeSource string
	// takeScript is take.lua; see the file for KEYS and return values.
	takeScript = redis.NewScript(takeSource)
)

// takeNoneLeft is take.lua's answer when no unit was left.
const takeNoneLeft = -1

// errSoldOut is take.lua's takeNoneLeft as an error.
var errSoldOut = errors.New("sold out")

// SeckillConfig is one seckill server, selling one SKU of one sale.
type SeckillConfig struct {
	RedisURL string
	// Prefix starts the server's one key (keys.go); Stop deletes it.
	Prefix string
	Sale   string
	SKU    string
	Stock  int // units loaded at Start; 0 starts sold out
	// PoolSize is the Redis connections; 0 means 64, the origin's pool.
	PoolSize int
	// Budget bounds one script run; 0 means DefaultBudget. A run over it
	// is answered 503.
	Budget time.Duration
}

// Validate reports the first thing wrong with c.
func (c SeckillConfig) Validate() error {
	switch {
	case c.Sale == "" || c.SKU == "":
		return errors.New("seckill: sale and sku must not be empty")
	case c.Prefix == "":
		return errors.New("seckill: a key prefix is needed, so Stop deletes only the server's key")
	case c.Stock < 0 || c.PoolSize < 0 || c.Budget < 0:
		return errors.New("seckill: stock, pool size and budget must not be negative")
	}
	return nil
}

// Seckill is the classic Redis-Lua seckill (issue 31's first peer):
// take.lua decrements the SKU's counter if it is above zero, one EVALSHA
// per request, and once the script has said that no unit is left (or that
// it took the last one) a process-local flag answers every later request
// 409 without touching Redis. It reads the body's sku and nothing else:
// no account, no admission token (the Authorization header is left to
// fasthttp), no idempotency key, so one shopper may take every unit and a
// retried request takes a second one.
type Seckill struct {
	Addr string // host:port
	URL  string // http://host:port

	cfg  SeckillConfig
	key  string
	rdb  *redis.Client
	http *server
	// soldOut is set once take.lua has found or left the counter at zero;
	// from then on the server answers 409 at once.
	soldOut atomic.Bool
}

// StartSeckill loads c.Stock units into the SKU's counter and serves.
func StartSeckill(ctx context.Context, c SeckillConfig) (_ *Seckill, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PoolSize == 0 {
		c.PoolSize = 64
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	opts, err := redisconn.ParseURL(c.RedisURL) // its errors never show a password
	if err != nil {
		return nil, fmt.Errorf("seckill: %w", err)
	}
	opts.PoolSize = c.PoolSize
	opts.ContextTimeoutEnabled = true
	s := &Seckill{cfg: c, key: stockKey(c.Prefix, c.Sale, c.SKU), rdb: redis.NewClient(opts)}
	defer func() {
		if err != nil {
			_ = s.rdb.Close()
		}
	}()
	if err := s.rdb.Set(ctx, s.key, c.Stock, 0).Err(); err != nil {
		return nil, fmt.Errorf("seckill: load stock: %w", err)
	}
	if err := takeScript.Load(ctx, s.rdb).Err(); err != nil {
		return nil, fmt.Errorf("seckill: load take.lua: %w", err)
	}
	if s.http, err = serve("seckill", s.handle); err != nil {
		return nil, err
	}
	s.Addr, s.URL = s.http.addr, "http://"+s.http.addr
	return s, nil
}

// handle answers POST /v1/sales/{sale}/reserve.
func (s *Seckill) handle(ctx *fasthttp.RequestCtx) {
	sale, ok := reserveSale(ctx)
	if !ok {
		answer(ctx, fasthttp.StatusNotFound, bodyNotFound)
		return
	}
	sku := fastjson.GetString(ctx.PostBody(), "sku")
	switch {
	case sku == "":
		answer(ctx, fasthttp.StatusBadRequest, bodyInvalidBody)
		return
	case string(sale) != s.cfg.Sale || sku != s.cfg.SKU:
		answer(ctx, fasthttp.StatusNotFound, bodyUnknownSKU)
		return
	case s.soldOut.Load():
		answer(ctx, fasthttp.StatusConflict, bodySoldOut)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.cfg.Budget)
	defer cancel()
	left, err := s.take(c)
	switch {
	case errors.Is(err, errSoldOut):
		s.soldOut.Store(true)
		answer(ctx, fasthttp.StatusConflict, bodySoldOut)
	case err != nil:
		answer(ctx, fasthttp.StatusServiceUnavailable, bodyUnavailable)
	default:
		if left == 0 {
			s.soldOut.Store(true) // the last unit: later requests need not ask Redis
		}
		answer(ctx, fasthttp.StatusCreated, bodyTaken)
	}
}

// take runs take.lua once: the units left after taking one, or errSoldOut.
func (s *Seckill) take(ctx context.Context) (left int64, err error) {
	left, err = takeScript.Run(ctx, s.rdb, []string{s.key}).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("seckill: take: %w", err)
	case left == takeNoneLeft:
		return 0, errSoldOut
	case left < 0:
		return 0, fmt.Errorf("seckill: take: script answered %d", left)
	}
	return left, nil
}

// Sold is the units taken from the counter: the stock loaded at Start less
// what the counter holds now.
func (s *Seckill) Sold(ctx context.Context) (int, error) {
	v, err := s.rdb.Get(ctx, s.key).Result()
	if err != nil {
		return 0, fmt.Errorf("seckill: read stock: %w", err)
	}
	left, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("seckill: stock %q: %w", v, err)
	}
	return s.cfg.Stock - left, nil
}

// Stop stops accepting and drains the requests in hand, then deletes the
// counter and closes the Redis client, all within ctx.
func (s *Seckill) Stop(ctx context.Context) error {
	err := s.http.shutdown(ctx)
	if derr := s.rdb.Del(ctx, s.key).Err(); derr != nil {
		err = errors.Join(err, fmt.Errorf("seckill: delete stock: %w", derr))
	}
	return errors.Join(err, s.rdb.Close())
}
