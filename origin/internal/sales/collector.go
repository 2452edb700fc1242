package sales

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// The collector reads the books on every scrape, so that alerts see them
// as the ledger answer (GET /admin/sales/{id}/ledger) does, and bounds what
// a scrape may cost: the sales watched, and the time spent.
const (
	// collectBudget bounds a whole collection, pings included; sales whose
	// books are not read by then count as errors.
	collectBudget = 2 * time.Second
	// pingBudget bounds each dependency's ping.
	pingBudget = time.Second
	// watchWindow: a sale is watched from this long before its start to
	// this long after its end.
	watchWindow = time.Hour
	// maxWatched caps the sales watched, the newest (latest start) first.
	maxWatched = 20
	// overdueAfter is how long past its expiry a hold still held counts as
	// overdue: far more than a sweep interval, so only a sweeper that is
	// behind or down shows.
	overdueAfter = 10 * time.Second
)

// Dependency is a store the collector pings on every scrape: Name is its
// dependency label ("redis", "postgres").
type Dependency struct {
	Name string
	Ping func(context.Context) error
}

// Collector is a prometheus.Collector of the watched sales' books (see
// watched), read anew on every scrape, and of whether the origin reaches its
// dependencies. The books need every dependency: while one is down, no
// sale's books are read, each counts an error and its gauges are left out
// of the scrape (never reported as 0). It is safe for concurrent scrapes.
type Collector struct {
	sales *Service
	deps  []Dependency

	units, drift, pending, lag, overdue, up, errors *prometheus.Desc

	mu     sync.Mutex         // guards failed
	failed map[string]float64 // books_errors_total by sale, for the sales watched
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector of s's sales that pings deps.
func NewCollector(s *Service, deps ...Dependency) *Collector {
	return &Collector{
		sales: s, deps: deps, failed: map[string]float64{},
		units: prometheus.NewDesc("flashgate_sale_units",
			"A watched sale's stock units by SKU as each book holds them: book redis (the live gate) or postgres (the ledger); state available, held or sold.",
			[]string{"sale", "sku", "book", "state"}, nil),
		drift: prometheus.NewDesc("flashgate_sale_drift_units",
			"Units Redis counts beyond Postgres plus the intents the order writer has not applied yet, by SKU and state (the ledger's drift); 0 when the books agree.",
			[]string{"sale", "sku", "state"}, nil),
		pending: prometheus.NewDesc("flashgate_sale_pending_intents",
			"Intents in the sale's stream the order writer has not applied to Postgres yet.",
			[]string{"sale"}, nil),
		lag: prometheus.NewDesc("flashgate_sale_writer_lag_seconds",
			"Age of the oldest intent the order writer has not applied yet (by its stream id); 0 when none is pending.",
			[]string{"sale"}, nil),
		overdue: prometheus.NewDesc("flashgate_sale_overdue_holds",
			"Holds still held in Redis whose expiry (payment grace included) passed more than 10 s ago: the sweeper is behind.",
			[]string{"sale"}, nil),
		up: prometheus.NewDesc("flashgate_origin_dependency_up",
			"1 if the dependency (redis, postgres) answered a ping within 1 s during this scrape, else 0.",
			[]string{"dependency"}, nil),
		errors: prometheus.NewDesc("flashgate_sale_books_errors_total",
			"Scrapes that could not read a watched sale's books (Redis or Postgres down or slow); those scrapes leave the sale's gauges out.",
			[]string{"sale"}, nil),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.units, c.drift, c.pending, c.lag, c.overdue, c.up, c.errors} {
		ch <- d
	}
}

// Collect pings the dependencies, then reads each watched sale's books.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectBudget)
	defer cancel()
	allUp := c.ping(ctx, ch)
	now := c.sales.opts.Clock.Now()
	sales := watched(c.sales.catalog.All(), now)
	ok := make(map[string]bool, len(sales))
	for _, sale := range sales {
		if !allUp {
			continue // the books need both stores: an error, without waiting on a dead one
		}
		metrics, err := c.saleMetrics(ctx, sale, now)
		if err != nil {
			continue
		}
		ok[sale.ID] = true
		for _, m := range metrics {
			ch <- m
		}
	}
	for id, n := range c.countErrors(sales, ok) {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, n, id)
	}
}

// ping pings every dependency at once, each within pingBudget, sends
// whether each answered, and reports whether all did.
func (c *Collector) ping(ctx context.Context, ch chan<- prometheus.Metric) bool {
	up := make([]bool, len(c.deps))
	var wg sync.WaitGroup
	for i, d := range c.deps {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, pingBudget)
			defer cancel()
			up[i] = d.Ping(pctx) == nil
		})
	}
	wg.Wait()
	all := true
	for i, d := range c.deps {
		v := 0.0
		if up[i] {
			v = 1
		}
		all = all && up[i]
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, v, d.Name)
	}
	return all
}

// saleMetrics reads one sale's books and overdue holds, and returns its
// gauges only when every read succeeded: a scrape never shows half a sale.
func (c *Collector) saleMetrics(ctx context.Context, sale ledger.Sale, now time.Time) ([]prometheus.Metric, error) {
	skus, oldest, err := c.sales.stockBooks(ctx, sale)
	if err != nil {
		return nil, err
	}
	overdue, err := c.sales.checkout.OverdueHolds(ctx, sale.ID, overdueAfter)
	if err != nil {
		return nil, err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
		return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var out []prometheus.Metric
	pending := 0
	for _, k := range skus {
		for _, b := range []struct {
			book   string
			counts Counts
		}{{"redis", k.Redis}, {"postgres", k.DB}} {
			out = append(out,
				gauge(c.units, float64(b.counts.Available), sale.ID, k.SKU, b.book, "available"),
				gauge(c.units, float64(b.counts.Held), sale.ID, k.SKU, b.book, "held"),
				gauge(c.units, float64(b.counts.Sold), sale.ID, k.SKU, b.book, "sold"))
		}
		out = append(out,
			gauge(c.drift, float64(k.Drift.Available), sale.ID, k.SKU, "available"),
			gauge(c.drift, float64(k.Drift.Held), sale.ID, k.SKU, "held"),
			gauge(c.drift, float64(k.Drift.Sold), sale.ID, k.SKU, "sold"))
		pending += k.PendingIntents
	}
	lag := 0.0
	if !oldest.IsZero() {
		// Redis's clock stamped the id, ours reads it: a little skew must
		// not show as a negative age.
		lag = max(0, now.Sub(oldest).Seconds())
	}
	return append(out,
		gauge(c.pending, float64(pending), sale.ID),
		gauge(c.lag, lag, sale.ID),
		gauge(c.overdue, float64(overdue), sale.ID)), nil
}

// countErrors adds one error for each watched sale whose books were not
// read (not in ok), forgets the sales no longer watched (so the counters do
// not grow with every sale ever run; one watched again starts from 0, a
// counter reset), and returns the counts of the watched sales, each from 0
// so that an alert sees its first error as an increase.
func (c *Collector) countErrors(sales []ledger.Sale, ok map[string]bool) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := make(map[string]float64, len(sales))
	for _, sale := range sales {
		n := c.failed[sale.ID]
		if !ok[sale.ID] {
			n++
		}
		counts[sale.ID] = n
	}
	c.failed = counts
	return maps.Clone(counts)
}

// watched are the sales whose books the collector reads at now: open, or
// starting or ended within watchWindow; the maxWatched newest (latest
// start, then id) when there are more.
func watched(all []ledger.Sale, now time.Time) []ledger.Sale {
	var out []ledger.Sale
	for _, s := range all {
		if !s.StartsAt.After(now.Add(watchWindow)) && s.EndsAt.After(now.Add(-watchWindow)) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Sale) int {
		if c := b.StartsAt.Compare(a.StartsAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(len(out), maxWatched)]
}
