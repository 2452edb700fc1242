package checkout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// While a sale is rebuilt, every script that checks the flag answers
// codeRebuilding and changes nothing; once the flag is gone the same calls
// go through. A hold listed as due but extended meanwhile is left held.
func TestRebuildingStopsEveryScript(t *testing.T) {
	t.Parallel()
	s := newStore(t, 3)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	reserve := func(account string) ReserveResult {
		t.Helper()
		res, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: account, TokenID: "j-" + account,
			IdempotencyKey: "k-" + account, HoldTTL: time.Minute})
		if err != nil {
			t.Fatalf("Reserve(%s) = %+v, %v", account, res, err)
		}
		return res
	}
	first, second := reserve("u1"), reserve("u2")
	due, notDue := Hold{ID: first.ReservationID, SKU: "a", Account: "u1"}, Hold{ID: second.ReservationID, SKU: "a", Account: "u2"}
	// Make the first hold due and list the second as due although its own
	// expiry (the one release.lua trusts) is a minute away.
	if err := s.rdb.HSet(ctx, s.keys.Reservation("s1", due.ID), "expires_ms", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.ZAdd(ctx, s.keys.Holds("s1"), redis.Z{Score: 1, Member: due.ID}, redis.Z{Score: 1, Member: notDue.ID}).Err(); err != nil {
		t.Fatal(err)
	}

	token, err := s.BeginRebuild(ctx, "s1", time.Minute)
	if err != nil {
		t.Fatalf("BeginRebuild = %v", err)
	}
	if got := reserve("u3"); got.Outcome != Rebuilding {
		t.Errorf("Reserve while rebuilding = %v, want %v", got.Outcome, Rebuilding)
	}
	if got, err := s.ExtendForPayment(ctx, "s1", notDue, "o2", time.Minute); !errors.Is(err, ErrRebuildInProgress) {
		t.Errorf("ExtendForPayment while rebuilding = %+v, %v; want ErrRebuildInProgress", got, err)
	}
	if got, err := s.Pay(ctx, "s1", notDue, "o2"); !errors.Is(err, ErrRebuildInProgress) {
		t.Errorf("Pay while rebuilding = %v, %v; want ErrRebuildInProgress", got, err)
	}
	if got, err := s.PaymentFailed(ctx, "s1", notDue); !errors.Is(err, ErrRebuildInProgress) {
		t.Errorf("PaymentFailed while rebuilding = %v, %v; want ErrRebuildInProgress", got, err)
	}
	if n, err := s.ReleaseDue(ctx, "s1", 10); n != 0 || err != nil {
		t.Errorf("ReleaseDue while rebuilding = %d, %v; want 0", n, err)
	}
	for _, h := range []Hold{due, notDue} {
		if got, err := s.Reservation(ctx, "s1", h.ID); err != nil || got.Status != intent.Held {
			t.Errorf("Reservation(%s) after the rebuilding calls = %+v, %v; want held", h.Account, got, err)
		}
	}
	if err := s.EndRebuild(ctx, "s1", token); err != nil {
		t.Fatalf("EndRebuild = %v", err)
	}

	if n, err := s.ReleaseDue(ctx, "s1", 10); n != 1 || err != nil {
		t.Errorf("ReleaseDue after the rebuild = %d, %v; want 1 (the due hold only)", n, err)
	}
	for h, want := range map[Hold]intent.Status{due: intent.Expired, notDue: intent.Held} {
		if got, err := s.Reservation(ctx, "s1", h.ID); err != nil || got.Status != want {
			t.Errorf("Reservation(%s) after ReleaseDue = %+v, %v; want %s", h.Account, got, err, want)
		}
	}
	if got, err := s.Pay(ctx, "s1", notDue, "o2"); got != PaidNow || err != nil {
		t.Errorf("Pay after the rebuild = %v, %v; want PaidNow", got, err)
	}
	if got := reserve("u3"); got.Outcome != Created {
		t.Errorf("Reserve after the rebuild = %v, want %v", got.Outcome, Created)
	}
}
