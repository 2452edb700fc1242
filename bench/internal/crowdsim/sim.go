package crowdsim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/tokens"
)

// cpuGroups are the processes whose CPU a run accounts for, by the name
// the kernel gives them (comm), and the label the report uses.
var cpuGroups = procstat.Groups{
	"crowd":          SimulatorCPU,
	"edge":           "edge",
	"origin":         "origin",
	"sandboxgateway": "sandbox gateway",
	"naiveserver":    "naive server",
	"redis-server":   "redis",
	"postgres":       "postgres",
}

// SimulatorCPU is the simulator's own group in Result.CPU and Second.CPU;
// every other group is the system under test.
const SimulatorCPU = "crowd (the simulator)"

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
	// SetUp is what the set-up (the sale created, every edge serving it,
	// its admission set) may take before the pre-queue opens; 0 means 3 s.
	// A set-up that overruns it is tried again, on a new sale, with twice
	// the time, up to three sales.
	SetUp time.Duration
	// Services scopes the CPU accounting of Redis and Postgres to the
	// run's own servers (their ports); zero counts every such process.
	Services procstat.Services
	// Defences are the stack's defences against bots the run switches on
	// or off (none: it leaves them as they are), and the devices' model.
	Defences Defences
	// Autotune, when on, hands the sale's admission rate to the origin's
	// controller from Scenario.RatePerS on; zero: the rate stays fixed.
	Autotune Autotune

	// NaiveURL is a naive baseline server of its own process
	// (bench/naiveserver), which RunNaive resets and plays against; ""
	// makes RunNaive start one inside this process.
	NaiveURL string
}

// DefaultScenario is the standard run: 100,000 shoppers for 5,000 units
// admitted at 2,000 a second — a pre-queue, a burst at the open, a tail —
// who take half a second to a second and a half to press Buy once it is
// their turn; beside them the hammering cohort (HammeringCohort) and the
// smart cohort's tactics (SmartCohort) with no accounts: make bench gives
// it 1,000 (-smart-bots).
func DefaultScenario() Scenario {
	return Scenario{
		Shoppers: 100_000, Stock: 5_000, RatePerS: 2_000,
		PreQueueS: 20, PreQueueShare: 0.2, BurstS: 10, BurstShare: 0.5, TailS: 30,
		PayProbability: 0.7, ImpatientShare: 0.1, StayShare: 0.1, PageRefreshS: 1, PageWatch: true, ReactionS: 1,
		Hammering: HammeringCohort(200), Smart: SmartCohort(0), HoldTTLS: 15,
		MaxDurationS: 75, MaxRequests: 2_000_000,
	}
}

// HammeringCohort is the easy kind of bot: accounts crowded on 4
// addresses of one /24, all joining at the open and polling four times a
// second whatever they are told, reserving at once, a payment instrument
// each, a server's CPU for the proof of work.
func HammeringCohort(accounts int) BotCohort {
	return BotCohort{Name: "hammering", Accounts: accounts, Addresses: 4, PollMS: 250, InstantReserve: true,
		AccountsPerInstrument: 1, ServerCPU: true}
}

// SmartCohort is scalpers who behave like people: an address each on a
// /24 of its own (residential proxies), all joining at the pre-queue's
// start (the draw makes that worth no more than any pre-queue place),
// polling exactly as told, but reserving within milliseconds of admission,
// handing admission tokens to one another, paying with one instrument per
// 50 accounts, and solving proofs of work on server CPUs.
func SmartCohort(accounts int) BotCohort {
	return BotCohort{Name: "smart", Accounts: accounts, PreQueue: true, InstantReserve: true, ShareTokens: true,
		AccountsPerInstrument: 50, ServerCPU: true}
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
	c.Defences = c.Defences.withDefaults()
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
	draws   draws // pre-queue pages' drawn places
	cohorts []*cohortRun

	ended time.Duration // when the crowd stopped, since zero

	reservedUnits atomic.Int64
	lastUnitAt    atomic.Int64 // time.Duration since zero; 0 until the stock has all gone once

	monMu   sync.Mutex // guards samples
	samples []sample
	cpu     procstat.Meter

	// timers are the shoppers' stopped sleep timers (*time.Timer), reused:
	// a crowd sleeps a few times per request, and each new timer is an
	// allocation the simulator's one core pays for in its collections.
	// Since Go 1.23 (unless GODEBUG asynctimerchan=1) a stopped timer's
	// channel holds no stale value, so Reset reuses it safely.
	timers sync.Pool
}

type sample struct {
	at                             time.Duration
	queueLength, nowServing, avail int64
	soldOut, final                 bool
}

func (s *sim) since() time.Duration { return time.Since(s.zero) }

// Run plays the scenario against the stack and reports what happened.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Defences.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Autotune.Validate(cfg.RatePerS); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.SaleID == "" {
		cfg.SaleID = fmt.Sprintf("crowd-%d", time.Now().Unix())
	}
	s := &sim{cfg: cfg, sku: "sku-1"}
	// The cores' speed before the crowd, measured before the sale's clock
	// starts: its fixed loop on each core took 2.2 s on a loaded box,
	// which the crowd then started late by.
	coresBefore := CoreSpeeds()
	started := time.Now()
	if err := s.setUpWithin(ctx); err != nil {
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
	for _, c := range []*cdn{s.cdn, s.farCDN} {
		switch {
		case c == nil:
		case cfg.PageWatch && cfg.PageRefreshS > 0:
			go c.keepWatching(runCtx, time.Duration(cfg.PageRefreshS*float64(time.Second)))
		default:
			go c.keepFresh(runCtx)
		}
	}
	go s.cpu.Run(runCtx, cpuGroups, cfg.Services, s.since)
	go s.watchBudget(runCtx, cancel)
	rates := s.newRateWatch()
	rateTicks := time.NewTicker(time.Second)
	defer rateTicks.Stop()
	go rates.run(runCtx, rateTicks.C)
	cfg.Progress("%s: %d shoppers (%d bots) for %d units at %g/s, defences %s; the sale opens in %v",
		s.sale, len(shoppers), cfg.BotAccounts(), cfg.Stock, cfg.RatePerS, cmp.Or(cfg.Defences.Mode, "as the stack has them"),
		time.Until(s.zero).Round(100*time.Millisecond))
	stagesBefore := s.scrapeStages(ctx, "before")
	cpuBefore, schedBefore, crowdStart := cpuGroups.Times(cfg.Services), schedSnapshot(), time.Now()
	s.launch(runCtx, shoppers, s.shop)
	cancel()
	s.ended = s.since()
	for _, c := range []*cdn{s.cdn, s.farCDN} {
		if c != nil {
			c.wait() // a background refresh records its request
		}
	}
	stagesAfter := s.scrapeStages(ctx, "after")
	cfg.Progress("%s: the crowd is done after %.1f s (%d requests)", s.sale, s.since().Seconds(), s.rec.count())

	tarpit, tarpitRead := s.readTarpit(ctx, started)
	markTarpitted(shoppers, tarpit)
	res := &Result{Mode: "flashgate", Scenario: cfg.Scenario, Machine: benchreport.MachineLine(), Started: started}
	res.Bots.Defences, res.Bots.TarpitEntries = s.cfg.Defences, len(tarpit)
	if !tarpitRead {
		res.Bots.TarpitEntries = -1
	}
	res.CPU, res.CrowdS = procstat.CPUSince(cpuBefore, cpuGroups.Times(cfg.Services)), time.Since(crowdStart).Seconds()
	res.SchedWait = waitMs(schedWait(schedBefore, schedSnapshot()))
	// After the readings above, so the loop's own time counts in neither.
	res.CoreLoopMs = [2]map[string]float64{coresBefore, CoreSpeeds()}
	res.CPUs, res.Nice = cpuGroups.Affinity(cfg.Services)
	s.finish(ctx, res, shoppers)
	s.admission(ctx, res, rates)
	res.Notes = append(res.Notes, defenceNotes(res.Bots)...)
	res.Stages = stages(res.Endpoints, stagesBefore, stagesAfter)
	res.Notes = append(res.Notes, stagesBefore.notes...)
	res.Notes = append(res.Notes, stagesAfter.notes...)
	if s.far != nil {
		res.Notes = append(res.Notes, "Where a request's time goes: the client rows count both regions' requests, the edge rows only the edge at "+
			s.cfg.EdgeAdminURL+".")
	}
	var hits, misses, stale, refreshes, unchanged int64
	for _, c := range []*cdn{s.cdn, s.farCDN} {
		if c != nil {
			hits, misses, stale, refreshes = hits+c.hits.Load(), misses+c.misses.Load(), stale+c.stale.Load(), refreshes+c.refreshes.Load()
			unchanged += c.unchanged.Load()
		}
	}
	if s.far != nil {
		res.Notes = append(res.Notes, "Two regions: the endpoint tables, the totals and the goals count both regions' requests, "+
			"the far region's with the distance in them; the Regions table splits them.")
	}
	reads := "reads it at its next refresh; while pages wait, the CDN is read as soon as it goes stale, as the first of them would."
	if s.cfg.PageWatch {
		reads = "reads it when the CDN took it in: each page read is a watch of its second (?at=), which the edge holds until the second ends " +
			"or the sale has news; while pages wait, the CDN sends the one watch a second they all ask for (counted as refreshes, endpoint snapshot_watch)."
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Snapshot loads go through a simulated CDN (one per region) that keeps the edge's answer for its max-age, "+
		"serves it stale for its stale-while-revalidate while one fetch refreshes it (as deploy/cdn's nginx does), and collapses concurrent misses: "+
		"%d loads, %d served from its cache (%d of them stale); %d misses and %d background refreshes reached the edge (counted as requests). "+
		"A waiting page's re-reads that could not change what it does are counted, not made (%d of them): the page sleeps until the CDN holds "+
		"a snapshot that shows its turn or a sold-out, and %s",
		hits+misses, hits, stale, misses, refreshes, unchanged, reads))
	res.Wall = time.Since(started).Seconds()
	return res, nil
}

// errSetUpLate says a set-up overran its lead: the pre-queue would have
// opened before the sale was ready.
var errSetUpLate = errors.New("crowd: setting up took longer than the pre-queue; nothing was run")

// setUpTries is how many sales a run sets up, the lead doubling each time,
// before it gives up: on a busy machine the edges learn of a sale late, and
// a lead long enough for the worst case is idle time on every other run.
const setUpTries = 3

// setUpWithin sets the run's sale up with SetUp's lead; when that was too
// short, it sets up a new sale (the id suffixed -2, -3) with twice the lead.
// A sale set up late is left as it is: nobody joins it.
func (s *sim) setUpWithin(ctx context.Context) error {
	lead := s.cfg.SetUp
	if lead <= 0 {
		lead = 3 * time.Second
	}
	for try := 1; ; try++ {
		s.sale = s.cfg.SaleID
		if try > 1 {
			s.sale = fmt.Sprintf("%s-%d", s.cfg.SaleID, try)
		}
		err := s.setUp(ctx, lead)
		if !errors.Is(err, errSetUpLate) || try == setUpTries {
			return err
		}
		s.cfg.Progress("%s: setting up took longer than its %v; setting up %s-%d with %v", s.sale, lead, s.cfg.SaleID, try+1, 2*lead)
		lead *= 2
	}
}

// setUp creates the sale, sets its admission rate (and hands it to the
// origin's controller with Autotune on) and waits until the edge serves
// it; the sale opens setUp plus PreQueueS (plus a moment) from now.
func (s *sim) setUp(ctx context.Context, setUp time.Duration) error {
	s.zero = time.Now().Add(setUp + time.Duration(s.cfg.PreQueueS*float64(time.Second))).Truncate(time.Second).Add(time.Second)
	// The sale ends a minute after the run's last hold could run out: a
	// bench sale left open costs every later run on these CPUs the edge's
	// snapshot refresh of it, four fetches a second (a capacity sweep makes
	// one per step).
	ends := s.zero.Add(time.Duration(s.cfg.MaxDurationS*float64(time.Second)) + time.Duration(s.cfg.HoldTTLS)*time.Second + time.Minute)
	sale := map[string]any{
		"sale_id": s.sale, "name": "Crowd run " + s.sale,
		"starts_at": s.zero.UTC().Format(time.RFC3339), "ends_at": ends.UTC().Format(time.RFC3339),
		"hold_ttl_s": s.cfg.HoldTTLS, "per_account_limit": 1,
		"skus": []map[string]any{{"sku": s.sku, "name": "Sneaker", "price_minor": 499900, "currency": "INR", "stock": s.cfg.Stock}},
	}
	if err := s.createSale(ctx, sale); err != nil {
		return err
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
	admission := map[string]any{"rate_per_s": rate}
	if a := s.cfg.Autotune; a.On() {
		admission["autotune"], admission["autotune_min_rate_per_s"], admission["autotune_max_rate_per_s"] = true, a.MinRatePerS, a.MaxRatePerS
	}
	if bits := s.cfg.Defences.challengeBits(); bits != nil {
		admission["challenge_bits"] = *bits
	}
	if status, body, err := s.admin(ctx, "PUT", s.cfg.EdgeAdminURL+"/admin/sales/"+s.sale+"/admission", admission); err != nil || status != 200 {
		return fmt.Errorf("crowd: set the admission rate, autotune and proof of work: %d %s %v", status, body, err)
	}
	s.setTarpit(ctx)
	if time.Until(s.zero) < time.Duration(s.cfg.PreQueueS*float64(time.Second)) {
		return errSetUpLate
	}
	return nil
}

// createSale creates the run's sale on the origin, asking again while it
// answers 503 (still starting) for up to 15 s. With defences set it says
// whether a payment instrument may pay for one unit only
// (one_unit_per_payer); an origin that does not know the field yet (400
// naming it) gets the sale without it, and the defence is recorded as not
// available.
func (s *sim) createSale(ctx context.Context, sale map[string]any) error {
	d := &s.cfg.Defences
	if d.Mode != "" {
		sale["one_unit_per_payer"] = d.on()
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, body, err := s.admin(ctx, "POST", s.cfg.OriginAdminURL+"/admin/sales", sale)
		switch {
		case err == nil && status == 201:
			if _, asked := sale["one_unit_per_payer"]; asked {
				d.OneUnitPerPayer = onOff(d.on())
			}
			return nil
		case err == nil && status == 400 && strings.Contains(string(body), "one_unit_per_payer"):
			d.OneUnitPerPayer = notAvailable(status, body, nil)
			delete(sale, "one_unit_per_payer")
		case err == nil && status == 503 && time.Now().Before(deadline):
			if !s.sleep(ctx, 500*time.Millisecond) {
				return ctx.Err()
			}
		default:
			return fmt.Errorf("crowd: create sale: %d %s %v", status, body, err)
		}
	}
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
// the tail spread evenly over TailS after it, and each bot cohort at the
// pre-queue's start or at the open (botShoppers).
func (s *sim) crowd() []*shopper {
	sc := s.cfg.Scenario
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x5eed))
	secs := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	out := make([]*shopper, 0, sc.Shoppers+sc.BotAccounts())
	for i := range sc.Shoppers {
		account := fmt.Sprintf("shopper-%06d", i)
		sh := &shopper{
			n: i, account: account, instrument: honestInstrument(account),
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
	s.cohorts = cohortRuns(sc)
	for _, c := range s.cohorts {
		out = append(out, botShoppers(c, len(out), sc, s.cfg.Seed)...)
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

// stageScrape is one reading of both tiers' /metrics; a tier that could not
// be read is nil, and why is a note for the report (the run goes on).
type stageScrape struct {
	edge, origin procstat.Scrape
	notes        []string
}

// scrapeStages reads the edge's and the origin's histograms, when (before
// or after the crowd) naming the reading in a failure's note.
func (s *sim) scrapeStages(ctx context.Context, when string) stageScrape {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := &http.Client{}
	var out stageScrape
	for _, t := range []struct {
		name, url string
		into      *procstat.Scrape
	}{{"edge", s.cfg.EdgeAdminURL, &out.edge}, {"origin", s.cfg.OriginAdminURL, &out.origin}} {
		sc, err := procstat.FetchMetrics(ctx, c, t.url+"/metrics", s.cfg.AdminToken)
		if err != nil {
			out.notes = append(out.notes, fmt.Sprintf("Where a request's time goes: the %s's /metrics could not be read %s the crowd, "+
				"so its stages are missing: %v", t.name, when, err))
			continue
		}
		*t.into = sc
	}
	return out
}

// stageSpec is one row of "where a request's time goes": the client's
// endpoint (from the recorder), or a tier's histogram and the labels that
// pick its series (added up over the labels not named, such as status).
type stageSpec struct {
	path, name string
	endpoint   string // the client's; "" for a service's stage
	origin     bool   // the origin's histogram, else the edge's
	metric     string
	labels     map[string]string
}

// stageSpecs are the paths' stages, the client first, then inward. The
// edge's route and upstream names are edge/internal/api's, the origin's
// origin/internal/api's; the edge's payments pool carries orders, order
// reads, reservation reads and the webhook alike.
var stageSpecs = []stageSpec{
	{path: "reserve", name: "client: reserve", endpoint: epReserve},
	{path: "reserve", name: "edge: reserve handler", metric: "flashgate_edge_request_seconds", labels: map[string]string{"route": "reserve"}},
	{path: "reserve", name: "edge: wait for an origin connection", metric: "flashgate_edge_origin_wait_seconds", labels: map[string]string{"upstream": "origin"}},
	{path: "reserve", name: "edge: upstream round trip (the wait included)", metric: "flashgate_edge_upstream_seconds", labels: map[string]string{"upstream": "origin"}},
	{path: "reserve", name: "origin: reserve handler", origin: true, metric: "flashgate_origin_request_seconds", labels: map[string]string{"route": "reserve"}},
	{path: "reserve", name: "origin: Redis reserve script (its pipeline's round trip)", origin: true, metric: "flashgate_origin_redis_script_seconds", labels: map[string]string{"script": "reserve"}},
	{path: "reserve", name: "origin: Postgres journal write (one per batch)", origin: true, metric: "flashgate_origin_postgres_seconds", labels: map[string]string{"op": "record_grants"}},

	{path: "order", name: "client: order_create", endpoint: epOrderCreate},
	{path: "order", name: "edge: orders handler", metric: "flashgate_edge_request_seconds", labels: map[string]string{"route": "orders"}},
	{path: "order", name: "edge: wait for a payments-pool connection (all its routes)", metric: "flashgate_edge_origin_wait_seconds", labels: map[string]string{"upstream": "origin_payments"}},
	{path: "order", name: "edge: payments-pool round trip (all its routes)", metric: "flashgate_edge_upstream_seconds", labels: map[string]string{"upstream": "origin_payments"}},
	{path: "order", name: "origin: create_order handler", origin: true, metric: "flashgate_origin_request_seconds", labels: map[string]string{"route": "create_order"}},
	{path: "order", name: "origin: gateway create_intent", origin: true, metric: "flashgate_origin_gateway_seconds", labels: map[string]string{"call": "create_intent"}},
	{path: "order", name: "origin: Postgres order_of_reservation", origin: true, metric: "flashgate_origin_postgres_seconds", labels: map[string]string{"op": "order_of_reservation"}},
	{path: "order", name: "origin: Postgres create_order", origin: true, metric: "flashgate_origin_postgres_seconds", labels: map[string]string{"op": "create_order"}},
	{path: "order", name: "origin: Postgres set_order_intent", origin: true, metric: "flashgate_origin_postgres_seconds", labels: map[string]string{"op": "set_order_intent"}},

	{path: "order read", name: "client: order_get", endpoint: epOrderGet},
	{path: "order read", name: "edge: order handler", metric: "flashgate_edge_request_seconds", labels: map[string]string{"route": "order"}},
	{path: "order read", name: "origin: order handler", origin: true, metric: "flashgate_origin_request_seconds", labels: map[string]string{"route": "order"}},
	{path: "order read", name: "origin: Postgres order", origin: true, metric: "flashgate_origin_postgres_seconds", labels: map[string]string{"op": "order"}},

	{path: "join", name: "client: join", endpoint: epJoin},
	{path: "join", name: "edge: join handler", metric: "flashgate_edge_request_seconds", labels: map[string]string{"route": "join"}},

	{path: "status", name: "client: status", endpoint: epStatus},
	{path: "status", name: "edge: status handler", metric: "flashgate_edge_request_seconds", labels: map[string]string{"route": "status"}},
}

// stages fills stageSpecs from the client's endpoints and the difference
// of the two scrapes. A stage with nothing to read (its tier not scraped,
// its series never observed) is left out; one observed zero times over the
// crowd is kept with count 0.
func stages(endpoints []Endpoint, before, after stageScrape) []Stage {
	client := map[string]Endpoint{}
	for _, e := range endpoints {
		client[e.Name] = e
	}
	var out []Stage
	for _, sp := range stageSpecs {
		st := Stage{Path: sp.path, Name: sp.name, Source: "client"}
		if sp.endpoint != "" {
			e, ok := client[sp.endpoint]
			if !ok {
				continue
			}
			st.Count, st.P50Ms, st.P99Ms = e.Count, e.P50Ms, e.P99Ms
			out = append(out, st)
			continue
		}
		b, a := before.edge, after.edge
		if sp.origin {
			b, a = before.origin, after.origin
		}
		if b == nil || a == nil {
			continue
		}
		h, ok := procstat.Delta(b, a, sp.metric, sp.labels)
		if !ok {
			continue
		}
		st.Source = sourceOf(sp)
		st.Count = int(math.Round(h.Count))
		if st.Count > 0 {
			st.P50Ms, st.P99Ms = 1000*h.Quantile(0.5), 1000*h.Quantile(0.99)
		}
		out = append(out, st)
	}
	return out
}

// sourceOf names a service stage's series as a query would:
// metric{label="value"}.
func sourceOf(sp stageSpec) string {
	keys := slices.Sorted(maps.Keys(sp.labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(sp.labels[k])
	}
	return sp.metric + "{" + strings.Join(parts, ",") + "}"
}
