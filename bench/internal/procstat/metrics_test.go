package procstat

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const token = "admin-secret"

// endpoint serves reg's metrics as the services' admin listeners do: the
// promhttp handler behind a bearer token.
func endpoint(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func fetch(t *testing.T, url string) Scrape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := FetchMetrics(ctx, http.DefaultClient, url, token)
	if err != nil {
		t.Fatalf("FetchMetrics(%s) = %v", url, err)
	}
	return s
}

var buckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// The difference of two scrapes holds only what was observed between them,
// and its quantiles land in the buckets of the observed values: 90 fast
// requests (2 ms) and 10 slow (300 ms) put p50 in (1 ms, 2.5 ms] and p99
// in (250 ms, 500 ms], across two route series added up.
func TestDeltaQuantilesLandInTheirBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "req_seconds", Help: "x", Buckets: buckets}, []string{"route", "status"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "other_total", Help: "not a histogram"})
	reg.MustRegister(h, other)
	url := endpoint(t, reg)

	for range 1000 {
		h.WithLabelValues("reserve", "201").Observe(4) // before: must not count
	}
	h.WithLabelValues("join", "202").Observe(0.0001)
	before := fetch(t, url)
	for i := range 90 {
		status := "201"
		if i%3 == 0 {
			status = "409"
		}
		h.WithLabelValues("reserve", status).Observe(0.002)
	}
	for range 10 {
		h.WithLabelValues("reserve", "201").Observe(0.3)
	}
	h.WithLabelValues("join", "202").Observe(4) // another route: must not count
	after := fetch(t, url)

	if _, ok := after["other_total"]; ok {
		t.Error("a counter was read as a histogram")
	}
	d, ok := Delta(before, after, "req_seconds", map[string]string{"route": "reserve"})
	if !ok {
		t.Fatal("Delta found no series for route=reserve")
	}
	if d.Count != 100 || math.Abs(d.Sum-(90*0.002+10*0.3)) > 1e-9 {
		t.Errorf("Delta count, sum = %g, %g; want 100, %g", d.Count, d.Sum, 90*0.002+10*0.3)
	}
	for _, c := range []struct {
		q      float64
		lo, hi float64
	}{{0.5, 0.001, 0.0025}, {0.9, 0.001, 0.0025}, {0.99, 0.25, 0.5}} {
		if got := d.Quantile(c.q); !(got > c.lo && got <= c.hi) {
			t.Errorf("Quantile(%g) = %g, want in (%g, %g]", c.q, got, c.lo, c.hi)
		}
	}
	// The interpolation itself: rank 50 of 90 in (1 ms, 2.5 ms].
	if got, want := d.Quantile(0.5), 0.001+(0.0025-0.001)*50/90; math.Abs(got-want) > 1e-12 {
		t.Errorf("Quantile(0.5) = %g, want %g (linear inside the bucket)", got, want)
	}
	if _, ok := Delta(before, after, "req_seconds", map[string]string{"route": "nope"}); ok {
		t.Error("Delta found a series for a route never observed")
	}
}

// A series born between the scrapes counts from zero; a value past the
// last finite bound reads as that bound, as histogram_quantile has it.
func TestDeltaOfANewSeriesAndTheInfBucket(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wait_seconds", Help: "x", Buckets: buckets}, []string{"upstream"})
	reg.MustRegister(h)
	url := endpoint(t, reg)
	before := fetch(t, url)
	for range 4 {
		h.WithLabelValues("origin").Observe(0)
	}
	h.WithLabelValues("origin").Observe(30)
	d, ok := Delta(before, fetch(t, url), "wait_seconds", map[string]string{"upstream": "origin"})
	if !ok || d.Count != 5 {
		t.Fatalf("Delta = %+v, %v; want 5 observations", d, ok)
	}
	if got := d.Quantile(0.5); !(got > 0 && got <= 0.0001) {
		t.Errorf("Quantile(0.5) of zeros = %g, want in (0, 0.1 ms] (the first bucket, from 0)", got)
	}
	if got := d.Quantile(0.99); got != 5 {
		t.Errorf("Quantile(0.99) with a 30 s value = %g, want 5 (the highest finite bound)", got)
	}
}

func TestQuantileOfNothingIsNaN(t *testing.T) {
	if got := (Histogram{}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("Quantile of an empty histogram = %g, want NaN", got)
	}
	h := Histogram{Bounds: []float64{1, math.Inf(1)}, Counts: []float64{0, 0}}
	if got := h.Quantile(0.99); !math.IsNaN(got) {
		t.Errorf("Quantile of a histogram with no observations = %g, want NaN", got)
	}
}

// A process that restarted between the scrapes (its count went down) is
// read from its restart.
func TestDeltaAcrossARestart(t *testing.T) {
	text := func(n int) string {
		return strings.ReplaceAll(`# TYPE x_seconds histogram
x_seconds_bucket{le="0.1"} N
x_seconds_bucket{le="+Inf"} N
x_seconds_sum 0.5
x_seconds_count N
`, "N", strconv.Itoa(n))
	}
	before, err := ParseMetrics(strings.NewReader(text(10)))
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseMetrics(strings.NewReader(text(3)))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := Delta(before, after, "x_seconds", nil); !ok || d.Count != 3 {
		t.Errorf("Delta across a restart = %+v, %v; want the 3 since it", d, ok)
	}
}

func TestFetchWithoutTheTokenFails(t *testing.T) {
	url := endpoint(t, prometheus.NewRegistry())
	if _, err := FetchMetrics(context.Background(), http.DefaultClient, url, "wrong"); err == nil {
		t.Error("Fetch with the wrong token succeeded")
	}
}
