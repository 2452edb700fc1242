package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/intent"
)

// newStore migrates a fresh schema and creates a sale "s1" with SKUs
// "a" and "b" of the given stock.
func newStore(t testing.TB, stockA, stockB int) *Store {
	t.Helper()
	env := testenv.New(t)
	ctx := context.Background()
	if err := Migrate(ctx, env.DB); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	s := New(env.DB)
	now := time.Now().UTC().Truncate(time.Second)
	_, err := s.CreateSale(ctx, Sale{
		ID: "s1", Name: "Sale", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		HoldTTL: time.Minute, PerAccountLimit: 1,
		SKUs: []SKU{
			{SKU: "a", Name: "A", PriceMinor: 100, Currency: "INR", Stock: stockA},
			{SKU: "b", Name: "B", PriceMinor: 200, Currency: "INR", Stock: stockB},
		},
	})
	if err != nil {
		t.Fatalf("CreateSale = %v", err)
	}
	return s
}

var base = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// in makes an intent; seq orders the stream id and the time.
func in(seq int, kind intent.Kind, res, account, sku string) intent.Intent {
	return intent.Intent{
		ID: fmt.Sprintf("%d-0", 1000+seq), Kind: kind, ReservationID: res, Account: account, SKU: sku,
		IdempotencyKey: "idem-" + res, ExpiresAt: base.Add(time.Minute), At: base.Add(time.Duration(seq) * time.Millisecond),
	}
}

func reserve(seq int, res, account, sku string) intent.Intent {
	return in(seq, intent.Reserve, res, account, sku)
}

func expire(seq int, res, account, sku string) intent.Intent {
	return in(seq, intent.Expire, res, account, sku)
}

func apply(t *testing.T, s *Store, batch ...intent.Intent) Applied {
	t.Helper()
	got, err := s.Apply(context.Background(), "s1", batch)
	if err != nil {
		t.Fatalf("Apply(%d intents) = %v", len(batch), err)
	}
	return got
}

func wantStock(t *testing.T, s *Store, sku string, want intent.Stock) {
	t.Helper()
	inv, err := s.Inventory(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if inv[sku] != want {
		t.Errorf("inventory %s = %+v, want %+v", sku, inv[sku], want)
	}
}

func wantStatus(t *testing.T, s *Store, res string, want intent.Status) {
	t.Helper()
	r, err := s.Reservation(context.Background(), res)
	if err != nil {
		t.Fatalf("Reservation(%s) = %v, want status %s", res, err, want)
	}
	if r.Status != want {
		t.Errorf("Reservation(%s).Status = %s, want %s", res, r.Status, want)
	}
}

func refusals(a Applied) map[string]bool {
	out := map[string]bool{}
	for _, r := range a.Refused {
		out[r.Intent.ReservationID] = r.NoStock
	}
	return out
}

func TestApplyReserveAndExpire(t *testing.T) {
	t.Parallel()
	s := newStore(t, 10, 10)
	got := apply(t, s, reserve(1, "r1", "u1", "a"), reserve(2, "r2", "u2", "a"), reserve(3, "r3", "u3", "b"))
	if got.New != 3 || got.Duplicates != 0 || len(got.Refused) != 0 {
		t.Errorf("Apply(3 reserves) = %+v, want 3 new", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 10, Available: 8, Held: 2})
	wantStock(t, s, "b", intent.Stock{Total: 10, Available: 9, Held: 1})
	got = apply(t, s, expire(4, "r1", "u1", "a"))
	if got.New != 1 {
		t.Errorf("Apply(expire) = %+v, want 1 new", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 10, Available: 9, Held: 1})
	wantStatus(t, s, "r1", intent.Expired)
	wantStatus(t, s, "r2", intent.Held)
}

// Intents of one reservation may arrive in any order: an expire applied
// before its reserve leaves stock alone, and the reserve then changes nothing.
func TestApplyExpireBeforeReserve(t *testing.T) {
	t.Parallel()
	s := newStore(t, 3, 3)
	got := apply(t, s, expire(2, "r1", "u1", "a"))
	if got.New != 1 || len(got.Refused) != 0 {
		t.Errorf("Apply(expire first) = %+v, want 1 new", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Available: 3})
	wantStatus(t, s, "r1", intent.Expired)

	got = apply(t, s, reserve(1, "r1", "u1", "a"))
	if got.New != 1 || len(got.Refused) != 0 {
		t.Errorf("Apply(its reserve later) = %+v, want 1 new, nothing refused", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Available: 3})
	wantStatus(t, s, "r1", intent.Expired)

	// The same account may hold again afterwards.
	apply(t, s, reserve(3, "r2", "u1", "a"))
	wantStock(t, s, "a", intent.Stock{Total: 3, Available: 2, Held: 1})
	wantStatus(t, s, "r2", intent.Held)
}

// A reserve and its expire in one batch cancel out.
func TestApplyReserveAndExpireInOneBatch(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 1)
	got := apply(t, s, reserve(1, "r1", "u1", "a"), expire(2, "r1", "u1", "a"))
	if got.New != 2 || len(got.Refused) != 0 {
		t.Errorf("Apply(reserve, expire) = %+v, want 2 new, nothing refused", got)
	}
	wantStock(t, s, "a", intent.Stock{Total: 1, Available: 1})
	wantStatus(t, s, "r1", intent.Expired)
}

// An account whose hold expired may hold again, and the intents of both
// can share a batch: the new hold must not be refused as a second live one.
func TestApplyExpireThenNewHoldOfSameAccountInOneBatch(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5, 5)
	apply(t, s, reserve(1, "r1", "u1", "a"))
	got := apply(t, s, expire(2, "r1", "u1", "a"), reserve(3, "r2", "u1", "a"))
	if len(got.Refused) != 0 {
		t.Errorf("Apply(expire r1, reserve r2 of the same account) refused %v, want nothing refused", refusals(got))
	}
	wantStatus(t, s, "r1", intent.Expired)
	wantStatus(t, s, "r2", intent.Held)
	wantStock(t, s, "a", intent.Stock{Total: 5, Available: 4, Held: 1})
}

// A unit returned by an expire may be taken by a reserve later in the same
// batch, even when it was the last unit.
func TestApplyExpireFreesTheUnitAReserveInTheSameBatchTakes(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 1)
	apply(t, s, reserve(1, "r1", "u1", "a"))
	got := apply(t, s, expire(2, "r1", "u1", "a"), reserve(3, "r2", "u2", "a"))
	if len(got.Refused) != 0 {
		t.Errorf("Apply(expire r1, reserve r2 of the freed unit) refused %v, want nothing refused", refusals(got))
	}
	wantStatus(t, s, "r1", intent.Expired)
	wantStatus(t, s, "r2", intent.Held)
	wantStock(t, s, "a", intent.Stock{Total: 1, Held: 1})
}

// Postgres has the last word: a batch with more reserves than stock takes
// what there is, in stream order, and refuses the rest as NoStock.
func TestApplyRefusesReservesBeyondStock(t *testing.T) {
	t.Parallel()
	s := newStore(t, 3, 1)
	batch := []intent.Intent{
		reserve(1, "r1", "u1", "a"), reserve(2, "r2", "u2", "a"), reserve(3, "r3", "u3", "b"),
		reserve(4, "r4", "u4", "a"), reserve(5, "r5", "u5", "a"), reserve(6, "r6", "u6", "a"),
	}
	got := apply(t, s, batch...)
	if want := map[string]bool{"r5": true, "r6": true}; fmt.Sprint(refusals(got)) != fmt.Sprint(want) {
		t.Errorf("Apply(5 reserves of a, stock 3) refused %v, want %v", refusals(got), want)
	}
	if got.New != len(batch) {
		t.Errorf("Apply().New = %d, want %d", got.New, len(batch))
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Held: 3})
	wantStock(t, s, "b", intent.Stock{Total: 1, Held: 1})
	for _, id := range []string{"r1", "r2", "r4"} {
		wantStatus(t, s, id, intent.Held)
	}
	for _, id := range []string{"r5", "r6"} {
		wantStatus(t, s, id, intent.Cancelled)
	}
	var reason string
	if err := s.pool.QueryRow(context.Background(), `SELECT cancel_reason FROM reservations WHERE reservation_id = 'r6'`).Scan(&reason); err != nil || reason != "no_stock" {
		t.Errorf("cancel_reason of r6 = %q, %v; want no_stock", reason, err)
	}

	// Sold out: one more reserve is refused without touching the row.
	got = apply(t, s, reserve(7, "r7", "u7", "a"))
	if !refusals(got)["r7"] {
		t.Errorf("Apply(reserve when sold out) refused %v, want r7 NoStock", refusals(got))
	}
	wantStock(t, s, "a", intent.Stock{Total: 3, Held: 3})
}

// A second live reservation of one account is refused, not as NoStock: its
// unit is real and goes back to stock in Redis.
func TestApplyRefusesSecondLiveReservationOfAnAccount(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5, 5)
	got := apply(t, s, reserve(1, "r1", "u1", "a"), reserve(2, "r2", "u1", "b"))
	if r := refusals(got); len(r) != 1 || r["r2"] {
		t.Errorf("Apply(two holds of one account) refused %v, want r2 (not NoStock)", r)
	}
	wantStatus(t, s, "r1", intent.Held)
	wantStatus(t, s, "r2", intent.Cancelled)
	wantStock(t, s, "a", intent.Stock{Total: 5, Available: 4, Held: 1})
	wantStock(t, s, "b", intent.Stock{Total: 5, Available: 5})
}

// Applying the same batch again changes nothing, and reports again what was
// refused the first time (its Redis holds may not have been cancelled yet).
func TestApplySameBatchTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2, 2)
	batch := []intent.Intent{
		reserve(1, "r1", "u1", "a"), reserve(2, "r2", "u2", "a"), reserve(3, "r3", "u3", "a"),
		reserve(4, "r4", "u1", "b"), expire(5, "r1", "u1", "a"),
	}
	first := apply(t, s, batch...)
	second := apply(t, s, batch...)
	if second.New != 0 || second.Duplicates != len(batch) {
		t.Errorf("Apply(same batch again) = New %d, Duplicates %d; want 0 and %d", second.New, second.Duplicates, len(batch))
	}
	if fmt.Sprint(refusals(second)) != fmt.Sprint(refusals(first)) {
		t.Errorf("Apply(same batch again) refused %v, want the first call's %v", refusals(second), refusals(first))
	}
	var applied int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM applied_intents`).Scan(&applied); err != nil || applied != len(batch) {
		t.Errorf("applied_intents rows = %d, %v; want %d", applied, err, len(batch))
	}
	inv, err := s.Inventory(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	third := apply(t, s, batch[2:]...)
	if third.New != 0 {
		t.Errorf("Apply(part of the batch again).New = %d, want 0", third.New)
	}
	after, err := s.Inventory(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(inv) {
		t.Errorf("inventory after replays = %v, want unchanged %v", after, inv)
	}
}

// Writers of several origins may apply the same entries at once (one of them
// claimed the other's): each intent counts once.
func TestApplyConcurrentSameBatch(t *testing.T) {
	t.Parallel()
	s := newStore(t, 50, 50)
	var batch []intent.Intent
	for i := range 40 {
		batch = append(batch, reserve(i, fmt.Sprintf("r%d", i), fmt.Sprintf("u%d", i), "a"))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.Apply(context.Background(), "s1", batch)
			if err != nil {
				t.Errorf("Apply = %v", err)
				return
			}
			mu.Lock()
			total += got.New
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != len(batch) {
		t.Errorf("sum of Apply().New over 4 concurrent calls = %d, want %d", total, len(batch))
	}
	wantStock(t, s, "a", intent.Stock{Total: 50, Available: 10, Held: 40})
}

// The schema itself refuses an inventory row that breaks the invariant.
func TestInventoryCheckConstraint(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 1)
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE inventory SET available = available - 2, held = held + 2 WHERE sku = 'a'`,
		`UPDATE inventory SET available = available - 1 WHERE sku = 'a'`,
		`UPDATE inventory SET sold = sold + 1 WHERE sku = 'a'`,
	} {
		_, err := s.pool.Exec(ctx, q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s = %v, want a check violation (23514)", q, err)
		}
	}
	wantStock(t, s, "a", intent.Stock{Total: 1, Available: 1})
}

// An intent is known by what it does as well as by its stream id: the same
// reserve under another id (a stream id reused after a failover, or an
// intent sent again) changes nothing.
func TestApplySameIntentUnderAnotherID(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2, 2)
	apply(t, s, reserve(1, "r1", "u1", "a"))
	again := apply(t, s, reserve(7, "r1", "u1", "a"), expire(8, "r1", "u1", "a"), expire(9, "r1", "u1", "a"))
	if again.New != 1 || again.Duplicates != 2 {
		t.Errorf("Apply(reserve again, expire twice) = New %d, Duplicates %d; want 1 and 2", again.New, again.Duplicates)
	}
	wantStock(t, s, "a", intent.Stock{Total: 2, Available: 2})
	wantStatus(t, s, "r1", intent.Expired)
}
