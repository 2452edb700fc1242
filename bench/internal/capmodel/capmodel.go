// Package capmodel turns measured per-request costs into the fleet a sale's
// peak needs — edge nodes, Redis primaries, origins, Postgres cores — and
// names the single-threaded resource that stops scaling first. It is pure:
// the figures come in (command bench/model reads them from the benchmarks'
// reports and docs/capacity-inputs.json), the fleet comes out, and Render
// writes it as the generated part of docs/CAPACITY.md.
//
// CPU figures are microseconds of one core per request (or per unit sold);
// a rate times a cost in µs, over 1e6, is cores.
package capmodel

import (
	"errors"
	"fmt"
	"math"
)

// Costs are the measured costs the model is built from.
type Costs struct {
	EdgeJoinMicros    float64 // edge CPU per join
	EdgePollMicros    float64 // edge CPU per status poll, whatever it answers (waiting, admitted, sold out)
	EdgeSoldOutMicros float64 // edge CPU per reserve answered 409 sold_out from the edge's snapshot
	EdgeProxiedMicros float64 // edge CPU per request it passes to the origin (reserve, order, webhook)

	RedisJoinMicros      float64 // Redis CPU per join, on the sale's line slot
	RedisReserveMicros   float64 // Redis CPU per reserve, on the sale's stock slot
	RedisBytesPerShopper float64 // Redis memory per shopper in line
	// RedisBestJoinsPerS is the most joins a second one Redis has taken in
	// any benchmark, its thread at 100 %: a ceiling beyond any headroom.
	RedisBestJoinsPerS float64

	OriginReserveMicros   float64 // origin CPU per reserve, the reserve path alone
	PostgresReserveMicros float64 // Postgres CPU per reserve (its journal row)
	// OriginUnitMicros and PostgresUnitMicros are the CPU per unit sold with
	// everything in it (reserves, orders, payments, workers, clock-driven
	// work): an upper bound where the per-request costs are not measured.
	OriginUnitMicros   float64
	PostgresUnitMicros float64
	ProxiedPerUnit     float64 // requests the edge passes to the origin per unit sold
	WriterIntentsPerS  float64 // intents a second one Postgres's order writer applies to one hot SKU
	IntentsPerUnit     float64 // stream intents per unit sold

	JoinsPerArrival        float64 // joins each arriving shopper makes
	CDNFetchesPerCachePerS float64 // snapshot fetches one CDN cache sends the edges a second
}

// Validate reports the first cost that is not a positive number.
func (c Costs) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"edge join µs", c.EdgeJoinMicros}, {"edge poll µs", c.EdgePollMicros}, {"edge sold-out µs", c.EdgeSoldOutMicros},
		{"edge proxied µs", c.EdgeProxiedMicros}, {"Redis join µs", c.RedisJoinMicros}, {"Redis reserve µs", c.RedisReserveMicros},
		{"Redis bytes per shopper", c.RedisBytesPerShopper}, {"Redis best joins/s", c.RedisBestJoinsPerS},
		{"origin reserve µs", c.OriginReserveMicros}, {"Postgres reserve µs", c.PostgresReserveMicros},
		{"origin µs per unit", c.OriginUnitMicros}, {"Postgres µs per unit", c.PostgresUnitMicros},
		{"proxied requests per unit", c.ProxiedPerUnit}, {"writer intents/s", c.WriterIntentsPerS},
		{"intents per unit", c.IntentsPerUnit}, {"joins per arrival", c.JoinsPerArrival},
		{"CDN fetches per cache per s", c.CDNFetchesPerCachePerS},
	} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("cost %s = %v: want a positive number", f.name, f.v)
		}
	}
	return nil
}

// Page is how the shop's page (static/app.js) and the edge's answers pace a
// shopper's requests.
type Page struct {
	SnapshotPeriodS float64 // a page re-reads the sale snapshot, through the CDN, this often
	FilesPerArrival float64 // page files each arrival loads through the CDN (index, CSS, JS, worker)
	// A waiting shopper is told to poll after half its estimated wait,
	// clamped to [MinPollS, MaxPollS]; once half the wait reaches MaxPollS
	// it is told a fixed moment in [FarPollMinS, MaxPollS] instead.
	MinPollS    float64
	MaxPollS    float64
	FarPollMinS float64
}

// Validate reports the first thing wrong with p.
func (p Page) Validate() error {
	switch {
	case !(p.SnapshotPeriodS > 0) || p.FilesPerArrival < 0:
		return errors.New("page: the snapshot period must be positive and the files per arrival not negative")
	case !(p.MinPollS > 0) || !(p.FarPollMinS >= p.MinPollS) || !(p.MaxPollS > p.FarPollMinS):
		return errors.New("page: want 0 < min poll <= far poll min < max poll")
	}
	return nil
}

// farMeanRate is the mean poll rate of one shopper far back in line: E[1/P]
// for P uniform on [FarPollMinS, MaxPollS].
func (p Page) farMeanRate() float64 {
	a, b := p.FarPollMinS, p.MaxPollS
	return math.Log(b/a) / (b - a)
}

// farShare is how many polls a second, per arrival a second, the shoppers
// who arrived over the last t seconds make at its end: each far-back
// shopper polls first P after joining and every P after that, P uniform
// on [a, b], so the rate is E[max(0, t-P)/P].
func (p Page) farShare(t float64) float64 {
	a, b := p.FarPollMinS, p.MaxPollS
	if t <= a {
		return 0
	}
	m := min(t, b)
	return (t*math.Log(m/a) - (m - a)) / (b - a)
}

// frontShare is the polls a second, per admission a second, of the front
// of a moving line: the shoppers whose wait w is under 2×MaxPollS (R of
// them per second of wait) poll every clamp(w/2, MinPollS, MaxPollS), so
// R × (2 + 2 ln(MaxPollS / MinPollS)).
func (p Page) frontShare() float64 { return 2 + 2*math.Log(p.MaxPollS/p.MinPollS) }

// Plan is how the fleet is run: the headroom it keeps and the node shape.
type Plan struct {
	// Headroom is the share of each core, and of Redis's one thread, the
	// fleet plans to use at the peak (0.6: at most 60 % busy).
	Headroom           float64
	EdgeCoresPerNode   float64
	OriginCoresPerNode float64
	MinNodes           int     // edge and origin nodes at the least, so that one can be lost
	CDNCaches          float64 // CDN caches in front of the edges, each fetching the snapshot on its own
}

// Validate reports the first thing wrong with p.
func (p Plan) Validate() error {
	switch {
	case !(p.Headroom > 0) || p.Headroom > 1:
		return errors.New("plan: headroom must be in (0, 1]")
	case !(p.EdgeCoresPerNode > 0) || !(p.OriginCoresPerNode > 0):
		return errors.New("plan: cores per node must be positive")
	case p.MinNodes < 1 || p.CDNCaches < 0:
		return errors.New("plan: at least one node, and no negative number of CDN caches")
	}
	return nil
}

// Seed is one peak the seeds ask for.
type Seed struct {
	Name     string
	Shoppers float64 // arriving over the window
	WindowS  float64
	Stock    float64
	// AdmissionPerS is the sale's admission rate; 0 means Stock / WindowS,
	// the stock lasting the whole peak.
	AdmissionPerS float64
}

// Validate reports the first thing wrong with s.
func (s Seed) Validate() error {
	if !(s.Shoppers > 0) || !(s.WindowS > 0) || !(s.Stock > 0) || s.AdmissionPerS < 0 {
		return fmt.Errorf("seed %q: shoppers, window and stock must be positive", s.Name)
	}
	return nil
}

// Phase is the edge's load in one phase of a peak, per second.
type Phase struct {
	Name         string
	JoinsPerS    float64
	PollsPerS    float64
	ProxiedPerS  float64
	FetchesPerS  float64 // snapshot fetches from the CDN caches
	RequestsPerS float64
	Cores        float64 // edge CPU
}

// Limit is one resource a single sale cannot spread over more machines.
type Limit struct {
	Resource string
	Unit     string  // what Demand and Capacity count, per second
	Demand   float64 // what the peak asks of it
	Capacity float64 // what it gives at the plan's headroom
}

// Use is Demand over Capacity: above 1 the peak does not fit.
func (l Limit) Use() float64 { return l.Demand / l.Capacity }

// Fleet is what one seed's peak needs.
type Fleet struct {
	Seed          Seed
	ArrivalsPerS  float64
	AdmissionPerS float64

	// Arrivals is the edge's load at the end of the arrival window (joins,
	// the first far-back polls, the moving front); Line is after it, the
	// whole crowd in line polling far back. Peak is the one with more CPU.
	Arrivals, Line, Peak Phase
	EdgeNodes            int

	SnapshotLoadsPerS float64 // at the CDN, the whole crowd on the page
	PageFilesPerS     float64 // at the CDN
	CDNShare          float64 // of every request the crowd sends, at the peak

	LineRedisCores  float64 // the sale's line slot: joins
	StockRedisCores float64 // the sale's stock slot: reserves
	// RedisPrimaries is per sale: the line and stock slots share one when
	// both fit in the headroom together. When the line alone does not fit
	// (LineFits false) it is what a line split over primaries would take,
	// which is not built.
	RedisPrimaries int
	LineFits       bool
	// JoinSpreadS is how long the crowd's joins must be spread over (the
	// pre-queue) for one primary's thread to take them at the headroom.
	JoinSpreadS float64
	RedisBytes  float64 // the line, the whole crowd in it

	// Origin and Postgres: Low is the reserve path alone (measured per
	// request), High everything per unit sold (an upper bound).
	OriginCoresLow, OriginCoresHigh     float64
	OriginNodesLow, OriginNodesHigh     int
	PostgresCoresLow, PostgresCoresHigh float64

	// Limits are the per-sale resources, line slot first; First is the
	// one with the highest use, the first to stop as the crowd grows.
	Limits []Limit
	First  Limit
	// BestRateUse is the joins a second over the most one Redis has
	// taken in any benchmark, at 100 % of its thread.
	BestRateUse float64
}

// Compute sizes the fleet for one seed's peak.
func Compute(c Costs, page Page, plan Plan, s Seed) (Fleet, error) {
	if err := errors.Join(c.Validate(), page.Validate(), plan.Validate(), s.Validate()); err != nil {
		return Fleet{}, err
	}
	f := Fleet{Seed: s, ArrivalsPerS: s.Shoppers / s.WindowS, AdmissionPerS: s.AdmissionPerS}
	if f.AdmissionPerS == 0 {
		f.AdmissionPerS = s.Stock / s.WindowS
	}
	r := f.AdmissionPerS
	// Polls every phase has while the line moves: its front, and one
	// "admitted" poll per admission (the page asks at once when the
	// snapshot shows its turn). Proxied: each unit's reserve, order and
	// webhook. Fetches: each CDN cache's own snapshot fetches.
	front := r*page.frontShare() + r
	proxied := r * c.ProxiedPerUnit
	fetches := plan.CDNCaches * c.CDNFetchesPerCachePerS
	f.Arrivals = c.phase("arrivals", f.ArrivalsPerS*c.JoinsPerArrival, f.ArrivalsPerS*page.farShare(s.WindowS)+front, proxied, fetches)
	f.Line = c.phase("line", 0, s.Shoppers*page.farMeanRate()+front, proxied, fetches)
	f.Peak = f.Arrivals
	if f.Line.Cores > f.Arrivals.Cores {
		f.Peak = f.Line
	}
	f.EdgeNodes = Nodes(f.Peak.Cores, plan.EdgeCoresPerNode, plan.Headroom, plan.MinNodes)

	f.SnapshotLoadsPerS = s.Shoppers / page.SnapshotPeriodS
	f.PageFilesPerS = f.ArrivalsPerS * page.FilesPerArrival
	cdn := f.SnapshotLoadsPerS + f.PageFilesPerS - fetches
	f.CDNShare = cdn / (cdn + f.Peak.RequestsPerS)

	joins := f.ArrivalsPerS * c.JoinsPerArrival
	f.LineRedisCores = joins * c.RedisJoinMicros / 1e6
	f.StockRedisCores = r * c.RedisReserveMicros / 1e6
	f.LineFits = f.LineRedisCores <= plan.Headroom
	switch {
	case f.LineFits && f.LineRedisCores+f.StockRedisCores <= plan.Headroom:
		f.RedisPrimaries = 1
	default:
		f.RedisPrimaries = Nodes(f.LineRedisCores, 1, plan.Headroom, 1) + Nodes(f.StockRedisCores, 1, plan.Headroom, 1)
	}
	f.JoinSpreadS = s.Shoppers * c.JoinsPerArrival * c.RedisJoinMicros / 1e6 / plan.Headroom
	f.RedisBytes = s.Shoppers * c.RedisBytesPerShopper

	f.OriginCoresLow = r * c.OriginReserveMicros / 1e6
	f.OriginCoresHigh = r * c.OriginUnitMicros / 1e6
	f.OriginNodesLow = Nodes(f.OriginCoresLow, plan.OriginCoresPerNode, plan.Headroom, plan.MinNodes)
	f.OriginNodesHigh = Nodes(f.OriginCoresHigh, plan.OriginCoresPerNode, plan.Headroom, plan.MinNodes)
	f.PostgresCoresLow = r * c.PostgresReserveMicros / 1e6 / plan.Headroom
	f.PostgresCoresHigh = r * c.PostgresUnitMicros / 1e6 / plan.Headroom

	f.Limits = []Limit{
		{Resource: "Redis: the sale's line slot (one thread)", Unit: "joins", Demand: joins, Capacity: plan.Headroom * 1e6 / c.RedisJoinMicros},
		{Resource: "Redis: the sale's stock slot (one thread)", Unit: "reserves", Demand: r, Capacity: plan.Headroom * 1e6 / c.RedisReserveMicros},
		{Resource: "Postgres: the order writer on the hot SKU row", Unit: "intents", Demand: r * c.IntentsPerUnit, Capacity: plan.Headroom * c.WriterIntentsPerS},
	}
	f.First = f.Limits[0]
	for _, l := range f.Limits[1:] {
		if l.Use() > f.First.Use() {
			f.First = l
		}
	}
	f.BestRateUse = joins / c.RedisBestJoinsPerS
	return f, nil
}

// phase is the edge's load from the given rates.
func (c Costs) phase(name string, joins, polls, proxied, fetches float64) Phase {
	return Phase{
		Name: name, JoinsPerS: joins, PollsPerS: polls, ProxiedPerS: proxied, FetchesPerS: fetches,
		RequestsPerS: joins + polls + proxied + fetches,
		// A snapshot fetch is answered from memory like a poll without a
		// token; the poll's cost bounds it.
		Cores: (joins*c.EdgeJoinMicros + (polls+fetches)*c.EdgePollMicros + proxied*c.EdgeProxiedMicros) / 1e6,
	}
}

// Nodes is how many nodes of perNode cores carry cores at headroom, at
// least least.
func Nodes(cores, perNode, headroom float64, least int) int {
	n := int(math.Ceil(cores/(perNode*headroom) - 1e-9))
	return max(n, least)
}

// PerNode is how many requests a second of a kind costing micros one node
// of cores answers at headroom.
func PerNode(micros, cores, headroom float64) float64 { return headroom * cores * 1e6 / micros }

// EdgeCheck is a measured crowd point: the edge's CPU between two crowd
// sizes of the same sale, against the requests and joins it added.
type EdgeCheck struct {
	Name          string
	AddedRequests float64 // answered requests the larger crowd added
	AddedJoins    float64 // of which joins; the rest are counted as polls
	AddedEdgeCPUS float64 // edge CPU seconds it added
	Primary       bool    // the point the document's calibrated edge count uses
}

// Predict is the edge CPU seconds the model's costs give the point.
func (c Costs) Predict(ch EdgeCheck) float64 {
	return (ch.AddedJoins*c.EdgeJoinMicros + (ch.AddedRequests-ch.AddedJoins)*c.EdgePollMicros) / 1e6
}

// CheckoutCheck is a measured run's origin and Postgres CPU for one sale,
// at a crowd size whose figures the model did not use: the model says it
// follows the stock, not the crowd.
type CheckoutCheck struct {
	Name         string
	Stock        float64
	MeasuredCPUS float64 // origin + Postgres CPU seconds
}

// PredictCheckout is the origin and Postgres CPU seconds the model's
// per-unit costs give the sale.
func (c Costs) PredictCheckout(ch CheckoutCheck) float64 {
	return ch.Stock * (c.OriginUnitMicros + c.PostgresUnitMicros) / 1e6
}

// Error is (predicted - measured) / measured.
func Error(predicted, measured float64) float64 { return (predicted - measured) / measured }
