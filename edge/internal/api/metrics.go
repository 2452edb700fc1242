package api

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedChildren bounds each childCache; label values beyond it go
// through the vector every time.
const maxCachedChildren = 256

// childCache memoises the children of a metric vector by their label values,
// so that the hot paths skip WithLabelValues' hashing and locking. A child is
// created on first use, as WithLabelValues would create it.
type childCache[K comparable, C any] struct {
	make func(K) C               // the vector's WithLabelValues for K
	mu   sync.Mutex              // serialises replacing m
	m    atomic.Pointer[map[K]C] // replaced whole
}

func newChildCache[K comparable, C any](make func(K) C) *childCache[K, C] {
	return &childCache[K, C]{make: make}
}

func (c *childCache[K, C]) get(k K) C {
	if m := c.m.Load(); m != nil {
		if x, ok := (*m)[k]; ok {
			return x
		}
	}
	x := c.make(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedChildren {
		return x
	}
	next := make(map[K]C, 8)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = x
	c.m.Store(&next)
	return x
}

// routeStatus is a request histogram child's labels.
type routeStatus struct {
	route  string
	status int
}

// poll is the polls counter for an answered state.
func (m *metrics) poll(state string) prometheus.Counter { return m.pollsBy.get(state) }

// challenge is the challenges counter for an outcome (a join's proof of
// work: rare next to polls, so no child cache).
func (m *metrics) challenge(outcome string) prometheus.Counter {
	return m.challenges.WithLabelValues(outcome)
}

// rejected is the rejections counter for an error code.
func (m *metrics) rejected(code string) prometheus.Counter { return m.rejectionsBy.get(code) }

// limited is the counter of 429s refused by the named limit.
func (m *metrics) limited(limit string) prometheus.Counter { return m.limitedBy.get(limit) }

// request is the request histogram's child for a route and status.
func (m *metrics) request(route string, status int) prometheus.Observer {
	return m.requestsBy.get(routeStatus{route, status})
}
