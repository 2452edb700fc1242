package loadgen

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestRunMakesEachCallOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	res := Run(context.Background(), Options{Workers: 8, Calls: 1000, First: 50}, func() Func {
		return func(_ context.Context, i int) (int, error) {
			mu.Lock()
			seen[i]++
			mu.Unlock()
			if i%10 == 0 {
				return 0, errors.New("boom")
			}
			return i % 2, nil
		}
	})
	if res.Calls != 1000 || res.Cut {
		t.Fatalf("Run = %d calls, cut %v; want 1000, not cut", res.Calls, res.Cut)
	}
	if res.Errors != 100 || res.Err == nil {
		t.Errorf("Run errors = %d (%v), want 100", res.Errors, res.Err)
	}
	if res.Labels[0]+res.Labels[1] != 900 {
		t.Errorf("Run labels = %v, want 900 in all", res.Labels)
	}
	for i := 50; i < 1050; i++ {
		if seen[i] != 1 {
			t.Fatalf("call %d made %d times, want once", i, seen[i])
		}
	}
}

func TestRunStopsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	res := Run(ctx, Options{Workers: 2, Calls: 1000}, func() Func {
		return func(_ context.Context, i int) (int, error) {
			switch {
			case i == 10:
				cancel()
			case i > 10:
				<-ctx.Done() // later calls end only after the cancel, however the workers are scheduled
			}
			return 0, nil
		}
	})
	if !res.Cut || res.Calls >= 1000 {
		t.Errorf("Run after cancel = %d calls, cut %v; want fewer than 1000, cut", res.Calls, res.Cut)
	}
}
