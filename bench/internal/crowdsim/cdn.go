package crowdsim

import (
	"context"
	"strconv"
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
	watches    []*pageWatch  // the waiting pages that watch rather than re-read
	held       []heldCopy    // the last few snapshots it took in, oldest first (for readAt)
	changes    []flagChange  // every change of sold_out it took in, oldest first

	inBackground sync.WaitGroup // background fetches in flight
	// Loads are hits (stale ones among them) plus misses; refreshes are
	// the background fetches stale hits set off. Misses and refreshes
	// reach the edge. Unchanged are the re-reads of watching pages that
	// could not have changed what the page does: counted, not made.
	hits, misses, stale, refreshes, unchanged atomic.Int64
}

func newCDN(edge *client, path string) *cdn { return &cdn{edge: edge, path: path} }

// saleFlags are what a waiting page looks for in the snapshot.
type saleFlags struct {
	SoldOut    bool  `json:"sold_out"`
	Final      bool  `json:"final"`
	NowServing int64 `json:"now_serving"` // a page whose place it reaches asks for its admission at once
	// Draw reveals the pre-queue's seed after the start: a pre-queue page
	// then works out its drawn place itself (docs/FAIRNESS.md).
	Draw struct {
		Seed     string `json:"seed"` // hex; "" until the draw
		PreQueue int64  `json:"pre_queue"`
	} `json:"draw"`
	// Challenge is the proof of work the sale publishes while it asks for
	// one and can still be joined (Value "" otherwise): the page solves it
	// for its account before it joins, and joins once.
	Challenge struct {
		Value          string `json:"value"` // "p1.…", opaque, sent back byte for byte
		DifficultyBits int64  `json:"difficulty_bits"`
	} `json:"challenge"`
}

// drawn reports whether the snapshot reveals the pre-queue's draw.
func (f saleFlags) drawn() bool { return f.Draw.Seed != "" && f.Draw.PreQueue > 0 }

// get returns the snapshot and its flags: from the cache while it is
// fresh or may be served stale, else from a fetch (its own or the one in
// flight).
func (c *cdn) get() (reply, saleFlags) { return c.load(true) }

// load is get; a load that is not a page's (keepFresh's) is not counted
// as a hit.
func (c *cdn) load(page bool) (reply, saleFlags) {
	c.mu.Lock()
	for {
		now := time.Now()
		if c.cached.status != 0 && now.Before(c.staleUntil) {
			r, f := c.cached, c.flags
			if !now.Before(c.expires) {
				if page {
					c.stale.Add(1)
				}
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
			if page {
				c.hits.Add(1)
			}
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
	f := c.take(r)
	c.mu.Lock()
	c.inflight = nil
	close(done)
	c.mu.Unlock()
	return r, f
}

// take keeps a 200 from the edge for its max-age and stale-while-
// revalidate and fires the watches it matches; it returns its flags.
func (c *cdn) take(r reply) saleFlags {
	var f saleFlags
	r.decode(&f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.status == 200 {
		now := time.Now()
		c.cached, c.flags = r, f
		c.expires, c.staleUntil = now.Add(r.maxAge), now.Add(r.maxAge+r.swr)
		if len(c.held) == maxHeld {
			c.held = append(c.held[:0], c.held[1:]...)
		}
		c.held = append(c.held, heldCopy{from: now, flags: f})
		if n := len(c.changes); n == 0 || c.changes[n-1].soldOut != f.SoldOut {
			c.changes = append(c.changes, flagChange{at: now, soldOut: f.SoldOut})
		}
		c.fire(f)
	}
	return f
}

// keepWatching reads the snapshot as the watching pages do (docs/API.md,
// the snapshot watch) until ctx ends: a watch of the second the last
// answer named, which the edge holds until that second ends or the sale
// has news, the next sent as the answer comes but never sooner than every
// (a second) after the last; the pages that watch hear what it brings as
// it comes.
// All the pages in front of one CDN ask for the same second, which the
// CDN collapses into this one request. With no page watching it rests.
func (c *cdn) keepWatching(ctx context.Context, every time.Duration) {
	const idle = 5 * time.Millisecond // how often it looks when no page watches
	var at int64                      // 0: a plain read, which names the second to watch
	var sent time.Time
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		c.mu.Lock()
		watching := len(c.watches) > 0
		c.mu.Unlock()
		wait := idle
		if watching {
			wait = time.Until(sent.Add(every))
		} else {
			at = 0
		}
		if !watching || wait > 0 {
			t.Reset(max(wait, time.Millisecond))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !watching {
				continue
			}
		}
		sent = time.Now()
		req := request{endpoint: epSnapshot, method: "GET", path: c.path}
		if at > 0 {
			req.endpoint, req.path = epWatch, c.path+"?at="+strconv.FormatInt(at, 10)
		}
		r := c.edge.do(req)
		c.refreshes.Add(1)
		c.take(r)
		at = r.nextAt
	}
}

// firstChange is the first moment at or after t that the CDN took in a
// snapshot whose sold_out turned to soldOut.
func (c *cdn) firstChange(t time.Time, soldOut bool) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.changes {
		if !ch.at.Before(t) && ch.soldOut == soldOut {
			return ch.at, true
		}
	}
	return time.Time{}, false
}

// shownAt is when the CDN first held, at or after t, a snapshot whose
// sold_out was soldOut: t itself when the one it held then was such.
func (c *cdn) shownAt(t time.Time, soldOut bool) (time.Time, bool) {
	c.mu.Lock()
	held := false
	for _, ch := range c.changes {
		if ch.at.After(t) {
			break
		}
		held = ch.soldOut == soldOut
	}
	c.mu.Unlock()
	if held {
		return t, true
	}
	return c.firstChange(t, soldOut)
}

// wait returns once no background refresh is in flight.
func (c *cdn) wait() { c.inBackground.Wait() }

// heldCopy is a snapshot the CDN held from a moment on.
type heldCopy struct {
	from  time.Time
	flags saleFlags
}

// maxHeld is how many snapshots the CDN remembers for readAt: a few
// seconds' worth, longer than a page's read can lag the moment it is for.
const maxHeld = 8

// readAt is a watching page's read at its refresh at t, which the page's
// goroutine may reach late: the flags of the snapshot the CDN held at t,
// as a hit. A refresh it holds no snapshot for (none yet, or older than
// it remembers) is read as get reads now.
func (c *cdn) readAt(t time.Time) (status int, f saleFlags) {
	c.mu.Lock()
	for i := len(c.held) - 1; i >= 0; i-- {
		if !c.held[i].from.After(t) {
			f = c.held[i].flags
			c.mu.Unlock()
			c.hits.Add(1)
			return 200, f
		}
	}
	c.mu.Unlock()
	r, f := c.get()
	return r.status, f
}

// pageWatch is a waiting page that sleeps until the snapshot the CDN holds
// would change what it does, instead of re-reading it every refresh: a
// crowd of pages re-reading once a second is that many wake-ups a second
// of the simulator's own core (100,000 at the open), for reads that almost
// never change anything, and a simulator short of its core delays every
// answer it times. The page then reads the snapshot at its next refresh,
// as it would have.
type pageWatch struct {
	position     int64         // fire once now_serving reaches it (0: never)
	awaitsDraw   bool          // a pre-queue page before its place is known: fire once the draw is revealed
	heardSoldOut bool          // the page has shown a sold-out: fire on a final one only
	fired        chan struct{} // closed when the CDN holds such a snapshot
	firedAt      time.Time     // when it took that snapshot in (set before fired is closed)
	i            int           // index in cdn.watches; -1 once fired or dropped
}

// matches reports whether a snapshot with these flags changes what the
// page does: its turn has come, the draw that tells a pre-queue page its
// place is out, or a sold-out it has not shown (or a final one) is there.
func (w *pageWatch) matches(f saleFlags) bool {
	return (w.position > 0 && f.NowServing >= w.position) || (w.awaitsDraw && f.drawn()) ||
		(f.SoldOut && (!w.heardSoldOut || f.Final))
}

// watch starts a watch: it fires at once when the CDN already holds such
// a snapshot.
func (c *cdn) watch(position int64, awaitsDraw, heardSoldOut bool) *pageWatch {
	w := &pageWatch{position: position, awaitsDraw: awaitsDraw, heardSoldOut: heardSoldOut, fired: make(chan struct{}), i: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached.status == 200 && w.matches(c.flags) {
		w.firedAt = time.Now()
		close(w.fired)
		return w
	}
	w.i = len(c.watches)
	c.watches = append(c.watches, w)
	return w
}

// unwatch drops a watch that has not fired.
func (c *cdn) unwatch(w *pageWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.i < 0 {
		return
	}
	last := c.watches[len(c.watches)-1]
	c.watches[w.i], last.i = last, w.i
	c.watches[len(c.watches)-1] = nil
	c.watches = c.watches[:len(c.watches)-1]
	w.i = -1
}

// fire, with c.mu held, fires the watches that a new snapshot's flags
// match. Each watch keeps the moment, not its goroutine's later wake-up:
// a sold-out fires the whole line at once, and the last of them runs a
// good part of a second later, when the CDN may hold the next snapshot.
func (c *cdn) fire(f saleFlags) {
	now := time.Now()
	kept := c.watches[:0]
	for _, w := range c.watches {
		if w.matches(f) {
			w.firedAt = now
			close(w.fired)
			w.i = -1
			continue
		}
		w.i = len(kept)
		kept = append(kept, w)
	}
	clear(c.watches[len(kept):])
	c.watches = kept
}

// keepFresh reads the snapshot in the watching pages' stead until ctx
// ends: as soon as it goes stale while any page watches, as the first of
// a crowd of re-reading pages would, so the CDN refreshes it (and the edge
// sees its fetches) as often as it would for them.
func (c *cdn) keepFresh(ctx context.Context) {
	const idle = 5 * time.Millisecond // how often it looks when no page watches
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		c.mu.Lock()
		wait, watching := time.Until(c.expires), len(c.watches) > 0
		c.mu.Unlock()
		if watching && wait <= 0 {
			c.load(false)
			wait = idle // the refresh it set off is in flight
		}
		t.Reset(min(max(wait, time.Millisecond), idle))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
