package defence

import (
	"hash/maphash"
	"sync"
	"time"
)

// watch counts, on one node, what gets an account or an address caught:
// each account's offences, and the accounts that join each sale from each
// address and network. It forgets everything every OffenceWindow, and
// sooner if it holds more than maxWatched keys, so a flood of fresh
// accounts or addresses cannot grow it without bound. Sharded by key: a
// join takes one shard's lock, not the node's.
type watch struct {
	seed   maphash.Seed
	shards [watchShards]watchShard
}

const (
	watchShards = 64
	maxWatched  = 1 << 20 // keys over all shards
)

// watchShard's mu guards its maps and since.
type watchShard struct {
	mu       sync.Mutex
	since    time.Time                      // when the shard's window began
	offences map[string]int                 // account -> refusals
	accounts map[string]map[string]struct{} // sale NUL address-or-network -> accounts
}

func newWatch() *watch {
	return &watch{seed: maphash.MakeSeed()}
}

func (w *watch) shard(key string) *watchShard {
	return &w.shards[maphash.String(w.seed, key)%watchShards]
}

// fresh starts a new window when the shard's is over or full; mu held.
func (s *watchShard) fresh(now time.Time) {
	if s.offences == nil || now.Sub(s.since) >= OffenceWindow || len(s.offences)+len(s.accounts) >= maxWatched/watchShards {
		s.since, s.offences, s.accounts = now, map[string]int{}, map[string]map[string]struct{}{}
	}
}

// offence counts one refusal of account and reports whether it has now
// earned limit of them in the window (once: the count starts again).
func (w *watch) offence(account string, limit int, now time.Time) bool {
	s := w.shard(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fresh(now)
	s.offences[account]++
	if s.offences[account] < limit {
		return false
	}
	delete(s.offences, account)
	return true
}

// joined records that account joined sale from place (an address or a
// network key) and reports whether more than limit accounts have now
// (once: the place's set starts again).
func (w *watch) joined(sale, place, account string, limit int, now time.Time) bool {
	key := sale + "\x00" + place
	s := w.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fresh(now)
	set := s.accounts[key]
	if set == nil {
		set = map[string]struct{}{}
		s.accounts[key] = set
	}
	set[account] = struct{}{}
	if len(set) <= limit {
		return false
	}
	delete(s.accounts, key)
	return true
}
