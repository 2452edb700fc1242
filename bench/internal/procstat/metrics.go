// Reading the services' own latency histograms from their /metrics
// endpoints: scrape before and after, take the difference, read count, p50
// and p99 from the buckets as Prometheus's histogram_quantile does.

package procstat

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Histogram is one histogram series, or several of one metric added up.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending, +Inf last; Counts
	// their cumulative counts, as the exposition format gives them.
	Bounds []float64
	Counts []float64
	Count  float64 // observations, the +Inf bucket's count
	Sum    float64 // of the observed values
}

// Series is one labelled histogram of a scrape.
type Series struct {
	Labels map[string]string
	Histogram
}

// Scrape is one reading of an endpoint: every histogram series, by metric
// name. Metrics of other types are left out.
type Scrape map[string][]Series

// FetchMetrics reads url (a /metrics endpoint) with token as its bearer token; ""
// sends none. ctx bounds the request.
func FetchMetrics(ctx context.Context, client *http.Client, url, token string) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The text format, whatever else the endpoint could negotiate.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: scrape %s: status %d", url, resp.StatusCode)
	}
	s, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics: scrape %s: %w", url, err)
	}
	return s, nil
}

// ParseMetrics reads the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := Scrape{}
	for name, mf := range families {
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[name] = append(out[name], series(m))
		}
	}
	return out, nil
}

func series(m *dto.Metric) Series {
	s := Series{Labels: map[string]string{}}
	for _, l := range m.GetLabel() {
		s.Labels[l.GetName()] = l.GetValue()
	}
	h := m.GetHistogram()
	for _, b := range h.GetBucket() {
		s.Bounds = append(s.Bounds, b.GetUpperBound())
		s.Counts = append(s.Counts, float64(b.GetCumulativeCount()))
	}
	s.Count, s.Sum = float64(h.GetSampleCount()), h.GetSampleSum()
	// The text format always ends with +Inf; a series that lacked it (not
	// from a real registry) gets it, so a quantile past the last bound
	// has a bucket to land in.
	if n := len(s.Bounds); n == 0 || !math.IsInf(s.Bounds[n-1], 1) {
		s.Bounds = append(s.Bounds, math.Inf(1))
		s.Counts = append(s.Counts, s.Count)
	}
	return s
}

// Match adds up the series of name whose labels include every pair of
// labels (nil: all series), as sum by (le) would. ok is false when no
// series matched, or the matching ones disagree on their buckets.
func (s Scrape) Match(name string, labels map[string]string) (h Histogram, ok bool) {
	for _, x := range s[name] {
		if !includes(x.Labels, labels) {
			continue
		}
		if !ok {
			h = Histogram{Bounds: slices.Clone(x.Bounds), Counts: slices.Clone(x.Counts), Count: x.Count, Sum: x.Sum}
			ok = true
			continue
		}
		if !slices.Equal(h.Bounds, x.Bounds) {
			return Histogram{}, false
		}
		for i := range h.Counts {
			h.Counts[i] += x.Counts[i]
		}
		h.Count += x.Count
		h.Sum += x.Sum
	}
	return h, ok
}

func includes(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Delta is what name's series matching labels observed between two
// scrapes: after minus before. A series missing before (created in
// between) counts from zero; one whose count went down (the process
// restarted) counts from its restart, as Prometheus's increase does.
func Delta(before, after Scrape, name string, labels map[string]string) (Histogram, bool) {
	a, ok := after.Match(name, labels)
	if !ok {
		return Histogram{}, false
	}
	b, had := before.Match(name, labels)
	if !had || !slices.Equal(a.Bounds, b.Bounds) || b.Count > a.Count {
		return a, true
	}
	d := Histogram{Bounds: a.Bounds, Counts: make([]float64, len(a.Counts)), Count: a.Count - b.Count, Sum: a.Sum - b.Sum}
	for i := range a.Counts {
		d.Counts[i] = max(a.Counts[i]-b.Counts[i], 0)
	}
	return d, true
}

// Quantile is the q-quantile (0 ≤ q ≤ 1) of h, interpolated linearly
// inside the bucket it falls in, as histogram_quantile does: the lowest
// bucket is taken to start at 0, and a quantile in the +Inf bucket is the
// highest finite bound. NaN when h observed nothing.
func (h Histogram) Quantile(q float64) float64 {
	n := len(h.Bounds)
	if n == 0 || h.Counts[n-1] == 0 || q < 0 || q > 1 || math.IsNaN(q) {
		return math.NaN()
	}
	rank := q * h.Counts[n-1]
	b := 0
	for b < n-1 && h.Counts[b] < rank {
		b++
	}
	if b == n-1 && math.IsInf(h.Bounds[b], 1) {
		if n == 1 {
			return math.NaN()
		}
		return h.Bounds[n-2]
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = h.Bounds[b-1], h.Counts[b-1]
	} else if h.Bounds[0] <= 0 {
		return h.Bounds[0]
	}
	in := h.Counts[b] - below
	if in <= 0 {
		return h.Bounds[b]
	}
	return start + (h.Bounds[b]-start)*(rank-below)/in
}
