package crowdsim

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fastjson"

	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// The pre-queue's draw, as the shop's page follows it (static/app.js). A
// pre-queue shopper learns at the start that places are drawn, not where
// it stands; its page then reads the snapshot's revealed seed (through
// the CDN, every second anyway) and works its drawn place out itself, as
// docs/FAIRNESS.md lets anyone. It asks the edge only when its turn shows
// in the snapshot: the whole pre-queue does not come back to the edge in
// the open's first seconds just to hear its place.

// preQueueIndex is the pre-queue index a queue token carries (its claims
// pre: true, pos: i), as the page reads it; 0 when the token is not a
// pre-queue one or cannot be read. The token is not verified: the edge
// does that when the page shows it.
func preQueueIndex(queueToken string) int64 {
	parts := strings.Split(queueToken, ".")
	if len(parts) != 3 {
		return 0
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0
	}
	v, err := fastjson.ParseBytes(payload)
	if err != nil || !v.GetBool("pre") {
		return 0
	}
	return max(v.GetInt64("pos"), 0)
}

// draws works out drawn places: the permutation is built once per revealed
// seed and shared by every page of the run.
type draws struct {
	mu      sync.Mutex
	seed    string
	size    int64
	shuffle edgeinternals.Shuffle
	ok      bool
}

// place is pre-queue index i's drawn place under the snapshot's draw; 0
// when the draw is not out, or does not hold i.
func (d *draws) place(f saleFlags, i int64) int64 {
	if !f.drawn() || i < 1 || i > f.Draw.PreQueue {
		return 0
	}
	d.mu.Lock()
	if f.Draw.Seed != d.seed || f.Draw.PreQueue != d.size {
		seed, err := hex.DecodeString(f.Draw.Seed)
		d.seed, d.size, d.ok = f.Draw.Seed, f.Draw.PreQueue, err == nil && len(seed) > 0
		if d.ok {
			d.shuffle = edgeinternals.NewShuffle(seed, f.Draw.PreQueue)
		}
	}
	shuffle, ok := d.shuffle, d.ok
	d.mu.Unlock()
	if !ok {
		return 0
	}
	p, err := shuffle.Position(i)
	if err != nil {
		return 0
	}
	return p
}

// drawBackstop is how much later than told a pre-queue page that can work
// its place out asks the edge for it after the start, should the snapshot
// not have shown the draw by then (it keeps the edge's spread): the draw is
// sealed a tick and a round trip after the start, and the CDN serves a
// snapshot up to its max-age and stale-while-revalidate old.
const drawBackstop = 10 * time.Second

// drawnPlacePoll is how long a page that worked out its drawn place waits
// before asking for its status anyway: it watches the snapshot for its
// turn, so the poll is only the backstop, at the moment of the last
// quarter of the longest poll (docs/API.md) that its place fixes, as the
// edge spreads the far back of the line.
func drawnPlacePoll(place int64) time.Duration {
	const longest = 60 * time.Second
	return longest - longest/4 + longest/4*time.Duration(uint64(place)*2654435761%1000)/1000
}
