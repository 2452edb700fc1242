package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/workers"
	"github.com/flashgate/flashgate/origin/origintest"
)

type saleList []string

func (s saleList) SaleIDs() []string { return s }

// Expired holds come back exactly once however many sweepers race for them:
// two sweepers on two origins' Redis clients release all 50 holds of a 2 s
// sale between them, no hold before its expiry, and the writers carry the
// expiries into Postgres.
func TestHoldsExpireOnceUnderRacingSweepers(t *testing.T) {
	t.Parallel()
	const stock = 50
	env := origintest.NewEnv(t)
	noSweep := func(c *app.Config) { c.SweepInterval = time.Hour } // the test's own sweepers race instead
	a := origintest.StartOrigin(t, env, instance("origin-a"), noSweep)
	b := origintest.StartOrigin(t, env, instance("origin-b"), noSweep)
	sale := "sweep-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, stock, 2))

	ids := make([]string, stock)
	firstExpiry := time.Time{}
	for i := range stock {
		account := fmt.Sprintf("acct-%02d", i)
		s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, account), "sku-1", "k")
		if s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
		ids[i] = r.ReservationID
		if firstExpiry.IsZero() || r.ExpiresAt.Before(firstExpiry) {
			firstExpiry = r.ExpiresAt
		}
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Held: stock}) {
		t.Fatalf("Redis after %d reserves = %+v, want held %d", stock, l.Redis, stock)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		released     [2]int
		firstRelease time.Time
	)
	for i, o := range []*origintest.Origin{a, b} {
		sw := workers.NewSweeper(o.App.Checkout, saleList{sale}, workers.SweeperOptions{Batch: 7}, quiet, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := sw.Sweep(ctx)
				if n > 0 {
					mu.Lock()
					if firstRelease.IsZero() {
						firstRelease = time.Now()
					}
					released[i] += n
					mu.Unlock()
				}
			}
		}()
	}
	// Sweep until every unit is back, then a little longer for stragglers.
	testenv.Eventually(t, 15*time.Second, "Redis held 0 after the holds expired", func() bool {
		return a.Ledger(t, sale)["sku-1"].Redis.Held <= 0
	})
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()

	if got := released[0] + released[1]; got != stock {
		t.Errorf("released by sweepers = %d + %d = %d, want %d: each hold exactly once", released[0], released[1], got, stock)
	}
	// Redis TIME and the test's clock are the same machine's.
	if firstRelease.Before(firstExpiry.Add(-50 * time.Millisecond)) {
		t.Errorf("first release at %v, before the first hold expired at %v", firstRelease, firstExpiry)
	}
	t.Logf("sweeper releases: %v", released)
	if l := a.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: stock}) {
		t.Errorf("Redis after the sweep = %+v, want available %d, held 0", l.Redis, stock)
	}
	expires := 0
	for _, m := range env.Redis.XRange(context.Background(), a.App.Checkout.Keys().Intents(sale), "-", "+").Val() {
		if m.Values["kind"] == "expire" {
			expires++
		}
	}
	if expires != stock {
		t.Errorf("expire intents in the stream = %d, want %d", expires, stock)
	}

	l := b.WaitLedger(t, sale, 15*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		s := l["sku-1"]
		return s.PendingIntents == 0 && s.DB.Available == stock
	})["sku-1"]
	want := origintest.LedgerSKU{SKU: "sku-1", Total: stock,
		Redis: origintest.Counts{Available: stock}, DB: origintest.Counts{Available: stock}}
	if l != want {
		t.Errorf("ledger = %+v, want %+v", l, want)
	}
	if got := origintest.ReservationStatuses(t, env, sale); len(got) != 1 || got["expired"] != stock {
		t.Errorf("Postgres reservations by status = %v, want only expired: %d", got, stock)
	}
	origintest.CheckInvariant(t, env, sale)

	// The owner sees the expiry, on either origin; nobody else sees the hold.
	owner, other := a.UserToken(t, "acct-07"), a.UserToken(t, "acct-08")
	for _, o := range []*origintest.Origin{a, b} {
		if s, r := o.Reservation(t, owner, ids[7]); s != 200 || r.Status != "expired" || r.ReservationID != ids[7] || r.SKU != "sku-1" {
			t.Errorf("Reservation(%s, owner) via %s = %d %+v, want 200 expired", ids[7], o.Config.Instance, s, r)
		}
		if s, r := o.Reservation(t, other, ids[7]); s != 404 || r.Error != "unknown_reservation" {
			t.Errorf("Reservation(%s, another account) = %d %+v, want 404 unknown_reservation", ids[7], s, r)
		}
	}
	if s, r := a.Reservation(t, "", ids[7]); s != 401 || r.Error != "missing_token" {
		t.Errorf("Reservation(%s, no token) = %d %+v, want 401 missing_token", ids[7], s, r)
	}
	if s, r := a.Reservation(t, owner+"x", ids[7]); s != 401 || r.Error != "invalid_token" {
		t.Errorf("Reservation(%s, tampered token) = %d %+v, want 401 invalid_token", ids[7], s, r)
	}
	if s, r := a.Reservation(t, owner, "r_0000000000000000_"+sale); s != 404 || r.Error != "unknown_reservation" {
		t.Errorf("Reservation(made-up id) = %d %+v, want 404 unknown_reservation", s, r)
	}
	// Once Redis has let the reservation go, Postgres answers.
	if err := env.Redis.Del(context.Background(), a.App.Checkout.Keys().Reservation(sale, ids[7])).Err(); err != nil {
		t.Fatal(err)
	}
	if s, r := b.Reservation(t, owner, ids[7]); s != 200 || r.Status != "expired" {
		t.Errorf("Reservation(%s, owner) from Postgres = %d %+v, want 200 expired", ids[7], s, r)
	}
	if s, r := b.Reservation(t, other, ids[7]); s != 404 {
		t.Errorf("Reservation(%s, another account) from Postgres = %d %+v, want 404", ids[7], s, r)
	}
}
