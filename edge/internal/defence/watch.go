package defence

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"time"
)

// watch counts, on one node, what gets accounts caught: each account's
// offences, and the accounts that join each sale from each address and
// network. Every key counts over its own OffenceWindow from its first
// event. A shard that fills up (maxWatched keys over all shards) first
// drops its keys whose window is over, and forgets everything only if that
// is not enough — a flood of fresh accounts or addresses cannot grow it
// without bound; resets counts those. Sharded by key: a join takes one
// shard's lock, not the node's.
type watch struct {
	seed   maphash.Seed
	shards [watchShards]watchShard
	resets func() // counts a shard that forgot everything
}

const (
	watchShards = 64
	maxWatched  = 1 << 20 // keys over all shards
)

// watchShard's mu guards its maps.
type watchShard struct {
	mu       sync.Mutex
	offences map[string]*tally // account -> refusals
	accounts map[string]*group // sale NUL address-or-network -> accounts
}

type tally struct {
	since time.Time
	n     int
}

type group struct {
	since    time.Time
	accounts map[string]struct{}
}

func newWatch(resets func()) *watch {
	w := &watch{seed: maphash.MakeSeed(), resets: resets}
	for i := range w.shards {
		w.shards[i].offences, w.shards[i].accounts = map[string]*tally{}, map[string]*group{}
	}
	return w
}

func (w *watch) shard(key string) *watchShard {
	return &w.shards[maphash.String(w.seed, key)%watchShards]
}

// room makes room for one more key at now; mu held.
func (w *watch) room(s *watchShard, now time.Time) {
	if len(s.offences)+len(s.accounts) < maxWatched/watchShards {
		return
	}
	maps.DeleteFunc(s.offences, func(_ string, t *tally) bool { return now.Sub(t.since) >= OffenceWindow })
	maps.DeleteFunc(s.accounts, func(_ string, g *group) bool { return now.Sub(g.since) >= OffenceWindow })
	if len(s.offences)+len(s.accounts) >= maxWatched/watchShards {
		s.offences, s.accounts = map[string]*tally{}, map[string]*group{}
		w.resets()
	}
}

// offence counts one refusal of account and reports whether it has now
// earned limit of them within its window (once: the count starts again).
func (w *watch) offence(account string, limit int, now time.Time) bool {
	s := w.shard(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.offences[account]
	if t == nil || now.Sub(t.since) >= OffenceWindow {
		w.room(s, now)
		t = &tally{since: now}
		s.offences[account] = t
	}
	t.n++
	if t.n < limit {
		return false
	}
	delete(s.offences, account)
	return true
}

// joined records that account joined sale from place (an address or a
// network key) and, when more than limit accounts have now within the
// window, returns them all (once: the place's count starts again).
func (w *watch) joined(sale, place, account string, limit int, now time.Time) []string {
	key := sale + "\x00" + place
	s := w.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.accounts[key]
	if g == nil || now.Sub(g.since) >= OffenceWindow {
		w.room(s, now)
		g = &group{since: now, accounts: map[string]struct{}{}}
		s.accounts[key] = g
	}
	g.accounts[account] = struct{}{}
	if len(g.accounts) <= limit {
		return nil
	}
	delete(s.accounts, key)
	return slices.Sorted(maps.Keys(g.accounts))
}
