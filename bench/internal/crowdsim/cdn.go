package crowdsim

import (
	"sync"
	"sync/atomic"
	"time"
)

// cdn stands in for the CDN in front of the edge, for the one thing the
// contract makes cacheable that every shopper's page loads again and
// again: the public sale snapshot. It keeps the edge's answer for the
// max-age the edge sets and collapses concurrent misses into one fetch, as
// a CDN POP does. Only its fetches reach the edge (and the run's request
// counts); hits are counted apart.
type cdn struct {
	edge *client
	path string

	mu       sync.Mutex // guards the fields below
	cached   reply
	flags    saleFlags // cached, decoded once per fetch: a page reads them every second
	expires  time.Time
	inflight chan struct{} // closed when the fetch in flight lands

	hits, misses atomic.Int64
}

func newCDN(edge *client, path string) *cdn { return &cdn{edge: edge, path: path} }

// saleFlags are what a waiting page looks for in the snapshot.
type saleFlags struct {
	SoldOut    bool  `json:"sold_out"`
	Final      bool  `json:"final"`
	NowServing int64 `json:"now_serving"` // a page whose place it reaches asks for its admission at once
}

// get returns the snapshot and its flags, from the cache while it is fresh.
func (c *cdn) get() (reply, saleFlags) {
	c.mu.Lock()
	for {
		if c.cached.status != 0 && time.Now().Before(c.expires) {
			r, f := c.cached, c.flags
			c.mu.Unlock()
			c.hits.Add(1)
			return r, f
		}
		if c.inflight == nil {
			break
		}
		wait := c.inflight
		c.mu.Unlock()
		<-wait
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.inflight = done
	c.mu.Unlock()

	c.misses.Add(1)
	r := c.edge.do(request{endpoint: epSnapshot, method: "GET", path: c.path})
	var f saleFlags
	r.decode(&f)
	c.mu.Lock()
	if r.status == 200 {
		c.cached, c.flags, c.expires = r, f, time.Now().Add(r.maxAge)
	}
	c.inflight = nil
	close(done)
	c.mu.Unlock()
	return r, f
}
