package sales

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/intent"
)

func TestReserve(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sale := f.openSale("s1", 1)
	sale.HoldTTL = time.Second // the shortest a sale takes
	f.create(t, sale)
	n := 0
	reserve := func(account, sku string) (Reserved, error) {
		n++
		return f.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: sku, Account: account,
			TokenID: fmt.Sprintf("j%d", n), IdempotencyKey: fmt.Sprintf("k%d", n)})
	}
	first, err := reserve("u1", "a")
	if err != nil || !first.Created || first.Reservation.Status != intent.Held || first.Reservation.Sale != "s1" ||
		first.Reservation.Account != "u1" || first.Reservation.ExpiresAt.IsZero() {
		t.Fatalf("first Reserve = %+v, %v; want a created hold of u1", first, err)
	}
	again, err := reserve("u1", "a")
	if err != nil || again.Created || again.Reservation.ID != first.Reservation.ID || again.Reservation.Status != intent.Held {
		t.Errorf("repeat Reserve = %+v, %v; want the same hold, not created", again, err)
	}
	for _, c := range []struct {
		name, account, sku string
		want               error
	}{
		{"another account, no stock left", "u2", "a", ErrSoldOut},
		{"a SKU the sale does not have", "u2", "zz", ErrUnknownSKU},
	} {
		if _, err := reserve(c.account, c.sku); !errors.Is(err, c.want) {
			t.Errorf("Reserve(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := f.Reserve(ctx, ReserveRequest{Sale: "nope", SKU: "a", Account: "u1", TokenID: "j", IdempotencyKey: "k"}); !errors.Is(err, catalog.ErrUnknownSale) {
		t.Errorf("Reserve(unknown sale) = %v, want %v", err, catalog.ErrUnknownSale)
	}

	// The hold runs out: u1 may hold once more (MaxHoldsPerAccount is 2),
	// then no more, while u2 still may.
	releaseDue := func() {
		t.Helper()
		time.Sleep(1100 * time.Millisecond)
		if n, err := f.store.ReleaseDue(ctx, "s1", 10); err != nil || n != 1 {
			t.Fatalf("ReleaseDue = %d, %v; want 1", n, err)
		}
	}
	releaseDue()
	if r, err := reserve("u1", "a"); err != nil || !r.Created {
		t.Fatalf("u1's second hold = %+v, %v; want created", r, err)
	}
	releaseDue()
	if _, err := reserve("u1", "a"); !errors.Is(err, ErrHoldLimitReached) {
		t.Errorf("u1's third hold = %v, want %v", err, ErrHoldLimitReached)
	}
	if r, err := reserve("u2", "a"); err != nil || !r.Created {
		t.Errorf("u2's hold after u1's cap = %+v, %v; want created", r, err)
	}

	// Outside the sale's window nothing is taken.
	for _, c := range []struct {
		name string
		now  time.Time
		want error
	}{
		{"before the start", sale.StartsAt.Add(-time.Second), ErrSaleNotOpen},
		{"at the end", sale.EndsAt, ErrSaleClosed},
	} {
		f.opts.Clock = clock.NewFake(c.now)
		if _, err := reserve("u3", "a"); !errors.Is(err, c.want) {
			t.Errorf("Reserve %s = %v, want %v", c.name, err, c.want)
		}
	}
}
