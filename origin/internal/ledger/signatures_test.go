package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TakeSignature takes a signature once: the first call is fresh, every
// later one, from any number of racing callers or another Store on the
// same database (another origin, or this one restarted), is not.
func TestTakeSignatureOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 1)
	other := New(s.pool) // another origin on the same database
	ctx := context.Background()
	until := time.Now().Add(5 * time.Minute)
	if fresh, err := s.TakeSignature(ctx, "test1:aa", until); err != nil || !fresh {
		t.Fatalf("TakeSignature(aa) = %v, %v; want fresh", fresh, err)
	}
	for name, st := range map[string]*Store{"this store": s, "another store": other} {
		if fresh, err := st.TakeSignature(ctx, "test1:aa", until); err != nil || fresh {
			t.Errorf("TakeSignature(aa) again on %s = %v, %v; want taken before", name, fresh, err)
		}
	}

	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			fresh, err := st.TakeSignature(ctx, "test1:bb", until)
			if err != nil {
				t.Errorf("racing TakeSignature(bb) = %v", err)
			}
			if fresh {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("20 racing TakeSignature(bb): %d fresh, want 1", wins.Load())
	}
}

// Rows expired SignatureKeep ago go, a batch per take; rows within it stay
// (so a replay to an origin whose clock is behind is still refused).
func TestTakeSignaturePurges(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 1)
	ctx := context.Background()
	long := time.Now().Add(-SignatureKeep - time.Hour)
	for i := range signaturePurge + 10 {
		if fresh, err := s.TakeSignature(ctx, fmt.Sprintf("old:%d", i), long); err != nil || !fresh {
			t.Fatalf("TakeSignature(old %d) = %v, %v; want fresh", i, fresh, err)
		}
	}
	recent := time.Now().Add(-SignatureKeep / 2)
	if fresh, err := s.TakeSignature(ctx, "recent", recent); err != nil || !fresh {
		t.Fatalf("TakeSignature(recent) = %v, %v; want fresh", fresh, err)
	}
	// The takes above already purged; a few more and every expired row is gone.
	for i := range 3 {
		if _, err := s.TakeSignature(ctx, fmt.Sprintf("new:%d", i), time.Now().Add(time.Minute)); err != nil {
			t.Fatalf("TakeSignature(new %d) = %v", i, err)
		}
	}
	var old, all int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE signature LIKE 'old:%'), count(*) FROM line_signatures`).Scan(&old, &all); err != nil {
		t.Fatal(err)
	}
	if old != 0 || all != 4 {
		t.Errorf("rows after the purges: %d expired of %d, want 0 of 4 (recent and 3 new)", old, all)
	}
	if fresh, err := s.TakeSignature(ctx, "recent", recent); err != nil || fresh {
		t.Errorf("TakeSignature(recent) again, within SignatureKeep of its until = %v, %v; want taken before", fresh, err)
	}
}
