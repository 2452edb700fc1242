package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/origintest"
)

// One origin reconciles at a time: while another holds the reconciler's
// lock, this one's runs are skipped — it asks the provider nothing, and a
// payment whose webhook was lost stays unsettled — and once the lock is
// free it reconciles and settles it.
func TestOneOriginReconcilesAtATime(t *testing.T) {
	t.Parallel()
	o, p, sale := payingOrigin(t)
	o.MustCreateSale(t, origintest.OpenSale(sale, 1, 600))
	unlock, ok, err := ledger.New(o.Env.DB).TryLock(context.Background(), "reconcile")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v; want the reconciler's lock", ok, err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	// Runs that started before the lock was taken may still be listing.
	skipped := waitMetric(t, o, `flashgate_reconcile_runs_total{result="skipped"}`, 1)
	p.Gateway.SetWebhooksEnabled(false)
	s := hold(t, o, sale, "alice")
	ord := mustOrder(t, o, s)
	if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	listings := p.Listings()
	waitMetric(t, o, `flashgate_reconcile_runs_total{result="skipped"}`, skipped+3)
	if n := p.Listings(); n != listings {
		t.Errorf("the provider was listed %d times while another origin reconciled, want 0", n-listings)
	}
	if _, got := o.Order(t, s.userToken, ord.OrderID); got.Status != "pending_payment" {
		t.Errorf("order while the lock is held = %s, want still pending_payment", got.Status)
	}
	unlock()
	locked = false
	o.WaitOrder(t, s.userToken, ord.OrderID, "paid", 10*time.Second)
	settled(t, o, sale, origintest.Counts{Sold: 1})
}

// waitMetric waits until a series of the origin's /metrics reaches at
// least want, and returns its value.
func waitMetric(t *testing.T, o *origintest.Origin, series string, want float64) float64 {
	t.Helper()
	var n float64
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s at least %v", series, want), func() bool {
		n = metric(t, o, series)
		return n >= want
	})
	return n
}
