package checkout

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/commandlog"
)

// A repeated reserve is answered, and journaled again, from the one script
// run: the reply carries the reservation as Redis holds it, and no second
// command reads it.
func TestReserveExistingCarriesTheReservation(t *testing.T) {
	t.Parallel()
	s := newStore(t, 2)
	j := &journal{}
	r := NewReserver(s, ReserverOptions{Journal: j})
	defer r.Close()
	ctx := context.Background()
	req := func(account, jti, idem, sku string) ReserveRequest {
		return ReserveRequest{Sale: "s1", SKU: sku, Account: account, TokenID: jti, IdempotencyKey: idem, HoldTTL: time.Minute}
	}
	first, err := r.Reserve(ctx, req("u1", "j1", "k1", "a"))
	if err != nil || first.Outcome != Created {
		t.Fatalf("Reserve(u1) = %+v, %v; want created", first, err)
	}
	if _, err := s.ExtendForPayment(ctx, "s1", Hold{ID: first.ReservationID, SKU: "a", Account: "u1"}, "o1", time.Minute); err != nil {
		t.Fatalf("ExtendForPayment = %v", err)
	}
	stored, err := s.Reservation(ctx, "s1", first.ReservationID)
	if err != nil || stored.OrderID != "o1" {
		t.Fatalf("Reservation(%s) = %+v, %v; want it with order o1", first.ReservationID, stored, err)
	}
	// A repeat journals the first reserve's grant, with the hold's expiry
	// as it stands now.
	wantGrant := j.grants[first.ReservationID]
	wantGrant.ExpiresAt = stored.ExpiresAt
	delete(j.grants, first.ReservationID)

	log := commandlog.Attach(s.rdb)
	for _, c := range []struct {
		name string
		req  ReserveRequest
	}{
		{"same token", req("u1", "j1", "k-other", "a")},
		{"same idempotency key", req("u1", "j-new", "k1", "a")},
		{"same account, live hold", req("u1", "j-new2", "k-new", "b")},
	} {
		got, err := r.Reserve(ctx, c.req)
		if err != nil || got.Outcome != Existing || got.ReservationID != first.ReservationID {
			t.Fatalf("Reserve(%s) = %+v, %v; want existing %s", c.name, got, err, first.ReservationID)
		}
		if got.Reservation == nil || *got.Reservation != stored {
			t.Errorf("Reserve(%s).Reservation = %+v, want %+v as Redis holds it", c.name, got.Reservation, stored)
		}
		if trips := log.Take(); !slices.EqualFunc(trips, [][]string{{"evalsha"}}, slices.Equal) {
			t.Errorf("Reserve(%s) made round trips %v, want the one script run", c.name, trips)
		}
		if g := j.grants[first.ReservationID]; g != wantGrant {
			t.Errorf("Reserve(%s) journaled %+v, want the first reserve's grant %+v", c.name, g, wantGrant)
		}
		delete(j.grants, first.ReservationID)
	}

	// Once Redis no longer holds the hash, the reply says so: the caller
	// asks the ledger, and the journal has nothing to add.
	if err := s.rdb.Del(ctx, s.keys.Reservation("s1", first.ReservationID)).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := r.Reserve(ctx, req("u1", "j1", "k1", "a"))
	if err != nil || got.Outcome != Existing || got.ReservationID != first.ReservationID || got.Reservation != nil {
		t.Errorf("Reserve(hash gone) = %+v, %v; want existing %s without its fields", got, err, first.ReservationID)
	}
	if g, ok := j.grants[first.ReservationID]; ok {
		t.Errorf("Reserve(hash gone) journaled %+v, want nothing", g)
	}
}
