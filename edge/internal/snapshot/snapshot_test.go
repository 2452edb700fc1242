package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/snapshot"
	"github.com/flashgate/flashgate/internal/clock"
)

// fakeOrigin answers the cache's GETs from a table the test changes: the
// list, each sale's snapshot, failures and fetches that wait for a release.
type fakeOrigin struct {
	mu      sync.Mutex // guards everything below
	listed  []string
	listErr error
	sales   map[string]snapshot.Sale
	fail    map[string]int           // sale id -> status to answer instead
	hold    map[string]chan struct{} // sale id -> fetch waits until closed
	fetches map[string]int           // sale id -> fetches started
	running int                      // fetches in progress
	peak    int                      // most fetches in progress at once
}

func newFakeOrigin() *fakeOrigin {
	return &fakeOrigin{sales: map[string]snapshot.Sale{}, fail: map[string]int{}, hold: map[string]chan struct{}{}, fetches: map[string]int{}}
}

func (o *fakeOrigin) set(s snapshot.Sale) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sales[s.SaleID] = s
}

func (o *fakeOrigin) list(ids ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.listed = ids
}

func (o *fakeOrigin) do(f func(o *fakeOrigin)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

func (o *fakeOrigin) Get(path string, dst []byte) (int, []byte, error) {
	o.mu.Lock()
	if path == "/v1/sales" {
		defer o.mu.Unlock()
		if o.listErr != nil {
			return 0, dst, o.listErr
		}
		type listing struct {
			SaleID string `json:"sale_id"`
		}
		out := struct {
			Sales []listing `json:"sales"`
		}{Sales: []listing{}}
		for _, id := range o.listed {
			out.Sales = append(out.Sales, listing{SaleID: id})
		}
		b, _ := json.Marshal(out)
		return 200, b, nil
	}
	id := strings.TrimPrefix(path, "/v1/sales/")
	o.fetches[id]++
	o.running++
	o.peak = max(o.peak, o.running)
	hold := o.hold[id]
	o.mu.Unlock()
	if hold != nil {
		<-hold
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running--
	if status := o.fail[id]; status != 0 {
		return status, dst, nil
	}
	s, ok := o.sales[id]
	if !ok {
		return 404, dst, nil
	}
	b, _ := json.Marshal(s)
	return 200, b, nil
}

func (o *fakeOrigin) fetchCount(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fetches[id]
}

func sale(id, status string, available int64) snapshot.Sale {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return snapshot.Sale{SaleID: id, Name: "Sale " + id, Status: status, StartsAt: start, EndsAt: start.Add(time.Hour),
		SKUs: []snapshot.SKU{{SKU: "sku-1", AvailableHint: available}}}
}

func newCache(o *fakeOrigin, concurrency int) (*snapshot.Cache, *clock.Fake) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return snapshot.New(o, log, snapshot.Options{Concurrency: concurrency, Clock: clk}), clk
}

func refresh(t *testing.T, c *snapshot.Cache, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.Refresh(ctx)
}

func entry(t *testing.T, c *snapshot.Cache, id string) (snapshot.Entry, bool) {
	t.Helper()
	for _, e := range c.All() {
		if e.Sale.SaleID == id {
			return e, true
		}
	}
	return snapshot.Entry{}, false
}

// TestFailingSaleKeepsItsLastSnapshot: one sale whose fetch fails keeps its
// last good snapshot and its age, and does not stop the other sale's
// snapshot from being replaced.
func TestFailingSaleKeepsItsLastSnapshot(t *testing.T) {
	o := newFakeOrigin()
	o.set(sale("a", "open", 10))
	o.set(sale("b", "open", 20))
	o.list("a", "b")
	c, clk := newCache(o, 4)
	if err := refresh(t, c, time.Second); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	first := clk.Now()
	clk.Advance(time.Second)
	o.set(sale("a", "sold_out", 0))
	o.do(func(o *fakeOrigin) { o.fail["b"] = 500 })

	err := refresh(t, c, time.Second)
	if err == nil || !strings.Contains(err.Error(), "sale b") {
		t.Errorf("Refresh with b failing = %v, want an error naming sale b", err)
	}
	a, _ := entry(t, c, "a")
	if a.Sale.Status != "sold_out" || !a.FetchedAt.Equal(clk.Now()) {
		t.Errorf("a after the second round = %s fetched %v, want sold_out fetched %v", a.Sale.Status, a.FetchedAt, clk.Now())
	}
	b, ok := entry(t, c, "b")
	if !ok || b.Sale.SKUs[0].AvailableHint != 20 || !b.FetchedAt.Equal(first) {
		t.Errorf("b after its fetch failed = %+v (held %v), want its first snapshot, fetched %v", b, ok, first)
	}
}

// TestListFailureKeepsSales: when the list fails, the sales held are still
// refreshed, and an id the cache never saw is Absent only while the last
// good list is younger than the bound.
func TestListFailureKeepsSales(t *testing.T) {
	o := newFakeOrigin()
	o.set(sale("a", "open", 10))
	o.list("a")
	c, clk := newCache(o, 4)
	if err := refresh(t, c, time.Second); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	o.do(func(o *fakeOrigin) { o.listErr = errors.New("connection refused") })
	clk.Advance(2 * time.Second)
	o.set(sale("a", "open", 7))
	if err := refresh(t, c, time.Second); err == nil {
		t.Errorf("Refresh with the list failing = nil, want an error")
	}
	if a, _ := c.Get("a"); a.SKUs[0].AvailableHint != 7 {
		t.Errorf("a after a round whose list failed = %d available, want 7 (refreshed anyway)", a.SKUs[0].AvailableHint)
	}
	tests := []struct {
		id     string
		maxAge time.Duration
		want   snapshot.Presence
	}{
		{"a", time.Second, snapshot.Listed},
		{"new", 3 * time.Second, snapshot.Absent},
		{"new", time.Second, snapshot.Unknown},
	}
	for _, tt := range tests {
		if got := c.Presence(tt.id, tt.maxAge); got != tt.want {
			t.Errorf("Presence(%s, %v) with a list 2 s old = %v, want %v", tt.id, tt.maxAge, got, tt.want)
		}
	}
	if age, ok := c.ListAge(); !ok || age != 2*time.Second {
		t.Errorf("ListAge = %v, %v, want 2s, true", age, ok)
	}
}

// TestNoListYet: before any good list, nothing is known and nothing is
// absent.
func TestNoListYet(t *testing.T) {
	o := newFakeOrigin()
	o.do(func(o *fakeOrigin) { o.listErr = errors.New("connection refused") })
	c, _ := newCache(o, 4)
	if err := refresh(t, c, time.Second); err == nil {
		t.Errorf("Refresh with the origin down = nil, want an error")
	}
	if got := c.Presence("a", time.Hour); got != snapshot.Unknown {
		t.Errorf("Presence before any list = %v, want Unknown", got)
	}
	if _, ok := c.ListAge(); ok {
		t.Errorf("ListAge before any list says there is one")
	}
}

// TestUnlistedSaleDropped: a sale the origin stops listing is forgotten.
func TestUnlistedSaleDropped(t *testing.T) {
	o := newFakeOrigin()
	o.set(sale("a", "open", 10))
	o.set(sale("b", "open", 10))
	o.list("a", "b")
	c, _ := newCache(o, 4)
	if err := refresh(t, c, time.Second); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	o.list("a")
	if err := refresh(t, c, time.Second); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	if _, ok := c.Get("b"); ok {
		t.Errorf("Get(b) after the origin stopped listing it = found, want gone")
	}
	if got := c.Presence("b", time.Second); got != snapshot.Absent {
		t.Errorf("Presence(b) = %v, want Absent", got)
	}
}

// TestSlowSaleDoesNotHoldOthers: a fetch that hangs past its round does not
// stop the next rounds from refreshing the other sales, is not started a
// second time while it runs, and lands when it ends. Fetches in flight never
// exceed the bound.
func TestSlowSaleDoesNotHoldOthers(t *testing.T) {
	o := newFakeOrigin()
	for _, id := range []string{"a", "b", "c", "slow"} {
		o.set(sale(id, "open", 10))
	}
	o.list("a", "b", "c", "slow")
	release := make(chan struct{})
	o.do(func(o *fakeOrigin) { o.hold["slow"] = release })
	c, clk := newCache(o, 2)
	defer c.Wait()
	defer close(release)

	if err := refresh(t, c, 200*time.Millisecond); err == nil {
		t.Errorf("Refresh with a hanging fetch = nil, want an error about it")
	}
	for range 3 {
		clk.Advance(250 * time.Millisecond)
		o.set(sale("a", "open", 5))
		start := time.Now()
		if err := refresh(t, c, 5*time.Second); err != nil {
			t.Errorf("Refresh while slow still runs = %v, want nil (slow skipped)", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Refresh while slow still runs took %v, want it not to wait for slow", took)
		}
		if a, _ := entry(t, c, "a"); !a.FetchedAt.Equal(clk.Now()) || a.Sale.SKUs[0].AvailableHint != 5 {
			t.Errorf("a = %+v, want refreshed at %v with 5 available", a, clk.Now())
		}
	}
	if n := o.fetchCount("slow"); n != 1 {
		t.Errorf("fetches of slow while its first hung = %d, want 1", n)
	}
	if _, ok := c.Get("slow"); ok {
		t.Errorf("slow has a snapshot before its fetch answered")
	}
	var peak int
	o.do(func(o *fakeOrigin) { peak = o.peak })
	if peak > 2 {
		t.Errorf("fetches in flight at once = %d, want at most the bound 2", peak)
	}
}

// TestEndedSaleNotRefetched: once the origin says a sale ended, its
// snapshot cannot change; it is kept but not fetched again.
func TestEndedSaleNotRefetched(t *testing.T) {
	o := newFakeOrigin()
	o.set(sale("over", "ended", 0))
	o.set(sale("live", "open", 3))
	o.list("over", "live")
	c, _ := newCache(o, 4)
	for range 3 {
		if err := refresh(t, c, time.Second); err != nil {
			t.Fatalf("Refresh = %v", err)
		}
	}
	if got, want := o.fetchCount("over"), 1; got != want {
		t.Errorf("fetches of an ended sale over 3 rounds = %d, want %d", got, want)
	}
	if got, want := o.fetchCount("live"), 3; got != want {
		t.Errorf("fetches of an open sale over 3 rounds = %d, want %d", got, want)
	}
	if s, ok := c.Get("over"); !ok || !s.Ended() {
		t.Errorf("Get(over) = %+v, %v, want its ended snapshot", s, ok)
	}
}

// TestKickCoalesces: kicks wake the refresh loop once, however many.
func TestKickCoalesces(t *testing.T) {
	c, _ := newCache(newFakeOrigin(), 1)
	for range 5 {
		c.Kick()
	}
	if got := len(c.Kicks()); got != 1 {
		t.Errorf("kicks waiting after 5 Kick calls = %d, want 1", got)
	}
}
