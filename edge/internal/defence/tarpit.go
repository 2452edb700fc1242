package defence

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Why an account was caught: the reasons of flashgate_edge_tarpit_caught_total.
const (
	ReasonOffences           = "offences"             // it kept earning refusals
	ReasonAccountsPerAddress = "accounts_per_address" // it was one of too many accounts that joined a sale from one address
	ReasonAccountsPerNetwork = "accounts_per_network" // ... from one network
)

// Entry is one account in the tarpit.
type Entry struct {
	Account string    `json:"account"`
	Reason  string    `json:"reason"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
}

// The prefix lengths of a client's network. An IPv4 client's is its /24,
// the longest prefix routed on the internet; an IPv6 client's its /48, the
// usual allocation of one site and likewise the longest routed prefix
// (homes get a /48 to a /56, RFC 6177): its /64 is its address already.
const (
	networkBits4 = 24
	networkBits6 = 48
)

// Network is the network of the valid address a: its /24 when IPv4, its
// /48 when IPv6.
func Network(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := networkBits6
	if a.Is4() {
		bits = networkBits4
	}
	p, _ := a.Prefix(bits) // bits is within the address's length
	return p
}

// releaseMemory is how long a release is remembered: a catch made before
// it (pending on a node that could not reach Redis, or written to the
// stream after the release by a slower node) does not bring the account
// back.
const releaseMemory = time.Hour

// tarpit is a node's copy of the tarpit. Its lock is taken only by the
// admission of a shopper whose place has come, and by changes; size lets
// every other read skip it while the tarpit is empty.
type tarpit struct {
	mu       sync.RWMutex
	entries  map[string]Entry     // account -> its entry, expired ones until purged
	released map[string]time.Time // account -> when ops last released it
	size     atomic.Int64         // len(entries), written under mu
}

func newTarpit() *tarpit {
	return &tarpit{entries: map[string]Entry{}, released: map[string]time.Time{}}
}

// holds reports whether account is in the tarpit at now.
func (t *tarpit) holds(account string, now time.Time) bool {
	if t.size.Load() == 0 {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.entries[account]
	return ok && now.Before(e.Until)
}

// put adds e, or lengthens the entry held for its account (an account
// caught again, on another node or after a release, lasts the later
// hold). A catch made before the account's last release is not taken.
func (t *tarpit) put(e Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.released[e.Account]; ok && !e.Since.After(r) {
		return
	}
	if old, ok := t.entries[e.Account]; ok {
		if e.Until.After(old.Until) {
			e.Since = old.Since
			t.entries[e.Account] = e
		}
		return
	}
	t.entries[e.Account] = e
	t.size.Store(int64(len(t.entries)))
}

// remove releases account at the time at, returning what was held.
func (t *tarpit) remove(account string, at time.Time) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at.After(t.released[account]) {
		t.released[account] = at
	}
	e, ok := t.entries[account]
	delete(t.entries, account)
	t.size.Store(int64(len(t.entries)))
	return e, ok
}

// purge drops the entries whose hold is over at now, and the releases
// older than releaseMemory.
func (t *tarpit) purge(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, e := range t.entries {
		if !now.Before(e.Until) {
			delete(t.entries, a)
		}
	}
	for a, r := range t.released {
		if now.Sub(r) > releaseMemory {
			delete(t.released, a)
		}
	}
	t.size.Store(int64(len(t.entries)))
}

// list returns the entries held at now, oldest first.
func (t *tarpit) list(now time.Time) []Entry {
	t.mu.RLock()
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		if now.Before(e.Until) {
			out = append(out, e)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Account, b.Account)
	})
	return out
}
