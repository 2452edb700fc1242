package admission

import (
	"sync"
	"time"
)

// news lets a request wait for a sale's next headline: a change of what
// every waiting page shows at once — sold out, sold out for good, the
// sale's status. now_serving is not news: it moves every tick.
type news struct {
	mu    sync.Mutex
	waits map[string]chan struct{} // closed at the sale's next headline
	last  map[string]time.Time     // when each sale's last headline was announced
}

// next returns a channel closed at the sale's next headline, and when the
// last one was announced (zero: none since the node started).
func (n *news) next(sale string) (<-chan struct{}, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waits == nil {
		n.waits = map[string]chan struct{}{}
	}
	ch, ok := n.waits[sale]
	if !ok {
		ch = make(chan struct{})
		n.waits[sale] = ch
	}
	return ch, n.last[sale]
}

// announce wakes everyone waiting for the sale's next headline.
func (n *news) announce(sale string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		n.last = map[string]time.Time{}
	}
	n.last[sale] = at
	if ch, ok := n.waits[sale]; ok {
		close(ch)
		delete(n.waits, sale)
	}
}

// forget wakes and drops the waits for sales other than those in views:
// a sale the node no longer serves has no next headline.
func (n *news) forget(views map[string]*View) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for sale, ch := range n.waits {
		if _, ok := views[sale]; !ok {
			close(ch)
			delete(n.waits, sale)
			delete(n.last, sale)
		}
	}
}

// headline is what of a view is news.
type headline struct {
	soldOut, final bool
	status         string
}

func headlineOf(v *View) headline {
	return headline{soldOut: v.Sale.SoldOut, final: v.Sale.Final, status: v.Sale.Status}
}
