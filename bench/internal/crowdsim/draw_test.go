package crowdsim

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// A page reads its pre-queue index from its queue token's claims (pre:
// true, pos: i); any other token reads as none.
func TestPreQueueIndex(t *testing.T) {
	token := func(claims string) string {
		return "eyJhbGciOiJIUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
	}
	for _, tt := range []struct {
		token string
		want  int64
	}{
		{token(`{"sub":"a","sale":"s","pos":17,"pre":true}`), 17},
		{token(`{"sub":"a","sale":"s","pos":17}`), 0}, // a place after the start, not an index
		{token(`{"pre":true,"pos":-3}`), 0},
		{token(`not json`), 0},
		{"a.b", 0},
		{"", 0},
	} {
		if got := preQueueIndex(tt.token); got != tt.want {
			t.Errorf("preQueueIndex(%q) = %d, want %d", tt.token, got, tt.want)
		}
	}
}

// The place a page works out is the edge's own draw (queue.Shuffle) for
// every index, and none before the draw is out or for an index it lacks.
func TestDrawnPlaceIsTheEdgesDraw(t *testing.T) {
	seed := []byte("a seed of thirty-two bytes, ok!!")
	const n = 300
	f := saleFlags{}
	var d draws
	if p := d.place(f, 1); p != 0 {
		t.Errorf("place before the draw = %d, want 0", p)
	}
	f.Draw.Seed, f.Draw.PreQueue = hex.EncodeToString(seed), n
	want := edgeinternals.NewShuffle(seed, n)
	seen := map[int64]bool{}
	for i := int64(1); i <= n; i++ {
		w, _ := want.Position(i)
		got := d.place(f, i)
		if got != w {
			t.Fatalf("place of index %d = %d, want the edge's %d", i, got, w)
		}
		seen[got] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct places for %d indexes, want a permutation", len(seen), n)
	}
	if p := d.place(f, n+1); p != 0 {
		t.Errorf("place of index %d of a draw of %d = %d, want 0", n+1, n, p)
	}
}

// A pre-queue page sleeps until the CDN holds the draw, then reads its
// place from the snapshot there, without a poll; the poll that follows is
// only the backstop, 45–60 s on, unless the place is already served.
func TestPreQueuePageTakesItsPlaceFromTheDraw(t *testing.T) {
	edge, c := newSnapshotCDN(t, 60)
	c.get()
	s := &sim{cdn: c, zero: time.Now()}
	sh := &shopper{preIndex: 42}
	seed := []byte("another seed, thirty-two bytes..")
	const refreshEvery = 100 * time.Millisecond

	go func() {
		time.Sleep(250 * time.Millisecond)
		var f saleFlags
		f.NowServing, f.Draw.Seed, f.Draw.PreQueue = 3, hex.EncodeToString(seed), 500
		edge.set(f)
		refresh(c)
	}()
	nextPage := refreshEvery
	read, ok := s.awaitPage(context.Background(), sh, &nextPage, 5*time.Second, refreshEvery)
	if !read || !ok {
		t.Fatalf("awaitPage = read %v, ok %v; want a read once the draw is out", read, ok)
	}
	stop, serving := s.readPageAt(sh, nextPage-refreshEvery)
	want, _ := edgeinternals.NewShuffle(seed, 500).Position(42)
	if stop || serving != 3 || sh.position != want || !sh.placedByDraw || sh.awaitsDraw() {
		t.Errorf("after the draw: stop %v, serving %d, position %d (placed %v); want position %d, placed by the draw",
			stop, serving, sh.position, sh.placedByDraw, want)
	}
	if d := drawnPlacePoll(sh.position); d < 45*time.Second || d > 60*time.Second {
		t.Errorf("backstop poll = %v, want 45–60 s", d)
	}
}
