package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/origintest"
)

// checkOften makes an origin look for lost sales every 100 ms.
func checkOften(c *app.Config) { c.RedisCheckInterval = 100 * time.Millisecond }

// Redis loses everything while the order writer has not applied the holds
// it granted (as when Postgres is down, or the writer behind): every 201 is
// still kept, because it was journaled before it was answered. The loss is
// found by the missing epoch, reported in the ledger, and the rebuild puts
// the holds back with the tokens they burned.
func TestGrantedHoldsSurviveRedisLosingTheSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := origintest.NewEnv(t)
	a := origintest.StartOrigin(t, env, instance("origin-a"), checkOften)
	sale := "keep-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	keys := checkout.NewKeys(env.Prefix)

	// The writer is kept off the stream: nothing granted reaches the ledger
	// through it before Redis loses it.
	if err := env.Redis.Set(ctx, keys.WriterLease(sale), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	held := map[string]string{} // account -> reservation
	admission := map[string]string{}
	for i := range 4 {
		account := fmt.Sprintf("acct-%d", i)
		admission[account] = a.AdmissionToken(t, sale, account)
		s, r := a.Reserve(t, sale, admission[account], "sku-1", "k")
		if s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
		held[account] = r.ReservationID
	}
	d := a.Durability(t, sale)
	if d.Epoch == "" || d.RedisEpoch != d.Epoch || d.RedisSeq != 4 || d.JournalSeq != 4 {
		t.Fatalf("durability after 4 reserves = %+v, want one epoch in both and sequence 4 in both", d)
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.DB.Held != 0 || l.PendingIntents != 4 {
		t.Fatalf("ledger before the loss = %+v, want nothing applied and 4 pending", l)
	}

	// Redis loses every key of the sale (a restart without persistence, a
	// FLUSHALL), the writer's lease with them.
	if _, err := testenv.LoseKeys(ctx, env.Redis, env.Prefix); err != nil {
		t.Fatal(err)
	}
	// The view reads Postgres, then Redis, then the losses: read during the
	// rebuild it can show the loss rebuilt and Redis not yet written.
	d = a.WaitDurability(t, sale, 15*time.Second, func(d origintest.Durability) bool {
		return len(d.Losses) == 1 && d.Losses[0].RebuiltAt != nil && d.RedisEpoch != ""
	})
	loss := d.Losses[0]
	if loss.Kind != "state_missing" || loss.JournalSeq != 4 || loss.Restored != 4 || loss.Lost != 0 {
		t.Fatalf("loss = %+v, want state_missing at journal sequence 4, 4 restored, 0 lost", loss)
	}
	if d.Restored != 4 || d.Lost != 0 || d.RedisEpoch != d.Epoch || d.RedisEpoch == "" {
		t.Fatalf("durability after the rebuild = %+v, want 4 restored, 0 lost, a new epoch in both", d)
	}
	l := a.Ledger(t, sale)["sku-1"]
	want := origintest.Counts{Available: 6, Held: 4}
	if l.DB != want || l.Redis != want || l.Drift != (origintest.Counts{}) {
		t.Fatalf("ledger after the rebuild = %+v, want db and redis available 6 held 4, no drift", l)
	}
	for account, id := range held {
		if s, r := a.Reservation(t, a.UserToken(t, account), id); s != 200 || r.Status != "held" {
			t.Fatalf("Reservation(%s) after the loss = %d %+v, want 200 held", account, s, r)
		}
		// The burned token still finds its hold, under any idempotency key.
		if s, r := a.Reserve(t, sale, admission[account], "sku-1", "other-key"); s != 200 || r.ReservationID != id {
			t.Fatalf("Reserve(%s, used token) after the loss = %d %+v, want 200 with %s", account, s, r, id)
		}
	}
	// The sale goes on, numbered in the new epoch.
	if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, "acct-new"), "sku-1", "k"); s != 201 {
		t.Fatalf("Reserve(acct-new) after the loss = %d %+v, want 201", s, r)
	}
	if d := a.Durability(t, sale); d.RedisSeq != 1 || d.JournalSeq != 1 {
		t.Fatalf("durability after one more reserve = %+v, want sequence 1 in both", d)
	}
	a.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].PendingIntents == 0 && l["sku-1"].DB.Held == 5
	})
	origintest.CheckInvariant(t, env, sale)
}

// A burned admission token whose hold has ended stays burned after Redis
// loses its data: replaying it (with a new idempotency key) finds the old
// reservation instead of taking a new unit.
func TestBurnedTokensSurviveRedisLosingTheSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := origintest.NewEnv(t)
	a := origintest.StartOrigin(t, env, instance("origin-a"), checkOften, func(c *app.Config) {
		c.SweepInterval = 50 * time.Millisecond
	})
	sale := "burn-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 5, 1)) // holds last 1 s
	token := a.AdmissionToken(t, sale, "acct-1")
	s, r := a.Reserve(t, sale, token, "sku-1", "k")
	if s != 201 {
		t.Fatalf("Reserve = %d %+v, want 201", s, r)
	}
	a.WaitLedger(t, sale, 15*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].PendingIntents == 0 && l["sku-1"].DB.Available == 5 && l["sku-1"].Redis.Available == 5
	})
	if _, err := testenv.LoseKeys(ctx, env.Redis, env.Prefix); err != nil {
		t.Fatal(err)
	}
	a.WaitDurability(t, sale, 15*time.Second, func(d origintest.Durability) bool {
		return len(d.Losses) == 1 && d.Losses[0].RebuiltAt != nil
	})
	s, again := a.Reserve(t, sale, token, "sku-1", "a-new-key")
	if s != 200 || again.ReservationID != r.ReservationID || again.Status != "expired" {
		t.Fatalf("Reserve(used token, new key) after the loss = %d %+v, want 200 with the expired %s", s, again, r.ReservationID)
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.Redis.Available != 5 {
		t.Fatalf("redis after the replay = %+v, want all 5 available", l.Redis)
	}
	origintest.CheckInvariant(t, env, sale)
}

// A Redis that comes back behind the journal (a replica promoted before it
// had the last writes) is found by its sequence, although its epoch is
// right and its keys are there, and the sale is rebuilt from Postgres.
func TestRedisBehindTheJournalIsFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := origintest.NewEnv(t)
	a := origintest.StartOrigin(t, env, instance("origin-a"), checkOften)
	sale := "behind-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	keys := checkout.NewKeys(env.Prefix)
	for i := range 3 {
		account := fmt.Sprintf("acct-%d", i)
		if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, account), "sku-1", "k"); s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
	}
	a.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].PendingIntents == 0 && l["sku-1"].DB.Held == 3
	})
	// The promoted replica had only the first reserve: the other two holds,
	// their counters and their numbers are gone.
	p := env.Redis.TxPipeline()
	p.HSet(ctx, keys.Meta(sale), "seq", 1)
	p.HSet(ctx, keys.Inventory(sale, "sku-1"), "available", 9, "held", 1)
	p.Del(ctx, keys.Account(sale, "acct-1"), keys.Account(sale, "acct-2"))
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	d := a.WaitDurability(t, sale, 15*time.Second, func(d origintest.Durability) bool {
		return len(d.Losses) == 1 && d.Losses[0].RebuiltAt != nil
	})
	if l := d.Losses[0]; l.Kind != "sequence_behind" || l.RedisSeq != 1 || l.JournalSeq != 3 || l.Lost != 0 {
		t.Fatalf("loss = %+v, want sequence_behind, redis 1 and journal 3, none lost", l)
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: 7, Held: 3}) || l.Drift != (origintest.Counts{}) {
		t.Fatalf("ledger after the rebuild = %+v, want redis available 7 held 3, no drift", l)
	}
	// acct-2's hold is back in Redis: a new token finds it.
	if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, "acct-2"), "sku-1", "k2"); s != 200 {
		t.Fatalf("Reserve(acct-2) after the rebuild = %d %+v, want 200 with its hold", s, r)
	}
	origintest.CheckInvariant(t, env, sale)
}

// A sale whose epoch another Redis server holds (a replica promoted, which
// may lack the last writes even where its sequence has run past the
// journal's) is rebuilt from Postgres, and the event is recorded.
func TestAnotherRedisServerIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := origintest.NewEnv(t)
	a := origintest.StartOrigin(t, env, instance("origin-a"), checkOften)
	sale := "moved-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	for i := range 2 {
		account := fmt.Sprintf("acct-%d", i)
		if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, account), "sku-1", "k"); s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
	}
	before := a.Durability(t, sale)
	// As if the sale's epoch had been written to another server.
	if _, err := env.DB.Exec(ctx, `UPDATE sales SET redis_replid = 'another-server' WHERE sale_id = $1`, sale); err != nil {
		t.Fatal(err)
	}
	// One reading with the whole outcome, the loss's record and a new epoch
	// in both stores (on a busy machine a check may land between them): a
	// rebuild that never writes the new epoch fails the wait.
	d := a.WaitDurability(t, sale, 15*time.Second, func(d origintest.Durability) bool {
		return len(d.Losses) == 1 && d.Losses[0].RebuiltAt != nil && d.Epoch != before.Epoch && d.RedisEpoch == d.Epoch
	})
	if l := d.Losses[0]; l.Kind != "server_replaced" || l.Lost != 0 {
		t.Fatalf("loss = %+v, want server_replaced, none lost", l)
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.Redis != (origintest.Counts{Available: 8, Held: 2}) || l.Drift != (origintest.Counts{}) {
		t.Fatalf("ledger after the rebuild = %+v, want redis available 8 held 2, no drift", l)
	}
	origintest.CheckInvariant(t, env, sale)
}
