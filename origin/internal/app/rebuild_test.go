package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// When Redis loses acknowledged writes (a failover), a rebuild makes it
// agree with Postgres again: stock, the hold index and account keys; and an
// origin that starts against a Redis that lost a sale entirely puts it back.
func TestRebuildFromPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := origintest.NewEnv(t)
	a := origintest.StartOrigin(t, env, instance("origin-a"))
	sale := "rebuild-" + testenv.RandomHex(3)
	a.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	for i := range 4 {
		account := fmt.Sprintf("acct-%d", i)
		if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, account), "sku-1", "k"); s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
	}
	drained := func(l map[string]origintest.LedgerSKU) bool {
		x := l["sku-1"]
		return x.PendingIntents == 0 && x.DB.Held == 4
	}
	a.WaitLedger(t, sale, 10*time.Second, drained)

	// Redis "forgets" the four reserves: counters back to full stock, the
	// hold index and one account key gone.
	tag := env.Prefix + "{s:" + sale + "}:"
	if err := env.Redis.HSet(ctx, tag+"inv:sku-1", "available", 10, "held", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.Del(ctx, tag+"holds", tag+"acct:acct-0").Err(); err != nil {
		t.Fatal(err)
	}
	if l := a.Ledger(t, sale)["sku-1"]; l.Drift.Available != 4 || l.Drift.Held != -4 {
		t.Fatalf("drift before rebuild = %+v, want available +4, held -4", l.Drift)
	}

	status, body := a.DoAdmin(t, origintest.Request{Method: "POST", Path: "/admin/sales/" + sale + "/rebuild", Token: origintest.AdminToken})
	if status != 200 {
		t.Fatalf("rebuild = %d %s, want 200", status, body)
	}
	l := a.Ledger(t, sale)["sku-1"]
	if l.Redis != (origintest.Counts{Available: 6, Held: 4}) || l.Drift != (origintest.Counts{}) {
		t.Fatalf("after rebuild: redis %+v drift %+v, want available 6 held 4, no drift", l.Redis, l.Drift)
	}
	if n := env.Redis.ZCard(ctx, tag+"holds").Val(); n != 4 {
		t.Fatalf("hold index after rebuild has %d holds, want 4", n)
	}
	// acct-0's key is back: a new token finds its live hold instead of a second unit.
	if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, "acct-0"), "sku-1", "k2"); s != 200 {
		t.Fatalf("Reserve(acct-0 after rebuild) = %d %+v, want 200 with its hold", s, r)
	}
	if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, "acct-9"), "sku-1", "k"); s != 201 {
		t.Fatalf("Reserve(acct-9 after rebuild) = %d %+v, want 201", s, r)
	}
	a.WaitLedger(t, sale, 10*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].PendingIntents == 0 && l["sku-1"].DB.Held == 5
	})

	// Redis restarts empty: every key of the sale is gone.
	if _, err := testenv.LoseKeys(ctx, env.Redis, env.Prefix); err != nil {
		t.Fatal(err)
	}
	// The running origin neither calls the sale sold out meanwhile nor
	// hands out unknown_sku, and puts the sale back by itself.
	if snap := a.Snapshot(t, sale); snap.SoldOut || snap.Final {
		t.Fatalf("snapshot while redis lost the sale = %+v, want not sold out", snap)
	}
	if s, r := a.Reserve(t, sale, a.AdmissionToken(t, sale, "acct-8"), "sku-1", "k"); s != 503 && s != 201 {
		t.Fatalf("Reserve while redis lost the sale = %d %+v, want 503 please_wait (or 201 once restored)", s, r)
	}
	a.WaitLedger(t, sale, 15*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].Redis.Held >= 5
	})
	// Then Redis restarts empty while no origin runs (origin-a stopped
	// first: a running origin's guard would rebuild the sale itself, and a
	// starting one leaves a sale that another origin is rebuilding to it,
	// answering please_wait for it meanwhile — not the start-up path this
	// checks). The new origin has the sale back before it serves.
	a.Stop()
	if _, err := testenv.LoseKeys(ctx, env.Redis, env.Prefix); err != nil {
		t.Fatal(err)
	}
	b := origintest.StartOrigin(t, env, instance("origin-b"))
	l = b.Ledger(t, sale)["sku-1"]
	if l.Redis != (origintest.Counts{Available: 5, Held: 5}) || l.Drift != (origintest.Counts{}) {
		t.Fatalf("after restart on an empty redis: redis %+v drift %+v, want available 5 held 5, no drift", l.Redis, l.Drift)
	}
	if s, r := b.Reserve(t, sale, b.AdmissionToken(t, sale, "acct-9"), "sku-1", "k3"); s != 200 {
		t.Fatalf("Reserve(acct-9 after restore) = %d %+v, want 200 with its hold", s, r)
	}
	origintest.CheckInvariant(t, env, sale)
}
