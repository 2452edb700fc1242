package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// drained reports whether every SKU's intents are applied and Postgres holds
// wantHeld units of it.
func drained(wantHeld int64) func(map[string]origintest.LedgerSKU) bool {
	return func(l map[string]origintest.LedgerSKU) bool {
		for _, s := range l {
			if s.PendingIntents != 0 || s.DB.Held != wantHeld {
				return false
			}
		}
		return len(l) > 0
	}
}

func instance(name string) func(*app.Config) {
	return func(c *app.Config) { c.Instance = name }
}

// A stampede over three origin instances that share Redis and Postgres sells
// exactly the stock: 100 of 1,000 shoppers hold a unit, the rest hear
// sold_out, and once the writers drain Postgres and Redis agree.
func TestReserveStampedeOverThreeOrigins(t *testing.T) {
	t.Parallel()
	const shoppers, stock = 1000, 100
	env := origintest.NewEnv(t)
	origins := []*origintest.Origin{
		origintest.StartOrigin(t, env, instance("origin-a")),
		origintest.StartOrigin(t, env, instance("origin-b")),
		origintest.StartOrigin(t, env, instance("origin-c")),
	}
	sale := "stampede-" + testenv.RandomHex(3)
	origins[0].MustCreateSale(t, origintest.OpenSale(sale, stock, 600))

	tokens := make([]string, shoppers)
	for i := range tokens {
		tokens[i] = origins[0].AdmissionToken(t, sale, fmt.Sprintf("acct-%04d", i))
	}
	type answer struct {
		status int
		reply  origintest.Reply
	}
	answers := make([]answer, shoppers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// A shopper told please_wait (the machine too busy to journal
			// the hold in time) presses again with the same token, as the
			// page does, and finds the same hold.
			status, reply := origins[i%len(origins)].Reserve(t, sale, tokens[i], "sku-1", fmt.Sprintf("idem-%d", i))
			for try := 0; status == 503 && reply.Error == "please_wait" && try < 10; try++ {
				time.Sleep(200 * time.Millisecond)
				status, reply = origins[i%len(origins)].Reserve(t, sale, tokens[i], "sku-1", fmt.Sprintf("idem-%d", i))
				if status == 200 {
					status = 201 // the hold it was granted, now journaled
				}
			}
			answers[i] = answer{status, reply}
		}()
	}
	close(start)
	wg.Wait()

	created, soldOut := 0, 0
	ids := map[string]int{}
	for i, a := range answers {
		switch {
		case a.status == 201 && a.reply.Status == "held" && a.reply.ReservationID != "":
			created++
			if j, dup := ids[a.reply.ReservationID]; dup {
				t.Errorf("shoppers %d and %d both got reservation %s", j, i, a.reply.ReservationID)
			}
			ids[a.reply.ReservationID] = i
		case a.status == 409 && a.reply.Error == "sold_out":
			soldOut++
		default:
			t.Errorf("Reserve(shopper %d) = %d %+v, want 201 held or 409 sold_out", i, a.status, a.reply)
		}
	}
	if created != stock || soldOut != shoppers-stock {
		t.Fatalf("Reserve x%d over 3 origins = %d created, %d sold_out; want %d and %d", shoppers, created, soldOut, stock, shoppers-stock)
	}

	l := origins[1].WaitLedger(t, sale, 20*time.Second, drained(stock))["sku-1"]
	want := origintest.LedgerSKU{SKU: "sku-1", Total: stock,
		Redis: origintest.Counts{Held: stock}, DB: origintest.Counts{Held: stock}}
	if l != want {
		t.Errorf("ledger after the stampede = %+v, want %+v", l, want)
	}
	inv := origintest.Inventory(t, env, sale)["sku-1"]
	if inv.Total != stock || inv.Available != 0 || inv.Held != stock || inv.Sold != 0 {
		t.Errorf("Postgres inventory = %+v, want total %d, available 0, held %d, sold 0", inv, stock, stock)
	}
	origintest.CheckInvariant(t, env, sale)
	if got := origintest.ReservationStatuses(t, env, sale); len(got) != 1 || got["held"] != stock {
		t.Errorf("Postgres reservations by status = %v, want only held: %d", got, stock)
	}

	ctx := context.Background()
	var accounts, matching int
	if err := env.DB.QueryRow(ctx, `SELECT count(DISTINCT account_id), count(*) FILTER (WHERE reservation_id = ANY($2))
		FROM reservations WHERE sale_id = $1`, sale, keys(ids)).Scan(&accounts, &matching); err != nil {
		t.Fatal(err)
	}
	if accounts != stock || matching != stock {
		t.Errorf("Postgres reservations: %d distinct accounts, %d matching the 201 answers; want %d and %d", accounts, matching, stock, stock)
	}
	stream := origins[0].App.Checkout.Keys().Intents(sale)
	if n := env.Redis.XLen(ctx, stream).Val(); n != stock {
		t.Errorf("XLEN intents = %d, want %d (one reserve intent per unit taken)", n, stock)
	}
	if p := env.Redis.XPending(ctx, stream, "writers").Val(); p == nil || p.Count != 0 {
		t.Errorf("XPENDING intents writers = %+v, want nothing pending", p)
	}
	snap := origins[2].Snapshot(t, sale)
	if snap.Status != "sold_out" || !snap.SoldOut || snap.Final {
		t.Errorf("snapshot = %+v, want status sold_out, sold_out true, final false (holds may come back)", snap)
	}
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// One account cannot hold two units: concurrent reserves with separate
// admission tokens get one hold between them, idempotency keys and burned
// tokens replay their first answer, and a burned token stays burned after
// its hold has expired and stock is back.
func TestReserveOneAccountGetsOneHold(t *testing.T) {
	t.Parallel()
	const stock = 5
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env)
	sale := "one-acct-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, stock, 3))
	const account = "acct-one"

	const n = 20
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = o.AdmissionToken(t, sale, account)
	}
	statuses := make([]int, n)
	replies := make([]origintest.Reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], replies[i] = o.Reserve(t, sale, tokens[i], "sku-1", fmt.Sprintf("k-%d", i))
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, s := range statuses {
		if s == 201 {
			if winner >= 0 {
				t.Fatalf("Reserve(token %d) = 201 and Reserve(token %d) = 201; one account got two holds", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("Reserve x%d for one account = %v, want exactly one 201", n, statuses)
	}
	id := replies[winner].ReservationID
	for i := range n {
		if i == winner {
			continue
		}
		if statuses[i] != 200 || replies[i].ReservationID != id || replies[i].Status != "held" {
			t.Errorf("Reserve(token %d) = %d %+v, want 200 with the held reservation %s", i, statuses[i], replies[i], id)
		}
	}

	// The winning idempotency key with a new token replays the reservation.
	if s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, account), "sku-1", fmt.Sprintf("k-%d", winner)); s != 200 || r.ReservationID != id {
		t.Errorf("Reserve(new token, same idempotency key) = %d %+v, want 200 %s", s, r, id)
	}
	// The burned token with a new idempotency key replays it too.
	if s, r := o.Reserve(t, sale, tokens[winner], "sku-1", "k-new"); s != 200 || r.ReservationID != id {
		t.Errorf("Reserve(burned token, new idempotency key) = %d %+v, want 200 %s", s, r, id)
	}

	// Let the 3 s hold run out and the sweeper return the unit.
	user := o.UserToken(t, account)
	testenv.Eventually(t, 10*time.Second, "Reservation("+id+") expired", func() bool {
		s, r := o.Reservation(t, user, id)
		if s == 200 && r.Status == "expired" {
			return true
		}
		if s != 200 || r.Status != "held" {
			t.Fatalf("Reservation(%s) = %d %+v, want 200 held until it expires, then expired", id, s, r)
		}
		return false
	})
	if snap := o.Snapshot(t, sale); len(snap.SKUs) != 1 || snap.SKUs[0].AvailableHint != stock {
		t.Fatalf("snapshot after expiry = %+v, want available_hint %d", snap, stock)
	}

	// Stock is available, yet the burned token takes nothing new.
	s, r := o.Reserve(t, sale, tokens[winner], "sku-1", "k-after-expiry")
	if s != 200 || r.ReservationID != id || r.Status != "expired" {
		t.Errorf("Reserve(burned token after expiry) = %d %+v, want 200 with %s expired", s, r, id)
	}
	s, r = o.Reserve(t, sale, o.AdmissionToken(t, sale, account), "sku-1", fmt.Sprintf("k-%d", winner))
	if s != 200 || r.ReservationID != id || r.Status != "expired" {
		t.Errorf("Reserve(new token, old idempotency key after expiry) = %d %+v, want 200 with %s expired", s, r, id)
	}
	if l := o.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: stock}) {
		t.Errorf("Redis counters after replays = %+v, want available %d, held 0", l.Redis, stock)
	}

	// An unknown SKU is 404, and takes nothing.
	if s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "acct-other"), "no-such-sku", "k"); s != 404 || r.Error != "unknown_sku" {
		t.Errorf("Reserve(unknown sku) = %d %+v, want 404 unknown_sku", s, r)
	}

	// The hold gone, a fresh admission lets the account hold a unit again.
	s, r2 := o.Reserve(t, sale, o.DevAdmissionToken(t, sale, account), "sku-1", "k-second")
	if s != 201 || r2.ReservationID == id {
		t.Fatalf("Reserve(fresh token after expiry) = %d %+v, want 201 with a new reservation", s, r2)
	}
	l := o.WaitLedger(t, sale, 15*time.Second, drained(1))["sku-1"]
	want := origintest.LedgerSKU{SKU: "sku-1", Total: stock,
		Redis: origintest.Counts{Available: stock - 1, Held: 1}, DB: origintest.Counts{Available: stock - 1, Held: 1}}
	if l != want {
		t.Errorf("ledger = %+v, want %+v", l, want)
	}
	if got := origintest.ReservationStatuses(t, env, sale); got["expired"] != 1 || got["held"] != 1 || len(got) != 2 {
		t.Errorf("Postgres reservations by status = %v, want expired 1, held 1", got)
	}
	if s, r := o.Reservation(t, user, r2.ReservationID); s != 200 || r.Status != "held" {
		t.Errorf("Reservation(%s) = %d %+v, want 200 held", r2.ReservationID, s, r)
	}
	origintest.CheckInvariant(t, env, sale)
}

// On a sale of one unit, one account cannot keep the unit by holding it
// again and again: after MaxHoldsPerAccount holds (2 by default) have run
// out it is answered 403 hold_limit_reached, and the next shopper gets it.
func TestReserveHoldsPerAccountCapped(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env)
	sale := "hold-cap-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 1))
	const hoarder = "acct-hoarder"
	user := o.UserToken(t, hoarder)
	for i := range app.DefaultConfig().MaxHoldsPerAccount {
		s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, hoarder), "sku-1", fmt.Sprintf("k-%d", i))
		if s != 201 {
			t.Fatalf("hold %d of %s = %d %+v, want 201", i+1, hoarder, s, r)
		}
		testenv.Eventually(t, 10*time.Second, "Reservation("+r.ReservationID+") expired", func() bool {
			s, got := o.Reservation(t, user, r.ReservationID)
			return s == 200 && got.Status == "expired"
		})
	}
	if s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, hoarder), "sku-1", "k-again"); s != 403 || r.Error != "hold_limit_reached" {
		t.Errorf("a third hold of %s = %d %+v, want 403 hold_limit_reached", hoarder, s, r)
	}
	if s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "acct-next"), "sku-1", "k"); s != 201 {
		t.Errorf("the next shopper's hold = %d %+v, want 201", s, r)
	}
}
