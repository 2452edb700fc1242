package defence

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The kinds of tarpit entries.
const (
	KindAccount = "account" // a shopper's account id
	KindAddress = "address" // a client address, an IPv6 client's by its /64 (httpapi.AddressKey)
	KindNetwork = "network" // a client's network, Network's prefix
)

// Why an entry was caught: the reasons of flashgate_edge_tarpit_caught_total.
const (
	ReasonOffences           = "offences"             // an account kept earning refusals
	ReasonAccountsPerAddress = "accounts_per_address" // too many accounts joined a sale from one address
	ReasonAccountsPerNetwork = "accounts_per_network" // ... from one network
)

// Entry is one account, address or network in the tarpit.
type Entry struct {
	Kind   string    `json:"kind"`
	Key    string    `json:"key"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
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

// tarpit is a node's copy of the tarpit, one map per kind. A status poll
// reads it without a lock (sync.Map: entries are written once and read
// many times), and reads nothing at all while it is empty.
type tarpit struct {
	kinds map[string]*sync.Map // kind -> key -> Entry
	size  atomic.Int64         // entries held, expired ones included until purged
}

func newTarpit() *tarpit {
	return &tarpit{kinds: map[string]*sync.Map{KindAccount: {}, KindAddress: {}, KindNetwork: {}}}
}

// holds reports whether key of kind is in the tarpit at now.
func (t *tarpit) holds(kind, key string, now time.Time) bool {
	m := t.kinds[kind]
	if m == nil {
		return false
	}
	e, ok := m.Load(key)
	return ok && now.Before(e.(Entry).Until)
}

// empty reports whether nothing is held: the status poll's whole cost then.
func (t *tarpit) empty() bool { return t.size.Load() == 0 }

// put adds e, or lengthens the entry held for its key: an entry caught
// again (on another node, or after a release) lasts the later hold.
func (t *tarpit) put(e Entry) {
	m := t.kinds[e.Kind]
	if m == nil {
		return // a kind from a newer node: not ours to apply
	}
	if old, ok := m.Load(e.Key); ok {
		o := old.(Entry)
		if !e.Until.After(o.Until) {
			return
		}
		e.Since = o.Since
		m.Store(e.Key, e)
		return
	}
	m.Store(e.Key, e)
	t.size.Add(1)
}

// remove releases key of kind, returning what was held.
func (t *tarpit) remove(kind, key string) (Entry, bool) {
	m := t.kinds[kind]
	if m == nil {
		return Entry{}, false
	}
	old, ok := m.LoadAndDelete(key)
	if !ok {
		return Entry{}, false
	}
	t.size.Add(-1)
	return old.(Entry), true
}

// purge drops the entries whose hold is over at now.
func (t *tarpit) purge(now time.Time) {
	for _, m := range t.kinds {
		m.Range(func(k, v any) bool {
			if !now.Before(v.(Entry).Until) && m.CompareAndDelete(k, v) {
				t.size.Add(-1)
			}
			return true
		})
	}
}

// list returns the entries held at now, oldest first.
func (t *tarpit) list(now time.Time) []Entry {
	var out []Entry
	for _, m := range t.kinds {
		m.Range(func(_, v any) bool {
			if e := v.(Entry); now.Before(e.Until) {
				out = append(out, e)
			}
			return true
		})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Kind+a.Key, b.Kind+b.Key)
	})
	return out
}
