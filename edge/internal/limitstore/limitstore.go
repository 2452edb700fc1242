// Package limitstore is an in-memory store for ulule/limiter that holds at
// most a fixed number of keys. ulule/limiter's own memory store keeps every
// key in a sync.Map until a sweep finds it expired, so a flood of distinct
// keys (addresses from a large IPv6 range, say) grows the node's memory
// without bound for a whole period.
//
// Each key has a fixed window: a count and the moment the window ends. The
// windows of a shard sit in a list in the order they end, so expired ones
// are dropped from its front as requests arrive (no sweeper goroutine), and
// at the cap a new key takes the place of the window that ends soonest.
// That key starts afresh if it comes back, so under a flood of fresh keys a
// limit loosens for the keys pushed out (each may get a second budget
// within its period) instead of memory growing or new clients being
// refused: the limits shed abuse, they are not the sale's correctness.
package limitstore

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/common"

	"github.com/flashgate/flashgate/internal/clock"
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// MaxKeys is how many keys the store holds at most (default 100,000;
	// at least 32). It is spread over shards, each holding its share.
	MaxKeys int
	// Clock is the clock (default clock.Real); tests set it.
	Clock clock.Clock
}

// DefaultMaxKeys is the cap of a Store whose Options leave it zero.
const DefaultMaxKeys = 100_000

// shardCount spreads keys over this many locks, so concurrent requests
// rarely wait on one another.
const shardCount = 32

// Store is a bounded in-memory limiter.Store.
type Store struct {
	seed    maphash.Seed
	now     func() time.Time
	shards  [shardCount]shard
	evicted atomic.Int64
}

var _ limiter.Store = (*Store)(nil)

type shard struct {
	mu          sync.Mutex // guards the fields below
	max         int
	windows     map[string]*window
	first, last *window // in the order the windows end: first ends soonest
}

// window is one key's count in its current period.
type window struct {
	key        string
	count      int64
	end        time.Time
	prev, next *window
}

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	s := &Store{seed: maphash.MakeSeed(), now: clock.Or(opts.Clock).Now}
	opts.MaxKeys = max(opts.MaxKeys, shardCount) // every shard holds one key at least
	for i := range s.shards {
		s.shards[i].max = opts.MaxKeys / shardCount
		if i < opts.MaxKeys%shardCount {
			s.shards[i].max++
		}
		s.shards[i].windows = map[string]*window{}
	}
	return s
}

// Get counts one request of key and returns its limit context.
func (s *Store) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return s.Increment(ctx, key, 1, rate)
}

// Increment counts count requests of key and returns its limit context.
func (s *Store) Increment(_ context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	now := s.now()
	sh := s.shard(key)
	sh.mu.Lock()
	w, ok := sh.current(key, now)
	if !ok {
		if len(sh.windows) >= sh.max {
			sh.remove(sh.first)
			s.evicted.Add(1)
		}
		w = &window{key: key, end: now.Add(rate.Period)}
		sh.append(w)
	}
	w.count += count
	n, end := w.count, w.end
	sh.mu.Unlock()
	return common.GetContextFromState(now, rate, end, n), nil
}

// Peek returns key's limit context without counting a request.
func (s *Store) Peek(_ context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	now := s.now()
	sh := s.shard(key)
	sh.mu.Lock()
	n, end := int64(0), now.Add(rate.Period)
	if w, ok := sh.current(key, now); ok {
		n, end = w.count, w.end
	}
	sh.mu.Unlock()
	return common.GetContextFromState(now, rate, end, n), nil
}

// Reset forgets key's count.
func (s *Store) Reset(_ context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	now := s.now()
	sh := s.shard(key)
	sh.mu.Lock()
	if w, ok := sh.windows[key]; ok {
		sh.remove(w)
	}
	sh.mu.Unlock()
	return common.GetContextFromState(now, rate, now.Add(rate.Period), 0), nil
}

// Len is how many keys the store holds now, expired ones not yet dropped
// included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.windows)
		sh.mu.Unlock()
	}
	return n
}

// Evicted is how many keys were pushed out at the cap before their window
// ended.
func (s *Store) Evicted() int64 { return s.evicted.Load() }

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)%shardCount]
}

// current drops the shard's expired windows and returns key's window, if
// it has one that has not ended.
func (sh *shard) current(key string, now time.Time) (*window, bool) {
	for sh.first != nil && !now.Before(sh.first.end) {
		sh.remove(sh.first)
	}
	w, ok := sh.windows[key]
	if ok && !now.Before(w.end) {
		// Out of order (a limiter's period changed): ended all the same.
		sh.remove(w)
		return nil, false
	}
	return w, ok
}

// append adds w as the window that ends last. With one period per store,
// a window that starts later ends later, so the list stays in order.
func (sh *shard) append(w *window) {
	sh.windows[w.key] = w
	w.prev = sh.last
	if sh.last != nil {
		sh.last.next = w
	} else {
		sh.first = w
	}
	sh.last = w
}

func (sh *shard) remove(w *window) {
	delete(sh.windows, w.key)
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		sh.first = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		sh.last = w.prev
	}
	w.prev, w.next = nil, nil
}
