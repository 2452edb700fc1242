package crowdsim

import (
	"context"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/naive"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestRunNaiveSellsEachUnitOnce plays a small crowd against the naive
// baseline: every unit sells, none twice, and every shopper who was set
// going learns a fate.
func TestRunNaiveSellsEachUnitOnce(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc := DefaultScenario()
	sc.Shoppers, sc.Stock, sc.RatePerS, sc.Hammering.Accounts, sc.Hammering.Addresses = 300, 40, 200, 10, 2
	sc.PreQueueS, sc.BurstS, sc.TailS, sc.MaxDurationS = 1, 1, 1, 20
	res, err := RunNaive(ctx, Config{Scenario: sc, Conns: 32, Seed: 5}, env.PostgresURL)
	if err != nil {
		t.Fatalf("RunNaive = %v", err)
	}
	if res.Sold != sc.Stock || res.Oversold != 0 || !res.InvariantOK {
		t.Errorf("sold %d, oversold %d, invariant %v; want %d, 0, true", res.Sold, res.Oversold, res.InvariantOK, sc.Stock)
	}
	if res.Fates.Reserved.Count != sc.Stock {
		t.Errorf("%d shoppers reserved, want %d", res.Fates.Reserved.Count, sc.Stock)
	}
	if all := sc.Shoppers + sc.BotAccounts(); res.Fates.Answered != all || res.Fates.Unknown != 0 {
		t.Errorf("%d of %d shoppers and bots answered, %d never learnt a fate; want all, 0", res.Fates.Answered, all, res.Fates.Unknown)
	}
	if res.Fairness.BotAccounts != sc.BotAccounts() {
		t.Errorf("bot accounts %d, want %d", res.Fairness.BotAccounts, sc.BotAccounts())
	}
}

// With a NaiveURL the run plays against a server of another process: it
// resets that server's sale first (the units an earlier run sold come
// back), so two runs in a row each sell the whole stock once.
func TestRunNaiveAgainstAServerByURL(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := naive.Start(ctx, env.PostgresURL, 0, naive.Options{Schema: "naive_" + testenv.RandomHex(4), PoolSize: 8})
	if err != nil {
		t.Fatalf("naive.Start = %v", err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	sc := DefaultScenario()
	sc.Shoppers, sc.Stock, sc.Hammering.Accounts = 200, 30, 0
	sc.PreQueueShare, sc.BurstShare, sc.BurstS, sc.UniformBurst, sc.TailS, sc.MaxDurationS = 0, 1, 1, true, 0, 20
	for run := range 2 {
		res, err := RunNaive(ctx, Config{Scenario: sc, Conns: 32, Seed: uint64(run), NaiveURL: srv.URL}, "")
		if err != nil {
			t.Fatalf("run %d: RunNaive = %v", run, err)
		}
		if res.Sold != sc.Stock || res.Oversold != 0 || !res.InvariantOK || res.Fates.Answered != sc.Shoppers {
			t.Errorf("run %d: sold %d, oversold %d, invariant %v, answered %d; want %d, 0, true, %d",
				run, res.Sold, res.Oversold, res.InvariantOK, res.Fates.Answered, sc.Stock, sc.Shoppers)
		}
		if res.StartLag.Count != sc.Shoppers {
			t.Errorf("run %d: start lag over %d shoppers, want %d", run, res.StartLag.Count, sc.Shoppers)
		}
	}
}
