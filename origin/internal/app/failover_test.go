package app_test

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/redisconn/redistest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// failoverRecoveryBound is how soon after the primary is killed reserves
// must succeed again.
const failoverRecoveryBound = 15 * time.Second

// An origin connected through Sentinels follows a promotion without
// restart: the primary is killed with SIGKILL while shoppers reserve, order
// and pay at 200 reserves a second; shoppers hear 503 please_wait (never
// another 5xx) until the replica is promoted, reserves succeed again within
// failoverRecoveryBound, the sale sells out, no unit is sold twice in Redis
// or Postgres, every paid order is paid, and every 201 can still be read
// afterwards (or is reported lost).
func TestOriginFollowsARedisFailover(t *testing.T) {
	t.Parallel()
	const (
		stock      = 200
		shoppers   = 800
		killAfter  = 60                   // units held before the primary is killed
		reserveGap = 5 * time.Millisecond // between reserves: 200 a second
		workers    = 8
		orderEvery = 4 // every 4th shopper with a hold orders and pays
	)
	f := redistest.StartFailover(t, redistest.Options{})
	env := origintest.NewEnv(t)
	p := origintest.StartPayments(t)
	o := origintest.StartOrigin(t, env, p.Configure, func(c *app.Config) {
		c.RedisURL = f.URL()
		c.RedisSentinels = f.SentinelList()
		c.RedisMasterName = f.MasterName
		// A shopper hears please_wait within a second of the kill
		// rather than after the default three.
		c.RequestBudget = time.Second
	})
	p.DeliverTo(o)
	sale := "failover-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, stock, 600))

	var (
		mu       sync.Mutex         // guards the four below
		answers  = map[string]int{} // "status code" → count, every answer
		held     = map[string]string{}
		orders   = map[string]string{} // order id → account
		lostHold []string              // accounts whose order found no reservation
	)
	note := func(status int, code string) {
		mu.Lock()
		answers[fmt.Sprintf("%d %s", status, code)]++
		mu.Unlock()
	}
	var (
		created   atomic.Int64
		killedAt  atomic.Int64 // unix nanos; 0 until the kill
		recovered atomic.Int64 // unix nanos of the first success sent after the kill
		soldOut   atomic.Bool
	)
	stop := make(chan struct{})
	deadline := time.Now().Add(45 * time.Second) // no shopper retries past this

	// retry runs call until it answers something other than 503 please_wait.
	retry := func(call func() (int, string)) (int, string) {
		for {
			sent := time.Now()
			status, code := call()
			note(status, code)
			if status != 503 || code != "please_wait" || time.Now().After(deadline) {
				if k := killedAt.Load(); k != 0 && sent.UnixNano() > k && (status == 201 || status == 200) {
					recovered.CompareAndSwap(0, time.Now().UnixNano())
				}
				return status, code
			}
			time.Sleep(50 * time.Millisecond) // what Retry-After asks, shortened
		}
	}
	shop := func(i int) {
		account := fmt.Sprintf("acct-%04d", i)
		token := o.AdmissionToken(t, sale, account)
		var r origintest.Reply
		status, _ := retry(func() (int, string) {
			var s int
			s, r = o.Reserve(t, sale, token, "sku-1", "k-"+account)
			return s, r.Error
		})
		switch {
		case (status == 201 || status == 200) && r.ReservationID != "":
			created.Add(1)
			mu.Lock()
			held[r.ReservationID] = account
			mu.Unlock()
		case status == 409 && r.Error == "sold_out":
			soldOut.Store(true)
			return
		default:
			return // counted in answers; judged at the end
		}
		if i%orderEvery != 0 {
			return
		}
		user := o.UserToken(t, account)
		var ord origintest.Order
		status, _ = retry(func() (int, string) {
			var s int
			s, ord = o.CreateOrder(t, user, r.ReservationID, "order-"+account)
			return s, ord.Error
		})
		// An order answered before the gateway made its intent (a loaded
		// box) gets it shortly: the page reads the order until it has it.
		for (status == 201 || status == 200) && ord.Payment == nil && ord.OrderID != "" && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // the page's poll, shortened
			status, ord = o.Order(t, user, ord.OrderID)
		}
		switch {
		case (status == 201 || status == 200) && ord.Payment != nil:
		case status == 404 && ord.Error == "unknown_reservation":
			mu.Lock()
			lostHold = append(lostHold, account)
			mu.Unlock()
			return
		default:
			return
		}
		if _, err := p.Gateway.Pay(ord.Payment.IntentID); err != nil {
			t.Errorf("gateway Pay(%s) = %v", ord.Payment.IntentID, err)
			return
		}
		mu.Lock()
		orders[ord.OrderID] = account
		mu.Unlock()
	}

	next := make(chan int)
	go func() { // the pace of arrivals
		defer close(next)
		tick := time.NewTicker(reserveGap)
		defer tick.Stop()
		for i := range shoppers {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			select {
			case <-stop:
				return
			case next <- i:
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				shop(i)
			}
		}()
	}
	// halt stops the shoppers and waits for them: once the crowd is done,
	// or before the test ends on a failed wait.
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer halt()

	testenv.Eventually(t, 10*time.Second, "units held before the kill", func() bool { return created.Load() >= killAfter })
	old := f.KillPrimary(t)
	killedAt.Store(time.Now().UnixNano())
	heldAtKill := created.Load()
	promoted := f.WaitPromotion(t, old, failoverRecoveryBound)
	promotedAfter := time.Since(time.Unix(0, killedAt.Load()))
	testenv.Eventually(t, failoverRecoveryBound-promotedAfter, "a reserve succeeding after the kill", func() bool { return recovered.Load() != 0 })
	recovery := time.Duration(recovered.Load() - killedAt.Load())
	testenv.Eventually(t, 20*time.Second, "the sale selling out after the failover", soldOut.Load)
	halt()
	t.Logf("killed %s with %d held; %s promoted after %v; reserves succeeded again after %v; answers %v",
		old.Name, heldAtKill, promoted.Name, promotedAfter.Round(time.Millisecond), recovery.Round(time.Millisecond), answers)

	if promoted != f.Data[1] || old != f.Data[0] {
		t.Errorf("primary went from %s to %s, want from data-0 to data-1", old.Name, promoted.Name)
	}
	if recovery > failoverRecoveryBound {
		t.Errorf("reserves succeeded again %v after the kill, want within %v", recovery, failoverRecoveryBound)
	}
	for answer, n := range answers {
		switch answer {
		case "201 ", "200 ", "409 sold_out", "503 please_wait":
		default:
			t.Errorf("%d answers were %q; want only 201, 200, 409 sold_out and 503 please_wait", n, answer)
		}
	}
	if answers["503 please_wait"] == 0 {
		t.Errorf("no answer was 503 please_wait: the kill went unnoticed")
	}

	// Every paid order is paid, and charged once.
	for id, account := range orders {
		got := o.WaitOrder(t, o.UserToken(t, account), id, "paid", 20*time.Second)
		if got.Refund != nil {
			t.Errorf("order %s of %s = %+v, want paid without a refund", id, account, got)
		}
	}
	if n := len(p.Gateway.Intents()); n != len(orders) {
		t.Errorf("gateway intents = %d, want one per order (%d)", n, len(orders))
	}

	// The writers drain; neither side has sold more than the stock.
	l := o.WaitLedger(t, sale, 20*time.Second, func(l map[string]origintest.LedgerSKU) bool {
		return l["sku-1"].PendingIntents == 0
	})["sku-1"]
	t.Logf("ledger after the failover: %+v", l)
	if l.Redis.Held+l.Redis.Sold > stock || l.DB.Held+l.DB.Sold > stock {
		t.Errorf("ledger = %+v; held + sold exceeds the stock %d", l, stock)
	}
	inv := origintest.Inventory(t, env, sale)["sku-1"]
	if inv.Total != stock || inv.Held+inv.Sold > stock || inv.Sold < int64(len(orders)) {
		t.Errorf("Postgres inventory = %+v, want total %d, held + sold <= %d, sold >= %d paid orders", inv, stock, stock, len(orders))
	}
	origintest.CheckInvariant(t, env, sale)

	// Every 201 is still there, whatever became of it, or reported lost.
	var missing []string
	for id, account := range held {
		status, r := o.Reservation(t, o.UserToken(t, account), id)
		if status != 200 || r.ReservationID != id {
			missing = append(missing, fmt.Sprintf("%s (%s): %d %s", id, account, status, r.Error))
		}
	}
	sort.Strings(missing)
	// Every 201 was journaled before it was answered: a promoted replica
	// that missed the last writes loses none of them (the rebuild puts them
	// back), and none is lost for good.
	if len(missing) > 0 {
		t.Errorf("%d of %d reservations answered 201 are gone after the failover: %v", len(missing), len(held), missing)
	}
	if d := o.Durability(t, sale); d.Lost != 0 {
		t.Errorf("durability after the failover = %+v, want no reservation lost", d)
	}
	if len(lostHold) > 0 {
		t.Errorf("orders for %v found no reservation after their 201", lostHold)
	}
}
