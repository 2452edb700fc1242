package crowdsim

import (
	"context"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/naive"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// naiveBaseline is the baseline server a naive run plays against: one
// RunNaive started in this process, or bench/naiveserver's, reached
// through its admin routes.
type naiveBaseline interface {
	Reset(ctx context.Context, stock int) error
	State(ctx context.Context) (naive.State, error)
}

var (
	_ naiveBaseline = (*naive.Server)(nil)
	_ naiveBaseline = (*naive.Client)(nil)
)

// RunNaive plays the same crowd against the naive baseline: no waiting
// room, no Redis, every click a conditional UPDATE on one Postgres row. A
// shopper clicks Buy at their arrival and, when the answer is an error or
// does not come, clicks again a second later, up to three times.
//
// With cfg.NaiveURL it resets that server's sale to cfg.Stock units and
// plays against it (postgresURL is then unused); without, it starts a
// server of its own in this process on postgresURL, and stops it after.
func RunNaive(ctx context.Context, cfg Config, postgresURL string) (*Result, error) {
	cfg = cfg.withDefaults()
	started := time.Now()
	var (
		baseline naiveBaseline
		url      = cfg.NaiveURL
		where    = "in the simulator's process"
	)
	if url != "" {
		c := naive.NewClient(url)
		if err := c.Reset(ctx, cfg.Stock); err != nil {
			return nil, err
		}
		baseline, where = c, "bench/naiveserver, a process of its own"
	} else {
		srv, err := naive.Start(ctx, postgresURL, cfg.Stock, naive.Options{PoolSize: 64})
		if err != nil {
			return nil, err
		}
		defer func() {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = srv.Close(c)
		}()
		baseline, url = srv, srv.URL
	}
	// No pre-queue in the naive design: those who came early click at the open.
	s := &sim{cfg: cfg, sale: "naive"}
	s.zero = time.Now().Add(time.Second)
	shoppers := s.crowd()
	s.rec = newRecorder(s.zero)
	var err error
	if s.edge, err = newClient(url, cfg.Conns, cfg.Timeout, s.rec); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithDeadline(ctx, s.zero.Add(time.Duration(cfg.MaxDurationS*float64(time.Second))))
	defer cancel()
	go s.watchBudget(runCtx, cancel)
	go s.cpu.Run(runCtx, cpuGroups, cfg.Services, s.since)
	cfg.Progress("naive baseline: %d shoppers for %d units, every buy an UPDATE on one Postgres row", len(shoppers), cfg.Stock)
	coresBefore := CoreSpeeds()
	cpuBefore, schedBefore, crowdStart := cpuGroups.Times(cfg.Services), schedSnapshot(), time.Now()
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
	res.CPU, res.CrowdS = procstat.CPUSince(cpuBefore, cpuGroups.Times(cfg.Services)), time.Since(crowdStart).Seconds()
	res.SchedWait = waitMs(schedWait(schedBefore, schedSnapshot()))
	res.CoreLoopMs = [2]map[string]float64{coresBefore, CoreSpeeds()}
	res.CPUs, res.Nice = cpuGroups.Affinity(cfg.Services)
	res.Endpoints = s.rec.endpoints()
	s.rec.totals(res, 0, cfg.BurstS)
	s.addCPU(res)
	tallyFates(res, shoppers, s.ended, cfg.BotAccounts(), cfg.Stock)
	res.StartLag = startLag(shoppers)
	st, err := baseline.State(ctx)
	if err != nil {
		return nil, err
	}
	res.Sold = st.Orders
	res.Oversold = max(0, st.Orders-cfg.Stock)
	res.InvariantOK = st.StockLeft >= 0 && st.Orders+st.StockLeft == cfg.Stock
	res.Ledger = []LedgerSKU{{SKU: "item-1", Total: int64(cfg.Stock), Postgres: [3]int64{int64(st.StockLeft), 0, int64(st.Orders)}}}
	res.Notes = append(res.Notes, fmt.Sprintf("Baseline server (%s): fasthttp + a %d-connection pgx pool, one conditional UPDATE and one INSERT per buy, in one transaction.",
		where, st.PoolSize))
	if lag := res.StartLag; lag.P99 > 0.1 {
		res.Notes = append(res.Notes, fmt.Sprintf("The simulator set shoppers going late (its own lag): p50 %.2f s, p99 %.2f s, max %.2f s after their planned click.",
			lag.P50, lag.P99, lag.Max))
	}
	res.Wall = time.Since(started).Seconds()
	return res, nil
}

// startLag is how late the simulator set the launched shoppers going after
// their planned click (seconds).
func startLag(shoppers []*shopper) Dist {
	var lags []float64
	for _, sh := range shoppers {
		if sh.launched {
			lags = append(lags, (sh.started - sh.arrival).Seconds())
		}
	}
	return dist(lags)
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
