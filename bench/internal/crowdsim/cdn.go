package crowdsim

import (
	"sync"
	"sync/atomic"
	"time"
)

// cdn stands in for the CDN in front of the edge, for the one thing the
// contract makes cacheable that every shopper's page loads again and
// again: the public sale snapshot. It does what a CDN POP does with the
// edge's Cache-Control (and what deploy/cdn's nginx does with
// proxy_cache_background_update): it keeps the answer for its max-age,
// serves it stale for the stale-while-revalidate after that while one
// fetch refreshes it in the background, and past that collapses concurrent
// misses into one fetch that they all wait for. Only its fetches reach the
// edge (and the run's request counts); hits, stale ones included, are
// counted apart.
type cdn struct {
	edge *client
	path string

	mu         sync.Mutex // guards the fields below
	cached     reply
	flags      saleFlags     // cached, decoded once per fetch: a page reads them every second
	expires    time.Time     // fresh until
	staleUntil time.Time     // served stale, while a fetch refreshes it, until
	inflight   chan struct{} // closed when the fetch in flight lands

	inBackground sync.WaitGroup // background fetches in flight
	// Loads are hits (stale ones among them) plus misses; refreshes are
	// the background fetches stale hits set off. Misses and refreshes
	// reach the edge.
	hits, misses, stale, refreshes atomic.Int64
}

func newCDN(edge *client, path string) *cdn { return &cdn{edge: edge, path: path} }

// saleFlags are what a waiting page looks for in the snapshot.
type saleFlags struct {
	SoldOut    bool  `json:"sold_out"`
	Final      bool  `json:"final"`
	NowServing int64 `json:"now_serving"` // a page whose place it reaches asks for its admission at once
}

// get returns the snapshot and its flags: from the cache while it is
// fresh or may be served stale, else from a fetch (its own or the one in
// flight).
func (c *cdn) get() (reply, saleFlags) {
	c.mu.Lock()
	for {
		now := time.Now()
		if c.cached.status != 0 && now.Before(c.staleUntil) {
			r, f := c.cached, c.flags
			if !now.Before(c.expires) {
				c.stale.Add(1)
				if c.inflight == nil {
					done := make(chan struct{})
					c.inflight = done
					c.refreshes.Add(1)
					c.inBackground.Add(1)
					go func() {
						defer c.inBackground.Done()
						c.fetch(done)
					}()
				}
			}
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
	return c.fetch(done)
}

// fetch asks the edge, keeps a 200 for its max-age and stale-while-
// revalidate, and closes done (c.inflight) once the answer is in place.
func (c *cdn) fetch(done chan struct{}) (reply, saleFlags) {
	r := c.edge.do(request{endpoint: epSnapshot, method: "GET", path: c.path})
	var f saleFlags
	r.decode(&f)
	c.mu.Lock()
	if r.status == 200 {
		now := time.Now()
		c.cached, c.flags = r, f
		c.expires, c.staleUntil = now.Add(r.maxAge), now.Add(r.maxAge+r.swr)
	}
	c.inflight = nil
	close(done)
	c.mu.Unlock()
	return r, f
}

// wait returns once no background refresh is in flight.
func (c *cdn) wait() { c.inBackground.Wait() }
