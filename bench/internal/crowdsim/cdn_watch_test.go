package crowdsim

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// snapshotEdge is an edge whose sale snapshot the test sets.
type snapshotEdge struct {
	mu     sync.Mutex
	flags  saleFlags
	maxAge int
	hits   int
}

func (e *snapshotEdge) set(f saleFlags) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flags = f
}

func (e *snapshotEdge) fetches() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits
}

func (e *snapshotEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	f, maxAge := e.flags, e.maxAge
	e.hits++
	e.mu.Unlock()
	w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d, stale-while-revalidate=5", maxAge))
	_, _ = fmt.Fprintf(w, `{"now_serving":%d,"sold_out":%t,"final":%t,"draw":{"seed":%q,"pre_queue":%d}}`,
		f.NowServing, f.SoldOut, f.Final, f.Draw.Seed, f.Draw.PreQueue)
}

func newSnapshotCDN(t *testing.T, maxAge int) (*snapshotEdge, *cdn) {
	t.Helper()
	edge := &snapshotEdge{maxAge: maxAge}
	srv := httptest.NewServer(edge)
	t.Cleanup(srv.Close)
	c, err := newClient(srv.URL, 16, 5*time.Second, newRecorder(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return edge, newCDN(c, "/v1/sales/s")
}

// refresh makes the CDN take in the edge's snapshot now, as a fetch past
// max-age would.
func refresh(c *cdn) {
	done := make(chan struct{})
	c.mu.Lock()
	c.inflight = done
	c.mu.Unlock()
	c.fetch(done)
}

func fired(w *pageWatch) bool {
	select {
	case <-w.fired:
		return true
	default:
		return false
	}
}

// A watch fires when the CDN takes in a snapshot that changes what its
// page does — its turn, a sold-out it has not shown, a final sold-out —
// and not for one that changes nothing; a dropped watch never fires.
func TestCDNWatchFiresOnWhatChangesThePage(t *testing.T) {
	edge, c := newSnapshotCDN(t, 60)
	edge.set(saleFlags{NowServing: 10})
	c.get()

	if w := c.watch(5, false, false); !fired(w) {
		t.Error("a watch for a turn the snapshot already shows did not fire at once")
	}
	turn := c.watch(20, false, false)
	soldOut := c.watch(0, false, false)
	heard := c.watch(0, false, true) // has shown a sold-out: waits for the final one
	dropped := c.watch(15, false, false)
	c.unwatch(dropped)
	c.unwatch(dropped) // twice is harmless

	edge.set(saleFlags{NowServing: 19})
	before := time.Now()
	refresh(c)
	for name, w := range map[string]*pageWatch{"turn": turn, "sold out": soldOut, "heard": heard, "dropped": dropped} {
		if fired(w) {
			t.Errorf("%s watch fired on now_serving 19, nothing it waits for", name)
		}
	}

	edge.set(saleFlags{NowServing: 20})
	refresh(c)
	if !fired(turn) {
		t.Fatal("the turn watch did not fire on now_serving 20")
	}
	if turn.firedAt.Before(before) || time.Since(turn.firedAt) > time.Second {
		t.Errorf("firedAt = %v, want the moment the snapshot landed", turn.firedAt)
	}
	if fired(dropped) {
		t.Error("a dropped watch fired")
	}

	edge.set(saleFlags{NowServing: 20, SoldOut: true})
	refresh(c)
	if !fired(soldOut) {
		t.Error("the sold-out watch did not fire on a sold-out")
	}
	if fired(heard) {
		t.Error("a page that has shown a sold-out was woken by another that is not final")
	}
	edge.set(saleFlags{NowServing: 20, SoldOut: true, Final: true})
	refresh(c)
	if !fired(heard) {
		t.Error("a page that has shown a sold-out was not woken by the final one")
	}
	c.mu.Lock()
	left := len(c.watches)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d watches left after all fired or were dropped, want 0", left)
	}
}

// Dropping watches out of order keeps the others' places: each still
// fires, and only once.
func TestCDNUnwatchKeepsTheOthers(t *testing.T) {
	edge, c := newSnapshotCDN(t, 60)
	edge.set(saleFlags{NowServing: 1})
	c.get()
	var ws []*pageWatch
	for i := range 10 {
		ws = append(ws, c.watch(int64(100+i), false, false))
	}
	for _, i := range []int{3, 9, 0, 5} {
		c.unwatch(ws[i])
	}
	edge.set(saleFlags{NowServing: 200})
	refresh(c) // would panic closing a channel twice if places were mixed up
	for i, w := range ws {
		dropped := i == 3 || i == 9 || i == 0 || i == 5
		if fired(w) == dropped {
			t.Errorf("watch %d: fired %v, dropped %v", i, fired(w), dropped)
		}
	}
}

// readAt reads what the CDN held at a moment: a late page's refresh sees
// the snapshot of its refresh's time, not the one that replaced it since.
func TestCDNReadAtReadsTheCopyHeldThen(t *testing.T) {
	edge, c := newSnapshotCDN(t, 60)
	edge.set(saleFlags{NowServing: 1})
	c.get()
	first := time.Now()
	time.Sleep(5 * time.Millisecond)
	edge.set(saleFlags{NowServing: 2, SoldOut: true})
	refresh(c)
	soldOutAt := time.Now()
	time.Sleep(5 * time.Millisecond)
	edge.set(saleFlags{NowServing: 3})
	refresh(c)

	if _, f := c.readAt(first); f.NowServing != 1 || f.SoldOut {
		t.Errorf("readAt(first) = %+v, want the first copy", f)
	}
	if _, f := c.readAt(soldOutAt); f.NowServing != 2 || !f.SoldOut {
		t.Errorf("readAt(soldOutAt) = %+v, want the sold-out copy it held then", f)
	}
	if _, f := c.readAt(time.Now()); f.NowServing != 3 {
		t.Errorf("readAt(now) = %+v, want the latest copy", f)
	}
	for range maxHeld {
		refresh(c)
	}
	fetches := edge.fetches()
	if status, f := c.readAt(first); status != 200 || f.NowServing != 3 {
		t.Errorf("readAt older than it remembers = %d %+v, want the copy it holds now", status, f)
	}
	if edge.fetches() != fetches {
		t.Error("a read older than the held copies went to the edge; the fresh copy serves it")
	}
}

// keepFresh refreshes the snapshot as soon as it is stale while a page
// watches, and leaves it alone while none does.
func TestCDNKeepFreshOnlyWhilePagesWatch(t *testing.T) {
	edge, c := newSnapshotCDN(t, 1)
	edge.set(saleFlags{NowServing: 1})
	c.get()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.keepFresh(ctx)

	time.Sleep(1300 * time.Millisecond)
	if n := edge.fetches(); n != 1 {
		t.Errorf("edge fetches with no page watching = %d, want 1 (the first load)", n)
	}
	w := c.watch(50, false, false)
	edge.set(saleFlags{NowServing: 50})
	select {
	case <-w.fired:
	case <-time.After(2 * time.Second):
		t.Fatal("a watching page's turn did not come: keepFresh did not refresh the stale snapshot")
	}
	if h := c.hits.Load(); h != 0 {
		t.Errorf("keepFresh's reads counted as %d page hits, want 0", h)
	}
}

// awaitPage sleeps through the refreshes that change nothing and reads at
// the first refresh from the moment the CDN holds the page's turn; with
// nothing to see, it hands over to the poll when it is due.
func TestAwaitPageSkipsToTheRefreshThatMatters(t *testing.T) {
	edge, c := newSnapshotCDN(t, 60)
	edge.set(saleFlags{NowServing: 1})
	c.get()
	s := &sim{cdn: c, zero: time.Now()}
	sh := &shopper{position: 20}
	const refreshEvery = 100 * time.Millisecond

	go func() {
		time.Sleep(350 * time.Millisecond)
		edge.set(saleFlags{NowServing: 20})
		refresh(c)
	}()
	nextPage := refreshEvery
	read, ok := s.awaitPage(context.Background(), sh, &nextPage, 5*time.Second, refreshEvery)
	if !read || !ok {
		t.Fatalf("awaitPage = read %v, ok %v; want a read", read, ok)
	}
	// The turn lands a little after 350ms (later on a busy box): the page
	// reads at the next whole refresh, and the ones before it were skipped.
	at := nextPage - refreshEvery
	if at < 400*time.Millisecond || at%refreshEvery != 0 {
		t.Errorf("read the refresh at %v, want the first refresh after the turn landed (400ms on a quiet box)", at)
	}
	if now := s.since(); now < at {
		t.Errorf("awaitPage returned at %v, before the refresh it reads (%v)", now, at)
	}
	if n, want := c.unchanged.Load(), int64(at/refreshEvery-1); n != want {
		t.Errorf("unchanged refreshes = %d, want %d (every refresh from 100ms until %v)", n, want, at)
	}
	if stop, serving := s.readPageAt(sh, nextPage-refreshEvery); stop || serving != 20 {
		t.Errorf("readPageAt = stop %v, serving %d; want the turn (20)", stop, serving)
	}

	// Nothing changes: the poll, 300ms on, is due first.
	sh = &shopper{position: 99}
	nextPage, pollAt := s.since()+refreshEvery, s.since()+300*time.Millisecond
	read, ok = s.awaitPage(context.Background(), sh, &nextPage, pollAt, refreshEvery)
	if read || !ok {
		t.Fatalf("awaitPage with nothing to see = read %v, ok %v; want the poll", read, ok)
	}
	if s.since() < pollAt {
		t.Errorf("awaitPage returned at %v, before the poll at %v", s.since(), pollAt)
	}
	if nextPage < pollAt {
		t.Errorf("nextPage = %v, want past the refreshes slept through (poll at %v)", nextPage, pollAt)
	}

	// The run ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := s.awaitPage(ctx, sh, &nextPage, s.since()+time.Second, refreshEvery); ok {
		t.Error("awaitPage went on after the run ended")
	}
}

// watchEdge holds a snapshot watch (?at=) for hold, or until news, as the
// edge holds one until its second ends; a plain read is answered at once.
type watchEdge struct {
	snapshotEdge
	hold    time.Duration
	news    chan struct{}
	watches int
}

func (e *watchEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at, _ := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64)
	if at > 0 {
		e.mu.Lock()
		e.watches++
		e.mu.Unlock()
		select {
		case <-e.news:
		case <-time.After(e.hold):
		}
	}
	w.Header().Set("Flashgate-Next-At", strconv.FormatInt(max(at, 1000)+1, 10))
	e.snapshotEdge.ServeHTTP(w, r)
}

// keepWatching watches the second the last answer named while a page
// watches, one at a time and no more than one a period, and the page hears
// the news when the held watch brings it, not a period later.
func TestCDNKeepWatchingBringsNewsAsItComes(t *testing.T) {
	edge := &watchEdge{snapshotEdge: snapshotEdge{maxAge: 2}, hold: 300 * time.Millisecond, news: make(chan struct{})}
	edge.set(saleFlags{NowServing: 1})
	srv := httptest.NewServer(edge)
	t.Cleanup(srv.Close)
	cl, err := newClient(srv.URL, 16, 5*time.Second, newRecorder(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c := newCDN(cl, "/v1/sales/s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.keepWatching(ctx, 300*time.Millisecond)

	w := c.watch(0, false, false) // fires on a sold-out
	began := time.Now()
	// A plain read, then watches held in turn.
	testenv.Eventually(t, 5*time.Second, "keepWatching making 3 watches", func() bool { return edge.watchCount() >= 3 })
	if fired(w) {
		t.Fatal("the page's watch fired before any news")
	}
	edge.set(saleFlags{NowServing: 1, SoldOut: true})
	news := time.Now()
	close(edge.news) // the held watch is answered now
	select {
	case <-w.fired:
	case <-time.After(2 * time.Second):
		t.Fatal("the sold-out did not reach the watching page")
	}
	if d := w.firedAt.Sub(news); d > 150*time.Millisecond {
		t.Errorf("the page heard the news %v after it came, want within the held watch's answer (well under the 300 ms period)", d)
	}
	if n, elapsed := edge.fetches(), time.Since(began); n > int(elapsed/(300*time.Millisecond))+2 {
		t.Errorf("%d edge requests in %v, want no more than one a 300 ms period", n, elapsed)
	}
}

func (e *watchEdge) watchCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.watches
}
