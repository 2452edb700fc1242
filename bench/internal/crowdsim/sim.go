package crowdsim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/tokens"
)

// Config is one run against a running stack.
type Config struct {
	Scenario
	EdgeURL string // the edge's public listener, http://127.0.0.1:8080
	// FarEdgeURL is the public address of a second region's edges (its CDN),
	// "" for one region: FarShare of the shoppers (not the bots) shop
	// through it, the rest through EdgeURL, and the Result tells the two
	// regions apart (docs/REGIONS.md).
	FarEdgeURL     string
	FarShare       float64 // 0 means half
	EdgeAdminURL   string
	OriginAdminURL string
	GatewayURL     string // the sandbox payment gateway
	GatewayToken   string // the sandbox gateway's control token, which its pay route takes
	AdminToken     string
	UserSecret     []byte                           // the shop's HS256 user-token secret: shoppers' tokens are minted here
	SaleID         string                           // "" makes one up
	Conns          int                              // connections to the edge; 0 means 2048
	Timeout        time.Duration                    // one request's budget at the client; 0 means 5 s
	Seed           uint64                           // the crowd and its timings follow from it
	Progress       func(format string, args ...any) // nil: quiet

	// NaiveURL is a naive baseline server of its own process
	// (bench/naiveserver), which RunNaive resets and plays against; ""
	// makes RunNaive start one inside this process.
	NaiveURL string
}

// DefaultScenario is the standard run: 100,000 shoppers for 5,000 units
// admitted at 2,000 a second — a pre-queue, a burst at the open, a tail.
func DefaultScenario() Scenario {
	return Scenario{
		Shoppers: 100_000, Stock: 5_000, RatePerS: 2_000,
		PreQueueS: 20, PreQueueShare: 0.2, BurstS: 10, BurstShare: 0.5, TailS: 30,
		PayProbability: 0.7, ImpatientShare: 0.1, StayShare: 0.1, PageRefreshS: 1,
		Bots: 200, BotIPs: 4, HoldTTLS: 15,
		MaxDurationS: 75, MaxRequests: 2_000_000,
	}
}

// withDefaults fills the zero fields that have defaults: 2,048 edge
// connections, a 5 s request timeout, no progress output.
func (c Config) withDefaults() Config {
	if c.Conns <= 0 {
		c.Conns = 2048
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
	if c.FarEdgeURL != "" && c.FarShare <= 0 {
		c.FarShare = 0.5
	}
	return c
}

// sim is one run in progress.
type sim struct {
	cfg     Config
	sale    string
	sku     string
	zero    time.Time // the sale's start
	rec     *recorder // the stack's requests (through the edge): the run's figures
	gwRec   *recorder // the sandbox gateway's, shown per endpoint but kept out of the totals
	edge    *client
	gateway *client
	cdn     *cdn
	far     *client // the far region's edges; nil for one region
	farCDN  *cdn

	ended time.Duration // when the crowd stopped, since zero

	reservedUnits atomic.Int64
	lastUnitAt    atomic.Int64 // time.Duration since zero; 0 until the stock has all gone once

	monMu   sync.Mutex // guards samples
	samples []sample
}

type sample struct {
	at                             time.Duration
	queueLength, nowServing, avail int64
	soldOut, final                 bool
}

func (s *sim) since() time.Duration { return time.Since(s.zero) }

// Run plays the scenario against the stack and reports what happened.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if cfg.SaleID == "" {
		cfg.SaleID = fmt.Sprintf("crowd-%d", time.Now().Unix())
	}
	s := &sim{cfg: cfg, sale: cfg.SaleID, sku: "sku-1"}
	started := time.Now()
	if err := s.setUp(ctx); err != nil {
		return nil, err
	}
	shoppers := s.crowd()
	s.rec = newRecorder(s.zero)
	var err error
	if s.edge, err = newClient(cfg.EdgeURL, cfg.Conns, cfg.Timeout, s.rec); err != nil {
		return nil, err
	}
	s.gwRec = newRecorder(s.zero)
	if s.gateway, err = newClient(cfg.GatewayURL, 256, cfg.Timeout, s.gwRec); err != nil {
		return nil, err
	}
	s.cdn = newCDN(s.edge, "/v1/sales/"+s.sale)
	if cfg.FarEdgeURL != "" {
		if s.far, err = newClient(cfg.FarEdgeURL, cfg.Conns, cfg.Timeout, s.rec); err != nil {
			return nil, err
		}
		s.farCDN = newCDN(s.far, "/v1/sales/"+s.sale)
	}
	users := tokens.NewDevUserIssuer(cfg.UserSecret, "", 2*time.Hour, nil)
	for _, sh := range shoppers {
		if sh.userToken, err = users.Issue(sh.account); err != nil {
			return nil, fmt.Errorf("crowd: user token: %w", err)
		}
	}

	runCtx, cancel := context.WithDeadline(ctx, s.zero.Add(time.Duration(cfg.MaxDurationS*float64(time.Second))))
	defer cancel()
	go s.monitor(runCtx)
	go s.watchBudget(runCtx, cancel)
	cfg.Progress("%s: %d shoppers (%d bots) for %d units at %g/s; the sale opens in %v",
		s.sale, len(shoppers), cfg.Bots, cfg.Stock, cfg.RatePerS, time.Until(s.zero).Round(100*time.Millisecond))
	cpuBefore, crowdStart := cpuTimes(), time.Now()
	s.launch(runCtx, shoppers, s.shop)
	cancel()
	s.ended = s.since()
	cfg.Progress("%s: the crowd is done after %.1f s (%d requests)", s.sale, s.since().Seconds(), s.rec.count())

	res := &Result{Mode: "flashgate", Scenario: cfg.Scenario, Machine: benchreport.MachineLine(), Started: started}
	res.CPU, res.CrowdS = cpuSince(cpuBefore, cpuTimes()), time.Since(crowdStart).Seconds()
	res.CPUs = cpuAffinity()
	s.finish(ctx, res, shoppers)
	hits, misses := s.cdn.hits.Load(), s.cdn.misses.Load()
	if s.farCDN != nil {
		hits, misses = hits+s.farCDN.hits.Load(), misses+s.farCDN.misses.Load()
	}
	if s.far != nil {
		res.Notes = append(res.Notes, "Two regions: the endpoint tables, the totals and the goals count both regions' requests, "+
			"the far region's with the distance in them; the Regions table splits them.")
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Snapshot loads go through a simulated CDN (one per region) that keeps the edge's answer for its max-age "+
		"and collapses concurrent misses: %d loads, %d served from its cache, %d reached the edge (counted as requests).",
		hits+misses, hits, misses))
	res.Wall = time.Since(started).Seconds()
	return res, nil
}

// setUp creates the sale, sets its admission rate and waits until the edge
// serves it; the sale opens PreQueueS (plus a moment) from now.
func (s *sim) setUp(ctx context.Context) error {
	s.zero = time.Now().Add(3*time.Second + time.Duration(s.cfg.PreQueueS*float64(time.Second))).Truncate(time.Second).Add(time.Second)
	sale := map[string]any{
		"sale_id": s.sale, "name": "Crowd run " + s.sale,
		"starts_at": s.zero.UTC().Format(time.RFC3339), "ends_at": s.zero.Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_s": s.cfg.HoldTTLS, "per_account_limit": 1,
		"skus": []map[string]any{{"sku": s.sku, "name": "Sneaker", "price_minor": 499900, "currency": "INR", "stock": s.cfg.Stock}},
	}
	if status, body, err := s.admin(ctx, "POST", s.cfg.OriginAdminURL+"/admin/sales", sale); err != nil || status != 201 {
		return fmt.Errorf("crowd: create sale: %d %s %v", status, body, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, edge := range []string{s.cfg.EdgeURL, s.cfg.FarEdgeURL} {
		for edge != "" {
			status, _, _ := s.admin(ctx, "GET", edge+"/v1/sales/"+s.sale, nil)
			if status == 200 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("crowd: the edge at %s did not learn of the sale within 15 s", edge)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rate := s.cfg.RatePerS
	if rate <= 0 {
		rate = 1_000_000 // unthrottled
	}
	if status, body, err := s.admin(ctx, "PUT", s.cfg.EdgeAdminURL+"/admin/sales/"+s.sale+"/admission", map[string]any{"rate_per_s": rate}); err != nil || status != 200 {
		return fmt.Errorf("crowd: set the admission rate: %d %s %v", status, body, err)
	}
	if time.Until(s.zero) < time.Duration(s.cfg.PreQueueS*float64(time.Second)) {
		return errors.New("crowd: setting up took longer than the pre-queue; nothing was run")
	}
	return nil
}

func (s *sim) admin(ctx context.Context, method, url string, body any) (int, []byte, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), nil
}

// crowd makes the shoppers and their arrival times, sorted by arrival: the
// pre-queue spread over the PreQueueS before the start, the burst densest
// at the open and thinning over BurstS (evenly over it with UniformBurst),
// the tail spread evenly over TailS after it, and the bots all at the open.
func (s *sim) crowd() []*shopper {
	sc := s.cfg.Scenario
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x5eed))
	secs := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	out := make([]*shopper, 0, sc.Shoppers+sc.Bots)
	for i := range sc.Shoppers {
		sh := &shopper{
			n: i, account: fmt.Sprintf("shopper-%06d", i),
			ip:        fmt.Sprintf("10.%d.%d.%d", rng.IntN(256), rng.IntN(256), 1+rng.IntN(254)),
			impatient: rng.Float64() < sc.ImpatientShare,
			payer:     rng.Float64() < sc.PayProbability,
			stays:     rng.Float64() < sc.StayShare,
			payDelay:  secs(1 + 3*rng.Float64()),
		}
		switch u := rng.Float64(); {
		case u < sc.PreQueueShare:
			sh.arrival = -secs(sc.PreQueueS * rng.Float64())
		case u < sc.PreQueueShare+sc.BurstShare && sc.UniformBurst:
			sh.arrival = secs(sc.BurstS * rng.Float64())
		case u < sc.PreQueueShare+sc.BurstShare:
			// Densest at the open, thinning linearly to nothing at the
			// burst's end (twice the burst's average rate at the open).
			sh.arrival = secs(sc.BurstS * (1 - math.Sqrt(1-rng.Float64())))
		default:
			sh.arrival = secs(sc.BurstS + sc.TailS*rng.Float64())
		}
		out = append(out, sh)
	}
	for i := range sc.Bots {
		out = append(out, &shopper{
			n: sc.Shoppers + i, account: fmt.Sprintf("bot-%05d", i), bot: true, payer: true, stays: true,
			ip:      fmt.Sprintf("203.0.113.%d", 1+i%max(sc.BotIPs, 1)),
			arrival: secs(0.2 * rng.Float64()), payDelay: 200 * time.Millisecond,
		})
	}
	// The far region's shoppers are drawn from a stream of their own, so
	// that a seed's crowd arrives as it does with one region.
	regionRng := rand.New(rand.NewPCG(s.cfg.Seed, 0xfa5))
	for _, sh := range out {
		sh.rng = rand.New(rand.NewPCG(s.cfg.Seed, uint64(sh.n)))
		sh.far = s.cfg.FarEdgeURL != "" && !sh.bot && regionRng.Float64() < s.cfg.FarShare
	}
	slices.SortFunc(out, func(a, b *shopper) int { return cmp.Compare(a.arrival, b.arrival) })
	return out
}

// monitor samples the edge's snapshot four times a second: the line's
// length, the cursor and the stock left, for the timeline.
func (s *sim) monitor(ctx context.Context) {
	c := http.Client{Timeout: 2 * time.Second}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := c.Get(s.cfg.EdgeURL + "/v1/sales/" + s.sale)
		if err != nil {
			continue
		}
		var snap struct {
			NowServing  int64 `json:"now_serving"`
			QueueLength int64 `json:"queue_length"`
			SoldOut     bool  `json:"sold_out"`
			Final       bool  `json:"final"`
			SKUs        []struct {
				AvailableHint int64 `json:"available_hint"`
			} `json:"skus"`
		}
		err = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue // no reading this time, rather than a reading of zeros
		}
		smp := sample{at: s.since(), queueLength: snap.QueueLength, nowServing: snap.NowServing, soldOut: snap.SoldOut, final: snap.Final}
		for _, k := range snap.SKUs {
			smp.avail += k.AvailableHint
		}
		s.monMu.Lock()
		s.samples = append(s.samples, smp)
		s.monMu.Unlock()
	}
}

// watchBudget ends the run once it has made MaxRequests requests.
func (s *sim) watchBudget(ctx context.Context, stop context.CancelFunc) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.cfg.MaxRequests > 0 && s.rec.count() >= s.cfg.MaxRequests {
				s.cfg.Progress("%s: request budget of %d reached; stopping the crowd", s.sale, s.cfg.MaxRequests)
				stop()
				return
			}
		}
	}
}
