package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// payAs settles order id's payment by payer as the orders service does:
// paid if the order holds the payer in its sale, else refunded (owed).
func payAs(t *testing.T, s *Store, id, payer string) (Order, bool) {
	t.Helper()
	o, held, err := settleAs(s, id, payer)
	if err != nil {
		t.Fatalf("pay %s as %s = %v", id, payer, err)
	}
	return o, held
}

// settleAs is payAs for any goroutine.
func settleAs(s *Store, id, payer string) (_ Order, held bool, _ error) {
	o, err := s.ChangeOrderTx(context.Background(), id, "", "", func(tx *OrderTx, o Order) (Order, error) {
		var err error
		if held, err = tx.ClaimPayer(context.Background(), payer); err != nil {
			return Order{}, err
		}
		o.Payer = payer
		if !held {
			o.Status, o.RefundStatus = OrderRefunded, RefundOwed
			return o, nil
		}
		o.Status, o.PaidAt = OrderPaid, base
		return o, nil
	})
	return o, held, err
}

// claims returns the payer claims of sale s1: payer → order.
func claims(t *testing.T, s *Store) map[string]string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT payer, order_id FROM sale_payers WHERE sale_id = 's1'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var payer, order string
		if err := rows.Scan(&payer, &order); err != nil {
			t.Fatal(err)
		}
		out[payer] = order
	}
	return out
}

func TestClaimPayerOncePerSale(t *testing.T) {
	s := newStore(t, 5, 0)
	ctx := context.Background()
	for i, id := range []string{"1", "2", "3"} {
		apply(t, s, reserve(i+1, "r"+id, "u"+id, "a"))
		order(t, s, "o"+id, "r"+id, "u"+id, "a")
	}
	tests := []struct {
		order, payer string
		held         bool
		status       string
	}{
		{"o1", "upi:scalper@okbank", true, OrderPaid},
		{"o2", "upi:scalper@okbank", false, OrderRefunded}, // another account, the same bank account
		{"o3", "upi:honest@okbank", true, OrderPaid},
	}
	for _, tt := range tests {
		got, held := payAs(t, s, tt.order, tt.payer)
		if held != tt.held || got.Status != tt.status || got.Payer != tt.payer {
			t.Errorf("pay %s as %s = held %v, %s by %q; want held %v, %s by the payer", tt.order, tt.payer, held, got.Status, got.Payer, tt.held, tt.status)
		}
	}
	want := map[string]string{"upi:scalper@okbank": "o1", "upi:honest@okbank": "o3"}
	if got := claims(t, s); len(got) != len(want) || got["upi:scalper@okbank"] != "o1" || got["upi:honest@okbank"] != "o3" {
		t.Errorf("claims = %v, want %v", got, want)
	}
	// The order that holds a payer finds it its own.
	if _, err := s.ChangeOrderTx(ctx, "o1", "", "", func(tx *OrderTx, o Order) (Order, error) {
		if held, err := tx.ClaimPayer(ctx, "upi:scalper@okbank"); err != nil || !held {
			t.Errorf("ClaimPayer(o1's own payer) = %v, %v; want true", held, err)
		}
		o.Payer = "upi:someone-else@okbank" // a recorded payer never changes
		return o, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Order(ctx, "o1"); got.Payer != "upi:scalper@okbank" || got.Status != OrderPaid {
		t.Errorf("o1 = %s by %q, want still paid by upi:scalper@okbank", got.Status, got.Payer)
	}

	// Another sale is another rule.
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := s.CreateSale(ctx, Sale{ID: "s2", Name: "Sale 2", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		HoldTTL: time.Minute, PerAccountLimit: 1, OneUnitPerPayer: true,
		SKUs: []SKU{{SKU: "a", Name: "A", PriceMinor: 100, Currency: "INR", Stock: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateOrder(ctx, Order{ID: "o9", ReservationID: "r9", Sale: "s2", SKU: "a", Account: "u1",
		AmountMinor: 100, Currency: "INR", IdempotencyKey: "k9"}); err != nil {
		t.Fatal(err)
	}
	if got, held := payAs(t, s, "o9", "upi:scalper@okbank"); !held || got.Status != OrderPaid {
		t.Errorf("pay in another sale = held %v, %s; want held, paid", held, got.Status)
	}
}

// A claim lasts only as long as its order is paid: an order that does not
// end paid, or leaves paid, lets its payer buy again.
func TestPayerClaimGoesWithTheSale(t *testing.T) {
	const payer = "upi:alice@okbank"
	claimedBy := func(t *testing.T, s *Store, want string) {
		t.Helper()
		if got := claims(t, s)[payer]; got != want {
			t.Errorf("claim on %s = %q, want %q", payer, got, want)
		}
	}
	t.Run("the change does not pay", func(t *testing.T) {
		s := newStore(t, 2, 0)
		order(t, s, "o1", "r1", "u1", "a")
		if _, err := s.ChangeOrderTx(context.Background(), "o1", "", "", func(tx *OrderTx, o Order) (Order, error) {
			if _, err := tx.ClaimPayer(context.Background(), payer); err != nil {
				return Order{}, err
			}
			o.Status, o.RefundStatus = OrderRefunded, RefundOwed // the hold was gone
			return o, nil
		}); err != nil {
			t.Fatal(err)
		}
		claimedBy(t, s, "")
	})
	t.Run("the change fails", func(t *testing.T) {
		s := newStore(t, 2, 0)
		order(t, s, "o1", "r1", "u1", "a")
		boom := errors.New("redis down")
		if _, err := s.ChangeOrderTx(context.Background(), "o1", "", "", func(tx *OrderTx, o Order) (Order, error) {
			if _, err := tx.ClaimPayer(context.Background(), payer); err != nil {
				return Order{}, err
			}
			return Order{}, boom
		}); !errors.Is(err, boom) {
			t.Fatalf("ChangeOrderTx = %v, want boom", err)
		}
		claimedBy(t, s, "")
	})
	t.Run("Postgres has no unit", func(t *testing.T) {
		s := newStore(t, 1, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"), expire(2, "r1", "u1", "a"))
		order(t, s, "o1", "r1", "u1", "a")
		if got, held := payAs(t, s, "o1", payer); !held || got.Status != OrderRefunded {
			t.Fatalf("pay of an expired reservation = held %v, %s; want held, then refunded", held, got.Status)
		}
		claimedBy(t, s, "")
	})
	t.Run("the writer refuses the pay", func(t *testing.T) {
		s := newStore(t, 1, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"))
		order(t, s, "o2", "r2", "u2", "a") // r2 has not reached Postgres, and r1 holds the only unit
		payAs(t, s, "o2", payer)
		claimedBy(t, s, "o2")
		apply(t, s, reserve(2, "r2", "u2", "a"), pay(3, "r2", "u2", "a"))
		wantOrder(t, s, "o2", OrderRefunded, RefundOwed)
		claimedBy(t, s, "")
	})
	t.Run("a rebuild finds no unit", func(t *testing.T) {
		s := newStore(t, 1, 0)
		apply(t, s, reserve(1, "r1", "u1", "a"))
		order(t, s, "o2", "r2", "u2", "a")
		payAs(t, s, "o2", payer)
		settlePaid(t, s, 0)
		wantOrder(t, s, "o2", OrderRefunded, RefundOwed)
		claimedBy(t, s, "")
	})
}

// Two orders claiming one payer at once: the second waits for the first's
// transaction and holds the payer only if the first does not commit it.
func TestConcurrentClaimsOfOnePayer(t *testing.T) {
	const payer = "upi:scalper@okbank"
	for _, firstPays := range []bool{true, false} {
		name := map[bool]string{true: "first pays", false: "first does not pay"}[firstPays]
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 2, 0)
			order(t, s, "o1", "r1", "u1", "a")
			order(t, s, "o2", "r2", "u2", "a")
			claimed, finish := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(finish) })
			t.Cleanup(release) // a failing test must not leave o1's transaction open
			firstDone := make(chan error, 1)
			go func() {
				_, err := s.ChangeOrderTx(context.Background(), "o1", "", "", func(tx *OrderTx, o Order) (Order, error) {
					held, err := tx.ClaimPayer(context.Background(), payer)
					if err != nil || !held {
						close(claimed)
						return Order{}, errors.Join(err, errors.New("o1 did not hold the payer"))
					}
					close(claimed)
					<-finish // as if Redis were selling the unit now
					if !firstPays {
						o.Status, o.RefundStatus = OrderRefunded, RefundOwed
						return o, nil
					}
					o.Status, o.PaidAt = OrderPaid, base
					return o, nil
				})
				firstDone <- err
			}()
			<-claimed
			type result struct {
				o    Order
				held bool
				err  error
			}
			second := make(chan result, 1)
			go func() {
				o, held, err := settleAs(s, "o2", payer)
				second <- result{o, held, err}
			}()
			select {
			case r := <-second:
				t.Fatalf("o2 settled (held %v, %s) while o1's claim was open; want it to wait", r.held, r.o.Status)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			if err := <-firstDone; err != nil {
				t.Fatalf("o1: %v", err)
			}
			r := <-second
			if r.err != nil {
				t.Fatalf("o2: %v", r.err)
			}
			if r.held != !firstPays {
				t.Errorf("o2 held the payer = %v, want %v", r.held, !firstPays)
			}
			want := "o1"
			if !firstPays {
				want = "o2"
			}
			if got := claims(t, s)[payer]; got != want {
				t.Errorf("claim = %q, want %q", got, want)
			}
		})
	}
}
