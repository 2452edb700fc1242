package autotune

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashgate/flashgate/internal/clock"
)

// BackEnd is the Signals of an origin: the reserves it answered and the
// Redis scripts it ran since the last read, from its own metrics, and the
// sale's books. (It sees this origin's share of the reserves: with several
// origins behind the edges, a sample of them.)
type BackEnd struct {
	// Gatherer is the origin's metrics registry.
	Gatherer prometheus.Gatherer
	// Backlog reads the sale's books: units available, intents Postgres
	// has not applied, and when the oldest entered the stream.
	Backlog func(ctx context.Context, sale string) (available int64, pending int, oldest time.Time, err error)
	// Line reads the sale's line as the edges keep it in Redis (RedisLine);
	// nil: the reading says nothing of what the edges admitted.
	Line func(ctx context.Context, sale string) (Line, error)
	// Clock is the time the writer's lag and the period are measured at;
	// nil: clock.Real.
	Clock clock.Clock
	// MaxPeriod is the longest time between two reads of a sale that
	// still makes a period: a read after a longer gap (autotune switched
	// off a while, another origin tuning meanwhile) counts as a first.
	// 0: no bound.
	MaxPeriod time.Duration

	mu   sync.Mutex
	last map[string]counts // by sale: the metrics at its last read
}

// Line is how far the edges took a sale's line.
type Line struct {
	// Present: Redis holds the line's cursor; without it (not created
	// yet, or lost and being restored) the rest is zero and says nothing.
	Present    bool
	NowServing int64 // positions up to this one are admitted
	Length     int64 // places handed out
	HeldMs     int64 // when an edge last held admission (Redis's unix ms; 0: never)
}

// The metrics BackEnd reads, and the route of a reserve.
const (
	requestSeconds = "flashgate_origin_request_seconds"
	scriptSeconds  = "flashgate_origin_redis_script_seconds"
	reserveRoute   = "reserve"
)

// counts are cumulative observations, for a difference between two reads.
type counts struct {
	at               time.Time
	reserves, failed histogram
	scripts          histogram
	line             Line
	hasLine          bool
}

// histogram is a cumulative histogram: observations at or under each
// upper bound, and in all.
type histogram struct {
	bounds []float64
	under  []uint64
	total  uint64
}

// Read implements Signals.
func (b *BackEnd) Read(ctx context.Context, sale string) (Reading, error) {
	now := clock.Or(b.Clock).Now
	available, pending, oldest, err := b.Backlog(ctx, sale)
	if err != nil {
		return Reading{}, err
	}
	families, err := b.Gatherer.Gather()
	if err != nil {
		return Reading{}, err
	}
	cur := gather(families)
	cur.at = now()
	if b.Line != nil {
		if cur.line, err = b.Line(ctx, sale); err != nil {
			return Reading{}, err
		}
		cur.hasLine = cur.line.Present
	}
	b.mu.Lock()
	if b.last == nil {
		b.last = map[string]counts{}
	}
	prev, seen := b.last[sale]
	b.last[sale] = cur
	b.mu.Unlock()
	r := Reading{Available: available, Pending: pending}
	if !oldest.IsZero() {
		r.WriterLag = max(cur.at.Sub(oldest), 0)
	}
	if !seen || b.MaxPeriod > 0 && cur.at.Sub(prev.at) > b.MaxPeriod {
		return r, nil // a first read has no period behind it
	}
	reserves := cur.reserves.since(prev.reserves)
	r.Reserves = int(reserves.total)
	r.Errors = int(cur.failed.since(prev.failed).total)
	r.ReserveP99 = reserves.quantile(0.99)
	r.RedisP99 = cur.scripts.since(prev.scripts).quantile(0.99)
	// A line absent at either end (lost, then restored at its ceiling)
	// makes no period of it: the cursor's jump is no admission rate.
	if cur.hasLine && prev.hasLine {
		// Held is a change of held_ms, not a comparison with this
		// origin's clock: Redis's may differ.
		r.Period = cur.at.Sub(prev.at)
		r.Admitted = max(cur.line.NowServing-prev.line.NowServing, 0)
		r.Waiting = max(cur.line.Length-cur.line.NowServing, 0)
		r.EdgesHeld = cur.line.HeldMs > prev.line.HeldMs
	}
	return r, nil
}

// gather sums the reserve route's and the Redis scripts' histograms out of
// a registry's families; failed are the reserves answered 5xx (please_wait
// among them).
func gather(families []*dto.MetricFamily) counts {
	var c counts
	for _, f := range families {
		switch f.GetName() {
		case requestSeconds:
			for _, m := range f.GetMetric() {
				if label(m, "route") != reserveRoute {
					continue
				}
				c.reserves.add(m.GetHistogram())
				if status, _ := strconv.Atoi(label(m, "status")); status >= 500 {
					c.failed.add(m.GetHistogram())
				}
			}
		case scriptSeconds:
			for _, m := range f.GetMetric() {
				c.scripts.add(m.GetHistogram())
			}
		}
	}
	return c
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// add sums h into the histogram (every series of one metric shares its
// bounds).
func (h *histogram) add(p *dto.Histogram) {
	if p == nil {
		return
	}
	if h.bounds == nil {
		for _, b := range p.GetBucket() {
			h.bounds = append(h.bounds, b.GetUpperBound())
			h.under = append(h.under, 0)
		}
	}
	for i, b := range p.GetBucket() {
		if i < len(h.under) {
			h.under[i] += b.GetCumulativeCount()
		}
	}
	h.total += p.GetSampleCount()
}

// since is the histogram of the observations made after prev.
func (h histogram) since(prev histogram) histogram {
	out := histogram{bounds: h.bounds, under: make([]uint64, len(h.under)), total: h.total - min(prev.total, h.total)}
	for i := range h.under {
		var p uint64
		if i < len(prev.under) {
			p = prev.under[i]
		}
		out.under[i] = h.under[i] - min(p, h.under[i])
	}
	return out
}

// quantile is the upper bound of the bucket holding the q quantile (twice
// the last bound when it is above them all), 0 without observations.
func (h histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	for i, n := range h.under {
		if n >= rank {
			return seconds(h.bounds[i])
		}
	}
	if len(h.bounds) == 0 {
		return 0
	}
	return seconds(2 * h.bounds[len(h.bounds)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
