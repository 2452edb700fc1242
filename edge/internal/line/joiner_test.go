package line_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestJoinPositionsUniqueAndGapFree: 10,000 shoppers join at once through
// three Joiners (three edge nodes) sharing Redis, after the start; the
// positions they get are exactly 1..10000, and a shopper who joins again,
// even in the same burst, keeps one place.
func TestJoinPositionsUniqueAndGapFree(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	const shoppers = 10_000
	const again = 500 // shoppers who join a second time within the burst
	ready(t, r, "s1", 1)
	joiners := make([]*line.Joiner, 3)
	for i := range joiners {
		joiners[i] = line.NewJoiner(r.Client, keys, line.JoinerOptions{})
		t.Cleanup(joiners[i].Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	starts := time.Now().Add(-time.Minute)

	type result struct {
		account string
		place   line.Place
		length  int64
		err     error
	}
	results := make([]result, shoppers+again)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range shoppers + again {
		account := fmt.Sprintf("acct-%05d", i%shoppers)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			place, length, err := joiners[i%len(joiners)].Join(ctx, "s1", starts, account)
			results[i] = result{account, place, length, err}
		}()
	}
	close(gate)
	wg.Wait()

	byAccount := map[string]int64{}
	seen := make(map[int64]string, shoppers)
	for _, res := range results {
		if res.err != nil {
			t.Fatalf("Join(%s) = %v, want a place", res.account, res.err)
		}
		if res.place.Pre {
			t.Fatalf("Join(%s) after the start = pre-queue index %d, want a position", res.account, res.place.Index)
		}
		pos := res.place.Position
		if res.length < pos || res.length > shoppers {
			t.Errorf("Join(%s) queue length = %d, want between its position %d and %d", res.account, res.length, pos, shoppers)
		}
		if prev, ok := byAccount[res.account]; ok {
			if prev != pos {
				t.Errorf("Join(%s) twice = positions %d and %d, want the same place", res.account, prev, pos)
			}
			continue
		}
		byAccount[res.account] = pos
		if other, dup := seen[pos]; dup {
			t.Errorf("position %d given to %s and %s", pos, other, res.account)
		}
		seen[pos] = res.account
	}
	for p := int64(1); p <= shoppers; p++ {
		if _, ok := seen[p]; !ok {
			t.Errorf("position %d given to nobody: positions are not gap-free", p)
		}
	}
	if len(seen) != shoppers {
		t.Errorf("%d distinct positions, want %d", len(seen), shoppers)
	}

	// A later join of a known account, on another node, still keeps its place.
	place, length, err := joiners[2].Join(ctx, "s1", starts, "acct-00042")
	if err != nil || place.Position != byAccount["acct-00042"] || length != shoppers {
		t.Errorf("Join(acct-00042) again = %+v, %d, %v; want position %d, length %d", place, length, err, byAccount["acct-00042"], shoppers)
	}
	if n, err := r.Client.HLen(ctx, keys.Places("s1")).Result(); err != nil || n != shoppers {
		t.Errorf("HLEN places = %d, %v; want %d (one field per shopper)", n, err, shoppers)
	}
}

// TestJoinPreQueue: joins before the start (by Redis TIME) take pre-queue
// indexes 1..k; joins after it take positions k+1, k+2, ... behind the
// whole pre-queue; a pre-queue shopper joining again after the start keeps
// the index.
func TestJoinPreQueue(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	ready(t, r, "s", 1)
	j := line.NewJoiner(r.Client, line.NewKeys(r.Prefix), line.JoinerOptions{})
	t.Cleanup(j.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	starts := time.Now().Add(time.Second)

	const pre = 50
	var wg sync.WaitGroup
	indexes := make([]line.Place, pre)
	for i := range pre {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _, err := j.Join(ctx, "s", starts, fmt.Sprintf("early-%d", i))
			if err != nil {
				t.Errorf("Join(early-%d) = %v", i, err)
			}
			indexes[i] = p
		}()
	}
	wg.Wait()
	if time.Now().After(starts) {
		t.Fatalf("the pre-queue joins took until after the start; the test cannot tell pre from post")
	}
	got := map[int64]bool{}
	for i, p := range indexes {
		if !p.Pre || p.Position != 0 {
			t.Errorf("Join(early-%d) before the start = %+v, want a pre-queue index", i, p)
		}
		got[p.Index] = true
	}
	for i := int64(1); i <= pre; i++ {
		if !got[i] {
			t.Errorf("pre-queue index %d given to nobody", i)
		}
	}

	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	for i := range 3 {
		p, length, err := j.Join(ctx, "s", starts, fmt.Sprintf("late-%d", i))
		want := int64(pre + 1 + i)
		if err != nil || p.Pre || p.Position != want || length != want {
			t.Errorf("Join(late-%d) after the start = %+v, %d, %v; want position %d, length %d", i, p, length, err, want, want)
		}
	}
	p, _, err := j.Join(ctx, "s", starts, "early-7")
	if err != nil || p != indexes[7] {
		t.Errorf("Join(early-7) after the start = %+v, %v; want its pre-queue place %+v", p, err, indexes[7])
	}
}

// TestJoinerClosed: a Joiner answers ErrClosed after Close.
func TestJoinerClosed(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	j := line.NewJoiner(r.Client, line.NewKeys(r.Prefix), line.JoinerOptions{})
	j.Close()
	if _, _, err := j.Join(context.Background(), "s", time.Now(), "a"); err != line.ErrClosed {
		t.Errorf("Join after Close = %v, want ErrClosed", err)
	}
}
