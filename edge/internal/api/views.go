package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// shows once this node has its durable seed.
func (s *Server) Tick(ctx context.Context) error {
	sales := s.Snapshots.All()
	ticks := make([]queue.Tick, 0, len(sales))
	for _, sale := range sales {
		var available int64
		if !sale.SoldOut {
			for _, k := range sale.SKUs {
				available += max(k.AvailableHint, 0)
			}
			available = max(available, 1) // not sold out: something may be left
		}
		ticks = append(ticks, queue.Tick{Sale: sale.SaleID, StartsAt: sale.StartsAt, Available: available})
	}
	tickErr := s.Cursor.Tick(ctx, ticks)
	s.Line.Maintain(ticks)
	next := make(map[string]*view, len(sales))
	for _, sale := range sales {
		seed, ok := s.Line.Seed(sale.SaleID)
		if !ok {
			continue
		}
		v := &view{sale: sale, seed: seed}
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
	}
	s.views.p.Store(&next)
	return tickErr
}

// fresh reports whether a view's cursor reading is recent enough to answer
// from and its line is in Redis; a stale one means Redis is unreachable, a
// lost one that Redis lost the line and it is being restored.
func (s *Server) fresh(v *view) bool { return s.freshAt(v, s.Clock()) }

// freshAt is fresh at now, for handlers that have read the clock already.
func (s *Server) freshAt(v *view, now time.Time) bool {
	return v.hasState && !v.state.Lost && now.Sub(v.state.ReadAt) <= s.opts.StaleAfter
}
