package checkout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/intent"
)

// newStore returns a Store under the test's own prefix, with sale "s1"
// loaded: SKU "a" with stock units, SKU "b" with none.
func newStore(t testing.TB, stock int64) *Store {
	t.Helper()
	env := testenv.New(t)
	opts, err := redis.ParseURL(env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	s := NewStore(rdb, NewKeys(env.Prefix), time.Hour)
	if _, err := s.Load(context.Background(), "s1", "e1", map[string]intent.Stock{
		"a": {Total: stock, Available: stock}, "b": {Total: 0},
	}); err != nil {
		t.Fatalf("Load = %v", err)
	}
	return s
}

func TestReserveOutcomes(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	req := func(account, jti, idem, sku string) ReserveRequest {
		return ReserveRequest{Sale: "s1", SKU: sku, Account: account, TokenID: jti, IdempotencyKey: idem, HoldTTL: time.Minute}
	}
	first, err := r.Reserve(ctx, req("u1", "j1", "k1", "a"))
	if err != nil || first.Outcome != Created || first.ReservationID == "" || first.ExpiresAt.Before(time.Now().Add(50*time.Second)) {
		t.Fatalf("Reserve(u1) = %+v, %v; want created, expiring in a minute", first, err)
	}
	for _, c := range []struct {
		name string
		req  ReserveRequest
		want Outcome
		id   string
	}{
		{"same token", req("u1", "j1", "k-other", "a"), Existing, first.ReservationID},
		{"same idempotency key", req("u1", "j-new", "k1", "a"), Existing, first.ReservationID},
		{"same account, live hold", req("u1", "j-new2", "k-new", "b"), Existing, first.ReservationID},
		{"another account's key string", req("u2", "j2", "k1", "nope"), UnknownSKU, ""},
		{"no stock in b", req("u3", "j3", "k3", "b"), SoldOut, ""},
		{"second unit of a", req("u4", "j4", "k4", "a"), Created, ""},
		{"a sold out", req("u5", "j5", "k5", "a"), SoldOut, ""},
	} {
		got, err := r.Reserve(ctx, c.req)
		if err != nil || got.Outcome != c.want || (c.id != "" && got.ReservationID != c.id) {
			t.Errorf("Reserve(%s) = %+v, %v; want %v %s", c.name, got, err, c.want, c.id)
		}
	}
	inv, err := s.Inventory(ctx, "s1", []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if inv["a"] != (intent.Stock{Total: 2, Held: 2}) || inv["b"] != (intent.Stock{}) {
		t.Errorf("Inventory = %+v, want a: 2 held; b: empty", inv)
	}
	if _, ok := inv["c"]; ok {
		t.Errorf("Inventory has unloaded SKU c")
	}
	res, err := s.Reservation(ctx, "s1", first.ReservationID)
	if err != nil || res.Account != "u1" || res.SKU != "a" || res.Status != intent.Held || res.IdempotencyKey != "k1" {
		t.Errorf("Reservation(%s) = %+v, %v; want u1's held unit of a", first.ReservationID, res, err)
	}
	if _, err := s.Reservation(ctx, "s1", "r_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Reservation(unknown) = %v, want ErrNotFound", err)
	}
}

// Many concurrent reserves through one Reserver (pipelined in batches) take
// exactly the stock, and each created reserve has its intent.
func TestReserverConcurrentTakesExactlyTheStock(t *testing.T) {
	t.Parallel()
	const stock, callers = 30, 200
	s := newStore(t, stock)
	r := NewReserver(s, ReserverOptions{Pipelines: 2, MaxBatch: 16})
	defer r.Close()
	var mu sync.Mutex
	outcomes := map[Outcome]int{}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.Reserve(context.Background(), ReserveRequest{Sale: "s1", SKU: "a", Account: fmt.Sprintf("u%d", i),
				TokenID: fmt.Sprintf("j%d", i), IdempotencyKey: "k", HoldTTL: time.Minute})
			if err != nil {
				t.Errorf("Reserve(u%d) = %v", i, err)
				return
			}
			mu.Lock()
			outcomes[got.Outcome]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if outcomes[Created] != stock || outcomes[SoldOut] != callers-stock {
		t.Errorf("outcomes of %d reserves = %v, want %d created, %d sold out", callers, outcomes, stock, callers-stock)
	}
	entries, err := s.PendingIntents(context.Background(), "s1", 1000)
	if err != nil || len(entries) != stock {
		t.Errorf("PendingIntents = %d entries, %v; want %d", len(entries), err, stock)
	}
}

func TestLoadRefusesOtherFigures(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5)
	ctx := context.Background()
	// The same figures again, or figures Redis has run ahead of: fine.
	// The epoch given first stays.
	if epoch, err := s.Load(ctx, "s1", "e2", map[string]intent.Stock{"a": {Total: 5, Available: 5}}); err != nil || epoch != "e1" {
		t.Errorf("Load(same figures) = %q, %v, want e1, nil", epoch, err)
	}
	if _, err := s.Load(ctx, "s1", "e2", map[string]intent.Stock{"a": {Total: 6, Available: 6}}); !errors.Is(err, ErrStockMismatch) {
		t.Errorf("Load(other total) = %v, want ErrStockMismatch", err)
	}
}

// The ledger asks what is pending before any writer has made the stream.
func TestPendingIntentsWithoutAStream(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5)
	entries, err := s.PendingIntents(context.Background(), "s1", 10)
	if err != nil || len(entries) != 0 {
		t.Errorf("PendingIntents(no stream) = %v, %v; want none, nil", entries, err)
	}
}

// Holds come back only once due, once each, however many release at once.
func TestReleaseDueOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, 20)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	reserve := func(i int, ttl time.Duration) time.Time {
		got, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: fmt.Sprintf("u%d", i),
			TokenID: fmt.Sprintf("j%d", i), IdempotencyKey: "k", HoldTTL: ttl})
		if err != nil || got.Outcome != Created {
			t.Fatalf("Reserve(u%d) = %+v, %v", i, got, err)
		}
		return got.ExpiresAt
	}
	for i := range 5 {
		reserve(i, time.Hour) // never due in this test
	}
	if n, err := s.ReleaseDue(ctx, "s1", 100); err != nil || n != 0 {
		t.Fatalf("ReleaseDue before any expiry = %d, %v; want 0", n, err)
	}
	var lastShort time.Time
	for i := 5; i < 20; i++ {
		lastShort = reserve(i, 200*time.Millisecond)
	}
	time.Sleep(time.Until(lastShort) + 100*time.Millisecond)
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				n, err := s.ReleaseDue(ctx, "s1", 3)
				if err != nil {
					t.Errorf("ReleaseDue = %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if total != 15 {
		t.Errorf("released by 4 concurrent sweepers = %d, want 15", total)
	}
	inv, _ := s.Inventory(ctx, "s1", []string{"a"})
	if inv["a"] != (intent.Stock{Total: 20, Available: 15, Held: 5}) {
		t.Errorf("Inventory(a) = %+v, want 15 available, 5 held", inv["a"])
	}
}

// The scripts record when a SKU's count reaches zero and when a unit comes
// back to it: sold-out news is timed from these, at the source.
func TestMomentsRecordZeroAndReturn(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	moments := func() StockMoments {
		t.Helper()
		m, err := s.Moments(ctx, "s1", []string{"a", "missing"})
		if err != nil || len(m) != 1 {
			t.Fatalf("Moments = %+v, %v; want SKU a only", m, err)
		}
		return m["a"]
	}
	reserve := func(i int) Hold {
		t.Helper()
		got, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: fmt.Sprintf("u%d", i),
			TokenID: fmt.Sprintf("j%d", i), IdempotencyKey: "k", HoldTTL: time.Hour})
		if err != nil || got.Outcome != Created {
			t.Fatalf("Reserve(u%d) = %+v, %v", i, got, err)
		}
		return Hold{ID: got.ReservationID, SKU: "a", Account: fmt.Sprintf("u%d", i), ReturnUnit: true}
	}
	before := time.Now().Add(-time.Second) // Redis's clock, within a second of ours
	first := reserve(1)
	if m := moments(); !m.Zero.IsZero() || !m.Back.IsZero() {
		t.Fatalf("one of two units taken: moments %+v, want none", m)
	}
	reserve(2)
	zero := moments().Zero
	if zero.Before(before) || zero.After(time.Now().Add(time.Second)) {
		t.Fatalf("last unit taken: zero at %v, want about now", zero)
	}
	if n, err := s.Cancel(ctx, "s1", []Hold{first}); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	m := moments()
	if m.Back.Before(zero) || m.Zero != zero || m.FirstZero != zero {
		t.Fatalf("a unit back: moments %+v; want back at or after %v, zero unchanged", m, zero)
	}
	reserve(3)
	if again := moments(); again.Zero.Before(m.Back) || again.Back != m.Back || again.FirstZero != zero {
		t.Errorf("the unit taken again: moments %+v; want the last zero at or after %v, the first still %v", again, m.Back, zero)
	}
}
