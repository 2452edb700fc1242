package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/edge/internal/queue"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
)

// view is everything the edge knows about a sale at one tick: the origin's
// snapshot, this node's reading of the admission cursor and the pre-queue
// draw, and the snapshot body ready to serve. Views are rebuilt each tick
// and swapped in whole, so handlers read them without locks.
type view struct {
	sale      snapshot.Sale
	fetchedAt time.Time // when the fetch that brought sale started
	state     queue.State
	hasState  bool
	seed      []byte
	seedHash  string
	shuffle   queue.Shuffle // over the pre-queue, once its size is sealed after the start
	drawn     bool          // shuffle is set
	body      []byte        // the snapshot JSON served at GET /v1/sales/{id}
	etag      string
	longCache bool // finally sold out or ended: nothing will change
}

// publicSnapshot is the snapshot the edge serves: the origin's with the
// cursor filled in and the pre-queue draw's commitment (and, after the
// start, its seed) so anyone can check the shuffle.
type publicSnapshot struct {
	snapshot.Sale
	Draw draw `json:"draw"`
}

type draw struct {
	SeedSHA256 string `json:"seed_sha256"`
	Seed       string `json:"seed,omitempty"` // revealed at the start
	PreQueue   int64  `json:"pre_queue"`
	Algorithm  string `json:"algorithm"`
}

// views is the current set of views by sale id.
type views struct {
	p atomic.Pointer[map[string]*view]
}

func (v *views) get(id string) (*view, bool) {
	m := v.p.Load()
	if m == nil {
		return nil, false
	}
	x, ok := (*m)[id]
	return x, ok
}

// Tick is the edge's heartbeat, run every few hundred milliseconds: it
// advances and reads the admission cursors in one Redis round trip, lets
// the line keeper start what each sale's line needs (a restore, the draw's
// seal, a ceiling raise: in the background), and rebuilds the views. A sale
// shows once this node has its durable seed. A sale whose snapshot is stale
// still ticks with its last known stock (sending none would reset the
// cursor's clock for the nodes that know better); its handlers answer
// please_wait instead. With no sale to tick it pings Redis, so readiness
// still says whether Redis answers.
func (s *Server) Tick(ctx context.Context) error {
	entries := s.Snapshots.All()
	ticks := make([]queue.Tick, 0, len(entries))
	for _, e := range entries {
		sale := e.Sale
		var available int64
		if !sale.SoldOut {
			for _, k := range sale.SKUs {
				available += max(k.AvailableHint, 0)
			}
			available = max(available, 1) // not sold out: something may be left
		}
		ticks = append(ticks, queue.Tick{Sale: sale.SaleID, StartsAt: sale.StartsAt, Available: available})
	}
	var tickErr error
	if len(ticks) > 0 {
		tickErr = s.Cursor.Tick(ctx, ticks)
	} else {
		tickErr = s.Cursor.Ping(ctx)
	}
	if tickErr == nil {
		s.tickedAt.Store(s.Clock().UnixNano())
	}
	s.Line.Maintain(ticks)
	now := s.Clock()
	next := make(map[string]*view, len(entries))
	for _, e := range entries {
		sale := e.Sale
		seed, ok := s.Line.Seed(sale.SaleID)
		if !ok {
			continue
		}
		v := &view{sale: sale, fetchedAt: e.FetchedAt, seed: seed}
		v.seedHash = queue.SeedHash(v.seed)
		v.state, v.hasState = s.Cursor.State(sale.SaleID)
		// Redis's clock decides the start, as it does for joins; the draw
		// covers exactly the pre-queue size sealed, durably, after it.
		started := v.hasState && !v.state.RedisNow.Before(sale.StartsAt)
		if started && v.state.Drawn {
			v.shuffle, v.drawn = queue.NewShuffle(v.seed, v.state.DrawSize), true
		}
		pub := publicSnapshot{Sale: sale, Draw: draw{SeedSHA256: v.seedHash, Algorithm: "feistel-sha256-8"}}
		if v.hasState {
			pub.NowServing, pub.QueueLength = v.state.NowServing, v.state.QueueLength
			pub.Draw.PreQueue = v.state.PreQueue
		}
		if v.drawn {
			pub.Draw.Seed = hex.EncodeToString(v.seed)
			pub.Draw.PreQueue = v.state.DrawSize
		}
		body, err := json.Marshal(pub)
		if err != nil {
			return fmt.Errorf("encode snapshot of sale %s: %w", sale.SaleID, err)
		}
		v.body = body
		sum := sha256.Sum256(body)
		v.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
		v.longCache = (sale.SoldOut && sale.Final) || sale.Status == "ended"
		next[sale.SaleID] = v
		if v.hasState {
			s.metrics.cursor.WithLabelValues(sale.SaleID).Set(float64(v.state.NowServing))
			s.metrics.queueLength.WithLabelValues(sale.SaleID).Set(float64(v.state.QueueLength))
		}
		if sale.Ended() {
			s.metrics.snapshotAge.DeleteLabelValues(sale.SaleID) // no longer fetched: its age says nothing
		} else {
			s.metrics.snapshotAge.WithLabelValues(sale.SaleID).Set(now.Sub(e.FetchedAt).Seconds())
		}
	}
	s.views.p.Store(&next)
	ready := 0.0
	if s.readiness(now).Ready {
		ready = 1
	}
	s.metrics.ready.Set(ready)
	return tickErr
}

// freshAt reports whether a view's cursor reading is recent enough to
// answer from at now and its line is in Redis; a stale one means Redis is
// unreachable, a lost one that Redis lost the line and it is being restored.
func (s *Server) freshAt(v *view, now time.Time) bool {
	return v.hasState && !v.state.Lost && now.Sub(v.state.ReadAt) <= s.opts.StaleAfter
}

// currentAt reports whether a view's origin snapshot is recent enough to
// answer from at now; a stale one means the origin (or its Redis) is
// unreachable or slow for this sale, and "open, 150 left" may no longer be
// true.
func (s *Server) currentAt(v *view, now time.Time) bool {
	return now.Sub(v.fetchedAt) <= s.opts.SnapshotStaleAfter
}

// saleView is the view a request about sale id is answered from. Without
// one, the answer is 404 unknown_sale only when a fresh list of the
// origin's sales does not have the id; otherwise the edge cannot know yet
// (it is starting, the origin or Redis is unreachable, or the sale is too
// new for the last refresh) and the answer is please_wait.
func (s *Server) saleView(id string) (*view, error) {
	if v, ok := s.views.get(id); ok {
		return v, nil
	}
	if s.Snapshots.Presence(id, s.opts.SnapshotStaleAfter) == snapshot.Absent {
		return nil, errUnknownSale
	}
	return nil, errNotReady
}

// tokenSaleView is saleView for a request that carries a valid token we
// signed for the sale: the token proves the sale exists, so a fresh list
// without it only means the list is a moment older than the sale. The
// answer is then please_wait, and the cache refreshes at once.
func (s *Server) tokenSaleView(id string) (*view, error) {
	v, err := s.saleView(id)
	if errors.Is(err, errUnknownSale) {
		s.Snapshots.Kick()
		return nil, errNotReady
	}
	return v, err
}

// readiness is whether the node can answer sale requests: it has a list of
// the origin's sales no older than SnapshotStaleAfter, and its last good
// tick (Redis answered) is no older than StaleAfter. A single sale whose
// snapshot is stale does not make the node unready (every node would share
// it); it is named in StaleSales and its requests answer please_wait.
type readiness struct {
	Ready      bool
	ListAge    time.Duration // -1: no list yet
	TickAge    time.Duration // -1: no good tick yet
	StaleSales []string
}

func (s *Server) readiness(now time.Time) readiness {
	r := readiness{ListAge: -1, TickAge: -1}
	if age, ok := s.Snapshots.ListAge(); ok {
		r.ListAge = age
	}
	if t := s.tickedAt.Load(); t != 0 {
		r.TickAge = now.Sub(time.Unix(0, t))
	}
	r.Ready = r.ListAge >= 0 && r.ListAge <= s.opts.SnapshotStaleAfter && r.TickAge >= 0 && r.TickAge <= s.opts.StaleAfter
	for _, id := range s.Snapshots.Listed() {
		v, ok := s.views.get(id)
		if !ok || (!v.sale.Ended() && !s.currentAt(v, now)) {
			r.StaleSales = append(r.StaleSales, id)
		}
	}
	return r
}
