package crowdsim

import (
	"context"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/naive"
)

// RunNaive plays the same crowd against the naive baseline: no waiting
// room, no Redis, every click a conditional UPDATE on one Postgres row. A
// shopper clicks Buy at their arrival and, when the answer is an error or
// does not come, clicks again a second later, up to three times.
func RunNaive(ctx context.Context, cfg Config, postgresURL string) (*Result, error) {
	cfg = cfg.withDefaults()
	started := time.Now()
	opts := naive.Options{PoolSize: 64}
	srv, err := naive.Start(ctx, postgresURL, cfg.Stock, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Close(c)
	}()
	// No pre-queue in the naive design: those who came early click at the open.
	s := &sim{cfg: cfg, sale: "naive"}
	s.zero = time.Now().Add(time.Second)
	shoppers := s.crowd()
	s.rec = newRecorder(s.zero)
	if s.edge, err = newClient(srv.URL, cfg.Conns, cfg.Timeout, s.rec); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithDeadline(ctx, s.zero.Add(time.Duration(cfg.MaxDurationS*float64(time.Second))))
	defer cancel()
	go s.watchBudget(runCtx, cancel)
	cfg.Progress("naive baseline: %d shoppers for %d units, every buy an UPDATE on one Postgres row", len(shoppers), cfg.Stock)
	cpuBefore, crowdStart := cpuTimes(), time.Now()
	for _, sh := range shoppers {
		sh.arrival = max(sh.arrival, 0)
	}
	s.launch(runCtx, shoppers, func(ctx context.Context, sh *shopper) {
		sh.started = s.since()
		s.buyNaively(ctx, sh)
	})
	cancel()
	s.ended = s.since()
	cfg.Progress("naive baseline: done after %.1f s (%d requests)", s.since().Seconds(), s.rec.count())

	res := &Result{Mode: "naive", Scenario: cfg.Scenario, Machine: benchreport.MachineLine(), Started: started, Stock: cfg.Stock}
	res.CPU, res.CrowdS = cpuSince(cpuBefore, cpuTimes()), time.Since(crowdStart).Seconds()
	res.CPUs = cpuAffinity()
	res.Endpoints = s.rec.endpoints()
	s.rec.totals(res, 0, cfg.BurstS)
	tallyFates(res, shoppers, s.ended, cfg.Bots, cfg.Stock)
	orders, left, err := srv.Sold(ctx)
	if err != nil {
		return nil, err
	}
	res.Sold = orders
	res.Oversold = max(0, orders-cfg.Stock)
	res.InvariantOK = left >= 0 && orders+left == cfg.Stock
	res.Ledger = []LedgerSKU{{SKU: "item-1", Total: int64(cfg.Stock), Postgres: [3]int64{int64(left), 0, int64(orders)}}}
	res.Notes = append(res.Notes, fmt.Sprintf("Baseline server: fasthttp + a %d-connection pgx pool, one conditional UPDATE and one INSERT per buy, in one transaction.", opts.PoolSize))
	res.Wall = time.Since(started).Seconds()
	return res, nil
}

// buyNaively clicks Buy, and again on an error or silence, up to three times.
func (s *sim) buyNaively(ctx context.Context, sh *shopper) {
	for attempt := 0; attempt < 3; attempt++ {
		r := s.edge.do(request{endpoint: epNaiveBuy, method: "POST", path: "/naive/buy?account=" + sh.account})
		switch r.status {
		case 201:
			sh.answered(s.since()) // the naive design's only answers are its fates
			sh.decide(fateReserved, s.since())
			return
		case 409:
			sh.answered(s.since())
			sh.decide(fateSoldOut, s.since())
			return
		}
		if !s.sleep(ctx, time.Second) {
			return
		}
	}
	sh.decide(fateGaveUp, s.since())
}
