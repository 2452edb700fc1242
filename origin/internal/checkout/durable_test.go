package checkout

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// journal keeps grants in memory and fails while broken is set.
type journal struct {
	mu     sync.Mutex
	broken error
	grants map[string]intent.Grant
}

func (j *journal) RecordGrants(_ context.Context, grants []intent.Grant) ([]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return nil, j.broken
	}
	if j.grants == nil {
		j.grants = map[string]intent.Grant{}
	}
	var stale []string
	for _, g := range grants {
		if g.Epoch != "e1" {
			stale = append(stale, g.ReservationID)
			continue
		}
		j.grants[g.ReservationID] = g
	}
	return stale, nil
}

func (j *journal) set(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.broken = err
}

// A grant is answered only once journaled. When the journal fails, the
// shopper hears ErrNotDurable; trying again (same token) finds the same
// hold, journals it, and answers it.
func TestReserveIsAnsweredOnlyOnceJournaled(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	j := &journal{}
	r := NewReserver(s, ReserverOptions{Journal: j})
	defer r.Close()
	ctx := context.Background()
	req := ReserveRequest{Sale: "s1", SKU: "a", Account: "u1", TokenID: "j1", IdempotencyKey: "k1", HoldTTL: time.Minute}

	down := errors.New("postgres is down")
	j.set(down)
	if got, err := r.Reserve(ctx, req); !errors.Is(err, ErrNotDurable) || !errors.Is(err, down) {
		t.Fatalf("Reserve(journal down) = %+v, %v; want ErrNotDurable wrapping the journal's error", got, err)
	}
	j.set(nil)
	got, err := r.Reserve(ctx, req)
	if err != nil || got.Outcome != Existing || got.ReservationID == "" {
		t.Fatalf("Reserve(again, journal up) = %+v, %v; want the same hold, existing", got, err)
	}
	g, ok := j.grants[got.ReservationID]
	if !ok || g.Sale != "s1" || g.Account != "u1" || g.SKU != "a" || g.TokenID != "j1" || g.IdempotencyKey != "k1" ||
		g.Epoch != "e1" || g.Seq != 1 || g.ExpiresAt.Before(g.CreatedAt.Add(59*time.Second)) {
		t.Fatalf("journaled %+v (found %v), want u1's grant of a with token j1, key k1, epoch e1, sequence 1", g, ok)
	}

	created, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: "u2", TokenID: "j2", IdempotencyKey: "k2", HoldTTL: time.Minute})
	if err != nil || created.Outcome != Created {
		t.Fatalf("Reserve(u2) = %+v, %v; want created", created, err)
	}
	if g := j.grants[created.ReservationID]; g.Seq != 2 || g.Account != "u2" || !g.ExpiresAt.Equal(created.ExpiresAt) {
		t.Fatalf("journaled %+v, want u2's grant numbered 2, expiring %v", g, created.ExpiresAt)
	}
}

// A Redis without the sale's epoch has lost (or never had) the sale's
// state: it grants nothing, whatever counters it holds.
func TestReserveRefusedWithoutEpoch(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	if err := s.rdb.Del(ctx, s.keys.Meta("s1")).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: "u1", TokenID: "j1", IdempotencyKey: "k1", HoldTTL: time.Minute})
	if err != nil || got.Outcome != Rebuilding {
		t.Fatalf("Reserve(no epoch) = %+v, %v; want rebuilding", got, err)
	}
	if inv, _ := s.Inventory(ctx, "s1", []string{"a"}); inv["a"].Available != 2 {
		t.Fatalf("inventory = %+v, want nothing taken", inv["a"])
	}
}

// With WaitReplicas, a pipeline whose writes no replica confirms is not
// answered as granted (this test's Redis has no replica).
func TestReserveWaitsForReplicas(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	r := NewReserver(s, ReserverOptions{WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	defer r.Close()
	got, err := r.Reserve(context.Background(), ReserveRequest{Sale: "s1", SKU: "a", Account: "u1", TokenID: "j1", IdempotencyKey: "k1", HoldTTL: time.Minute})
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Reserve(no replica to confirm) = %+v, %v; want ErrNotDurable", got, err)
	}
}
