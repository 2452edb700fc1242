package limitstore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

func newClock() *clock.Fake { return clock.NewFake(tokenstest.Start()) }

var threeAMinute = limiter.Rate{Limit: 3, Period: time.Minute}

// TestCounting: within a window the fourth request of a key is over a
// limit of three, another key has its own count, Peek counts nothing,
// Reset forgets, and once the window ends the count starts again.
func TestCounting(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := New(Options{Clock: c})
	l := limiter.New(s, threeAMinute)
	end := c.Now().Add(time.Minute).Unix()
	for i := int64(1); i <= 4; i++ {
		lc, err := l.Get(ctx, "a")
		want := limiter.Context{Limit: 3, Remaining: max(3-i, 0), Reset: end, Reached: i > 3}
		if err != nil || lc != want {
			t.Fatalf("Get(a) #%d = %+v, %v; want %+v", i, lc, err, want)
		}
		c.Advance(time.Second)
	}
	if lc, _ := l.Get(ctx, "b"); lc.Remaining != 2 || lc.Reached {
		t.Errorf("Get(b) after four of a = %+v, want its own count (2 left)", lc)
	}
	if lc, _ := l.Peek(ctx, "a"); lc.Remaining != 0 || !lc.Reached {
		t.Errorf("Peek(a) = %+v, want reached", lc)
	}
	if lc, _ := l.Peek(ctx, "c"); lc.Remaining != 3 || lc.Reached {
		t.Errorf("Peek(c) of an unseen key = %+v, want 3 left", lc)
	}
	if s.Len() != 2 {
		t.Errorf("Len after Peek of an unseen key = %d, want 2: Peek stores nothing", s.Len())
	}
	if _, err := l.Reset(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if lc, _ := l.Get(ctx, "b"); lc.Remaining != 2 {
		t.Errorf("Get(b) after Reset = %+v, want a fresh count (2 left)", lc)
	}
	c.Advance(time.Minute)
	if lc, _ := l.Get(ctx, "a"); lc.Remaining != 2 || lc.Reached || lc.Reset != c.Now().Add(time.Minute).Unix() {
		t.Errorf("Get(a) once its window ended = %+v, want a new window with 2 left", lc)
	}
}

// TestConcurrentCount: requests of one key from many goroutines are each
// counted once.
func TestConcurrentCount(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	l := limiter.New(s, limiter.Rate{Limit: 1 << 30, Period: time.Hour})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if _, err := l.Get(ctx, "k"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if lc, _ := l.Peek(ctx, "k"); lc.Limit-lc.Remaining != 16_000 {
		t.Errorf("count after 16,000 concurrent Gets = %d, want 16,000", lc.Limit-lc.Remaining)
	}
}

// TestFloodStaysBounded: a flood of distinct keys (every /64 of an IPv6
// /44, as an attacker with a large range could send) never holds more than
// MaxKeys keys, nor more memory than those keys take, however long the
// limit's period; the keys pushed out are counted.
func TestFloodStaysBounded(t *testing.T) {
	ctx := context.Background()
	const maxKeys, flood = 1000, 300_000
	s := New(Options{MaxKeys: maxKeys})
	l := limiter.New(s, limiter.Rate{Limit: 10, Period: time.Hour})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range flood {
		if _, err := l.Get(ctx, fmt.Sprintf("ip:2001:db8:%x:%x::/64", i>>16, i&0xffff)); err != nil {
			t.Fatal(err)
		}
		if i%10_000 == 0 && s.Len() > maxKeys {
			t.Fatalf("Len after %d distinct keys = %d, want at most %d", i+1, s.Len(), maxKeys)
		}
	}
	grown := int64(heap()) - int64(before)
	if n := s.Len(); n != maxKeys {
		t.Errorf("Len after the flood = %d, want the cap %d", n, maxKeys)
	}
	if got := s.Evicted(); got != flood-maxKeys {
		t.Errorf("Evicted = %d, want %d", got, flood-maxKeys)
	}
	// A thousand keys take well under a megabyte; the flood's 300,000
	// would take tens of megabytes if they were kept.
	if grown > 2<<20 {
		t.Errorf("heap grew by %d bytes over the flood, want under 2 MiB: the store keeps what it should drop", grown)
	}
	runtime.KeepAlive(s)
}

// TestEvictsSoonestEnding: at a shard's cap the window that ends soonest
// gives way to the new key. (The shard is driven directly, as Increment
// does: which keys share a shard depends on the hash's random seed.)
func TestEvictsSoonestEnding(t *testing.T) {
	c := newClock()
	sh := &shard{max: 2, windows: map[string]*window{}}
	add := func(key string) {
		if _, ok := sh.current(key, c.Now()); ok {
			t.Fatalf("%s already held", key)
		}
		if len(sh.windows) >= sh.max {
			sh.remove(sh.first)
		}
		sh.append(&window{key: key, end: c.Now().Add(time.Minute)})
		c.Advance(time.Second)
	}
	add("old")
	add("newer")
	add("newest")
	if _, ok := sh.windows["old"]; ok {
		t.Error(`"old" still held at the cap, want it pushed out: its window ends soonest`)
	}
	for _, k := range []string{"newer", "newest"} {
		if _, ok := sh.current(k, c.Now()); !ok {
			t.Errorf("%q not held, want it kept", k)
		}
	}
	if sh.first.key != "newer" || sh.last.key != "newest" || sh.first.next != sh.last || sh.last.prev != sh.first {
		t.Errorf("list = %q..%q, want newer..newest linked both ways", sh.first.key, sh.last.key)
	}
	c.Advance(time.Minute)
	if _, ok := sh.current("newest", c.Now()); ok || len(sh.windows) != 0 || sh.first != nil || sh.last != nil {
		t.Errorf("after every window ended: %d held, want none", len(sh.windows))
	}
}
