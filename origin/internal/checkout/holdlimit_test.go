package checkout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// An account may take a hold again after one runs out, but only MaxHolds
// times in a sale: on a sale of one unit, one account must not hold it over
// and over while the line waits.
func TestReserveHoldLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	attempt := 0
	reserve := func(account string) ReserveResult {
		t.Helper()
		attempt++
		got, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: account, TokenID: fmt.Sprintf("j%d", attempt),
			IdempotencyKey: fmt.Sprintf("k%d", attempt), HoldTTL: 50 * time.Millisecond, MaxHolds: 2})
		if err != nil {
			t.Fatalf("Reserve(%s) = %v", account, err)
		}
		return got
	}
	expire := func(res ReserveResult) {
		t.Helper()
		time.Sleep(time.Until(res.ExpiresAt) + 20*time.Millisecond)
		if n, err := s.ReleaseDue(ctx, "s1", 10); err != nil || n != 1 {
			t.Fatalf("ReleaseDue = %d, %v; want 1", n, err)
		}
	}
	for i := 1; i <= 2; i++ {
		got := reserve("u1")
		if got.Outcome != Created {
			t.Fatalf("hold %d of u1 = %v, want created", i, got.Outcome)
		}
		expire(got)
	}
	if got := reserve("u1"); got.Outcome != HoldLimitReached {
		t.Fatalf("third hold of u1 = %v, want %v", got.Outcome, HoldLimitReached)
	}
	if got := reserve("u2"); got.Outcome != Created {
		t.Fatalf("first hold of u2 after u1's cap = %v, want created", got.Outcome)
	}

	// A rebuild (Redis lost the account hashes) puts the count back from the
	// burned tokens: u1 stays at its cap, u2 has one of its two.
	if err := s.rdb.Del(ctx, s.keys.Account("s1", "u1"), s.keys.Account("s1", "u2")).Err(); err != nil {
		t.Fatal(err)
	}
	var burned []Burned
	for _, acct := range []string{"u1", "u1", "u2"} {
		burned = append(burned, Burned{Account: acct, TokenID: fmt.Sprintf("jb%d", len(burned)),
			IdempotencyKey: fmt.Sprintf("kb%d", len(burned)), ReservationID: fmt.Sprintf("r%d", len(burned))})
	}
	burned = append(burned, Burned{Account: "u2", TokenID: "jb-repeat", IdempotencyKey: "kb-repeat", ReservationID: "r2"})
	if err := s.Rebuild(ctx, "s1", "e2", map[string]intent.Stock{"a": {Total: 1, Available: 1}}, nil, nil, burned); err != nil {
		t.Fatalf("Rebuild = %v", err)
	}
	for account, want := range map[string]string{"u1": "2", "u2": "1"} {
		if got, err := s.rdb.HGet(ctx, s.keys.Account("s1", account), acctHolds).Result(); err != nil || got != want {
			t.Errorf("after the rebuild, %s's %s = %q, %v; want %s", account, acctHolds, got, err, want)
		}
	}
	if got := reserve("u1"); got.Outcome != HoldLimitReached {
		t.Errorf("u1 after the rebuild = %v, want %v", got.Outcome, HoldLimitReached)
	}
}
