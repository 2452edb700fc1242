// Package checkout is the sale's fast gate in Redis: it loads stock, takes
// units with one atomic script per reserve, releases expired holds, and
// carries every change to the order writer on the sale's intents stream.
package checkout

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisscript"
	"github.com/flashgate/flashgate/origin/internal/intent"
)

var (
	//go:embed reserve.lua
	reserveSource string
	//go:embed due.lua
	dueSource string
	//go:embed release.lua
	releaseSource string
	//go:embed cancel.lua
	cancelSource string
	//go:embed load.lua
	loadSource string
	//go:embed lease.lua
	leaseSource string
	//go:embed unlease.lua
	unleaseSource string
	//go:embed replid.lua
	replidSource string
	//go:embed overdue.lua
	overdueSource string

	reserveScript = redis.NewScript(reserveSource)
	dueScript     = redis.NewScript(dueSource)
	releaseScript = redis.NewScript(releaseSource)
	cancelScript  = redis.NewScript(cancelSource)
	loadScript    = redis.NewScript(loadSource)
	leaseScript   = redis.NewScript(leaseSource)
	unleaseScript = redis.NewScript(unleaseSource)
	replidScript  = redis.NewScript(replidSource)
	overdueScript = redis.NewScript(overdueSource)
)

// Errors callers branch on.
var (
	// ErrStockMismatch: Redis already holds other figures for a sale than
	// Postgres does; the sale needs a rebuild, not a load.
	ErrStockMismatch = errors.New("checkout: redis holds other stock figures for this sale")
	// ErrNotFound: no such reservation in Redis (never made, or retention passed).
	ErrNotFound = errors.New("checkout: reservation not found")
)

// Store is the Redis side of every sale. It is safe for concurrent use.
type Store struct {
	rdb       redis.UniversalClient
	keys      Keys
	retention time.Duration
}

// NewStore returns a Store over rdb using keys. Per-shopper keys (burned
// tokens, idempotency keys, reservations) are kept for retention after their
// last write; zero means 7 days.
func NewStore(rdb redis.UniversalClient, keys Keys, retention time.Duration) *Store {
	if retention <= 0 {
		retention = 7 * 24 * time.Hour
	}
	return &Store{rdb: rdb, keys: keys, retention: retention}
}

// Keys returns the key schema the store uses.
func (s *Store) Keys() Keys { return s.keys }

// Load puts a sale's stock into Redis, SKU by SKU, from the figures Postgres
// holds, and gives the sale an epoch if this Redis holds none (epoch is the
// one to give). It returns the epoch Redis holds afterwards, or
// ErrStockMismatch when Redis already holds other figures.
func (s *Store) Load(ctx context.Context, sale, epoch string, stock map[string]intent.Stock) (string, error) {
	keys := make([]string, 0, 1+len(stock))
	args := make([]any, 0, 1+4*len(stock))
	skus := make([]string, 0, len(stock))
	keys = append(keys, s.keys.Meta(sale))
	args = append(args, epoch)
	for sku, c := range stock {
		skus = append(skus, sku)
		keys = append(keys, s.keys.Inventory(sale, sku))
		args = append(args, c.Total, c.Available, c.Held, c.Sold)
	}
	res, err := loadScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return "", fmt.Errorf("load sale %s: %w", sale, err)
	}
	if len(res) != 3 {
		return "", fmt.Errorf("load sale %s: script returned %d values, want 3", sale, len(res))
	}
	if code, _ := res[0].(int64); code == loadMismatch {
		i, _ := res[1].(int64)
		return "", fmt.Errorf("load sale %s: sku %s: %w", sale, skus[i-1], ErrStockMismatch)
	}
	have, _ := res[2].(string)
	return have, nil
}

// Meta reads the epoch this Redis holds for a sale ("" for none) and the
// number of reserves granted in it.
func (s *Store) Meta(ctx context.Context, sale string) (epoch string, seq int64, err error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Meta(sale), metaEpoch, metaSeq).Result()
	if err != nil {
		return "", 0, fmt.Errorf("read meta of sale %s: %w", sale, err)
	}
	epoch, _ = v[0].(string)
	if n, ok := v[1].(string); ok {
		if seq, err = strconv.ParseInt(n, 10, 64); err != nil {
			return "", 0, fmt.Errorf("read meta of sale %s: seq %q: %w", sale, n, err)
		}
	}
	return epoch, seq, nil
}

// NewEpoch returns a fresh random epoch for a sale's state in Redis.
func NewEpoch() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new epoch: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Inventory reads the counters of the given SKUs in one round trip. SKUs
// that are not loaded are missing from the result.
func (s *Store) Inventory(ctx context.Context, sale string, skus []string) (map[string]intent.Stock, error) {
	vals, err := s.inventoryFields(ctx, sale, skus, invAvailable, invHeld, invSold)
	if err != nil {
		return nil, fmt.Errorf("read inventory of sale %s: %w", sale, err)
	}
	out := make(map[string]intent.Stock, len(vals))
	for sku, v := range vals {
		out[sku] = intent.Stock{Total: toInt(v[0]), Available: toInt(v[1]), Held: toInt(v[2]), Sold: toInt(v[3])}
	}
	return out, nil
}

// inventoryFields reads the SKUs' inventory hashes in one round trip: per
// loaded SKU its total, then the fields asked for. A SKU whose hash has
// no total is not loaded, and is missing from the result.
func (s *Store) inventoryFields(ctx context.Context, sale string, skus []string, fields ...string) (map[string][]any, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(skus))
	for i, sku := range skus {
		cmds[i] = pipe.HMGet(ctx, s.keys.Inventory(sale, sku), append([]string{invTotal}, fields...)...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make(map[string][]any, len(skus))
	for i, cmd := range cmds {
		if v := cmd.Val(); v[0] != nil {
			out[skus[i]] = v
		}
	}
	return out, nil
}

// StockMoments are when one SKU's available count first and last reached
// zero and last came back from it, as the scripts recorded them on Redis's
// clock (zero when not since the SKU was loaded or rebuilt).
type StockMoments struct {
	FirstZero, Zero, Back time.Time
}

// Moments reads the StockMoments of the given SKUs in one round trip. SKUs
// that are not loaded are missing from the result.
func (s *Store) Moments(ctx context.Context, sale string, skus []string) (map[string]StockMoments, error) {
	vals, err := s.inventoryFields(ctx, sale, skus, invFirstZeroMs, invZeroMs, invBackMs)
	if err != nil {
		return nil, fmt.Errorf("read stock moments of sale %s: %w", sale, err)
	}
	out := make(map[string]StockMoments, len(vals))
	for sku, v := range vals {
		out[sku] = StockMoments{FirstZero: unixMilli(v[1]), Zero: unixMilli(v[2]), Back: unixMilli(v[3])}
	}
	return out, nil
}

// unixMilli reads a field of unix milliseconds; a missing one is zero.
func unixMilli(v any) time.Time {
	if ms := toInt(v); ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	return time.Time{}
}

// Reservation reads one reservation as Redis knows it, or ErrNotFound.
func (s *Store) Reservation(ctx context.Context, sale, id string) (intent.Reservation, error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Reservation(sale, id),
		resAccount, resSKU, resStatus, resExpiresMs, resCreatedMs, resIdem, resOrder).Result()
	if err != nil {
		return intent.Reservation{}, fmt.Errorf("read reservation %s: %w", id, err)
	}
	if v[0] == nil {
		return intent.Reservation{}, fmt.Errorf("reservation %s: %w", id, ErrNotFound)
	}
	return intent.Reservation{
		ID:             id,
		Sale:           sale,
		Account:        toString(v[0]),
		SKU:            toString(v[1]),
		Status:         intent.Status(toString(v[2])),
		ExpiresAt:      time.UnixMilli(toInt(v[3])).UTC(),
		CreatedAt:      time.UnixMilli(toInt(v[4])).UTC(),
		IdempotencyKey: toString(v[5]),
		OrderID:        toString(v[6]),
	}, nil
}

// Hold names a live reservation with what the scripts need to find its keys.
type Hold struct {
	ID      string
	SKU     string
	Account string
	// ReturnUnit, for Cancel: the unit is real and goes back to available.
	ReturnUnit bool
}

// ReleaseDue releases up to limit holds of a sale whose expiry has passed,
// returning how many this call released. Holds released by a concurrent
// sweeper, or extended meanwhile, are left alone.
func (s *Store) ReleaseDue(ctx context.Context, sale string, limit int) (int, error) {
	ids, err := dueScript.Run(ctx, s.rdb, []string{s.keys.Holds(sale)}, limit).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("list due holds of sale %s: %w", sale, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	holds, err := s.holds(ctx, sale, ids)
	if err != nil {
		return 0, err
	}
	results, err := s.runEach(ctx, releaseScript, holds, func(h Hold) []string {
		return []string{
			s.keys.Reservation(sale, h.ID), s.keys.Inventory(sale, h.SKU),
			s.keys.Account(sale, h.Account), s.keys.Holds(sale), s.keys.Intents(sale), s.keys.Rebuilding(sale),
		}
	})
	if err != nil {
		return 0, fmt.Errorf("release holds of sale %s: %w", sale, err)
	}
	released := 0
	for _, r := range results {
		if r == releaseReleased {
			released++
		}
	}
	return released, nil
}

// OverdueHolds counts a sale's holds still held whose expiry (a payment's
// grace included) passed more than late ago: holds a sweeper should have
// released by now. It counts on the expiry index in one command, no scan,
// by Redis's clock, which set the expiries and which the sweepers go by.
func (s *Store) OverdueHolds(ctx context.Context, sale string, late time.Duration) (int64, error) {
	n, err := overdueScript.Run(ctx, s.rdb, []string{s.keys.Holds(sale)}, late.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("count overdue holds of sale %s: %w", sale, err)
	}
	return n, nil
}

// Cancel drops holds that Postgres refused, returning how many were still
// held. Cancelling a hold twice changes nothing.
func (s *Store) Cancel(ctx context.Context, sale string, holds []Hold) (int, error) {
	results, err := s.runEach(ctx, cancelScript, holds, func(h Hold) []string {
		return []string{
			s.keys.Reservation(sale, h.ID), s.keys.Inventory(sale, h.SKU),
			s.keys.Account(sale, h.Account), s.keys.Holds(sale),
		}
	})
	if err != nil {
		return 0, fmt.Errorf("cancel holds of sale %s: %w", sale, err)
	}
	cancelled := 0
	for _, r := range results {
		if r == cancelCancelled {
			cancelled++
		}
	}
	return cancelled, nil
}

// holds reads the SKU and account of each reservation id in one round trip.
// Ids whose reservation is gone are dropped from the holds index instead.
func (s *Store) holds(ctx context.Context, sale string, ids []string) ([]Hold, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.keys.Reservation(sale, id), resSKU, resAccount)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read holds of sale %s: %w", sale, err)
	}
	holds := make([]Hold, 0, len(ids))
	var gone []any
	for i, cmd := range cmds {
		v := cmd.Val()
		if v[0] == nil || v[1] == nil {
			gone = append(gone, ids[i])
			continue
		}
		holds = append(holds, Hold{ID: ids[i], SKU: toString(v[0]), Account: toString(v[1])})
	}
	if len(gone) > 0 {
		if err := s.rdb.ZRem(ctx, s.keys.Holds(sale), gone...).Err(); err != nil {
			return nil, fmt.Errorf("drop vanished holds of sale %s: %w", sale, err)
		}
	}
	return holds, nil
}

// runEach runs script once per hold in one pipeline, with the hold's id and
// its ReturnUnit flag as arguments, and returns each run's integer reply.
func (s *Store) runEach(ctx context.Context, script *redis.Script, holds []Hold, keys func(Hold) []string) ([]int64, error) {
	if len(holds) == 0 {
		return nil, nil
	}
	cmds := redisscript.Each(ctx, s.rdb, script, len(holds), func(i int) ([]string, []any) {
		return keys(holds[i]), []any{holds[i].ID, holds[i].ReturnUnit}
	})
	out := make([]int64, len(cmds))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func toInt(v any) int64 {
	n, _ := strconv.ParseInt(toString(v), 10, 64)
	return n
}
