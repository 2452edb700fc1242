package crowdsim

import (
	"slices"
	"strconv"
	"sync"
	"time"
)

// Endpoint names, as the report shows them.
const (
	epSnapshot = "snapshot"
	// epWatch is a snapshot watch (?at=), held at the edge on purpose
	// until its second ends: counted, but its wait is no latency.
	epWatch   = "snapshot_watch"
	epJoin    = "join"
	epStatus  = "status"
	epReserve = "reserve"
	// epReserveShared: a bot's reserve with another account's admission
	// token (BotCohort.ShareTokens).
	epReserveShared = "reserve_shared_token"
	epOrderCreate   = "order_create"
	epOrderGet      = "order_get"
	epGatewayPay    = "gateway_pay"
	epNaiveBuy      = "naive_buy"
)

// call is one request's record.
type call struct {
	at     time.Duration // when it was sent, since the run's zero
	took   time.Duration
	status int // HTTP status; 0 for a timeout or transport error
	err    outcome
}

type outcome uint8

const (
	answered outcome = iota
	timedOut
	transportError
)

// recorder keeps every request of a run. A run makes at most a few million,
// so keeping them all is cheaper than being clever.
type recorder struct {
	zero time.Time

	mu    sync.Mutex // guards calls and total
	calls map[string][]call
	total int
}

func newRecorder(zero time.Time) *recorder {
	return &recorder{zero: zero, calls: map[string][]call{}}
}

func (r *recorder) add(endpoint string, sent time.Time, took time.Duration, status int, o outcome) {
	c := call{at: sent.Sub(r.zero), took: took, status: status, err: o}
	r.mu.Lock()
	r.calls[endpoint] = append(r.calls[endpoint], c)
	r.total++
	r.mu.Unlock()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// endpoints summarizes each endpoint, in a fixed order.
func (r *recorder) endpoints() []Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Endpoint
	for _, name := range []string{epSnapshot, epWatch, epJoin, epStatus, epReserve, epReserveShared, epOrderCreate, epOrderGet, epGatewayPay, epNaiveBuy} {
		calls := r.calls[name]
		if len(calls) == 0 {
			continue
		}
		e := Endpoint{Name: name, Count: len(calls), ByStatus: map[string]int{}}
		took := make([]float64, 0, len(calls))
		for _, c := range calls {
			switch c.err {
			case timedOut:
				e.ByStatus["timeout"]++
			case transportError:
				e.ByStatus["error"]++
			default:
				e.ByStatus[strconv.Itoa(c.status)]++
			}
			took = append(took, ms(c.took))
		}
		slices.Sort(took)
		e.P50Ms, e.P99Ms, e.MaxMs = quantile(took, 0.5), quantile(took, 0.99), took[len(took)-1]
		out = append(out, e)
	}
	return out
}

// totals fills the run's request totals, its timeline of requests and the
// burst's p99 (requests sent within [burstFrom, burstTo) seconds).
func (r *recorder) totals(res *Result, burstFrom, burstTo float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	perSecond := map[int]*Second{}
	lat := map[int][]float64{}
	type endpointSecond struct {
		endpoint string
		sec      int
	}
	type endpointCalls struct {
		n   int
		lat []float64
	}
	byEndpoint := map[endpointSecond]*endpointCalls{}
	var burst []float64
	burstAnswered := 0
	for endpoint, calls := range r.calls {
		for _, c := range calls {
			t := c.at.Seconds()
			sec := int(t+1000) - 1000 // floor, also below zero
			s := perSecond[sec]
			if s == nil {
				s = &Second{T: float64(sec)}
				perSecond[sec] = s
			}
			s.Requests++
			res.Requests++
			ec := byEndpoint[endpointSecond{endpoint, sec}]
			if ec == nil {
				ec = &endpointCalls{}
				byEndpoint[endpointSecond{endpoint, sec}] = ec
			}
			ec.n++
			switch {
			case c.err == timedOut:
				res.Timeouts++
				s.Errors++
			case c.err == transportError:
				res.Transport++
				s.Errors++
			case endpoint == epWatch:
				res.Answered++
				if c.status >= 500 {
					res.Status5xx++
					s.Status5xx++
				}
				continue // held on purpose: neither its wait nor its second's requests are latency
			default:
				res.Answered++
				lat[sec] = append(lat[sec], ms(c.took))
				ec.lat = append(ec.lat, ms(c.took))
				if c.status >= 500 {
					res.Status5xx++
					s.Status5xx++
				} else if c.status >= 400 {
					res.Status4xx++
				}
			}
			if t >= burstFrom && t < burstTo {
				burst = append(burst, ms(c.took))
				if c.err == answered && c.status < 500 {
					burstAnswered++ // an answer the client can act on: not an error, not silence
				}
			}
		}
	}
	for es, ec := range byEndpoint {
		s := perSecond[es.sec]
		if s.Endpoints == nil {
			s.Endpoints = map[string]SecondEndpoint{}
		}
		slices.Sort(ec.lat)
		s.Endpoints[es.endpoint] = SecondEndpoint{Requests: ec.n, P99Ms: quantile(ec.lat, 0.99)}
	}
	for sec, s := range perSecond {
		l := lat[sec]
		slices.Sort(l)
		s.P99Ms = quantile(l, 0.99)
		res.Timeline = append(res.Timeline, *s)
		res.PeakRPS = max(res.PeakRPS, float64(s.Requests))
	}
	slices.SortFunc(res.Timeline, func(a, b Second) int { return int(a.T - b.T) })
	if burstTo > burstFrom {
		res.AnsweredRPS = float64(burstAnswered) / (burstTo - burstFrom)
	}
	slices.Sort(burst)
	res.BurstP99Ms = quantile(burst, 0.99)
	res.BurstWindowS = [2]float64{burstFrom, burstTo}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile of sorted values (nearest rank); 0 for none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// dist summarizes values (sorted in place).
func dist(values []float64) Dist {
	if len(values) == 0 {
		return Dist{}
	}
	slices.Sort(values)
	d := Dist{Count: len(values), P50: quantile(values, 0.5), P90: quantile(values, 0.9),
		P99: quantile(values, 0.99), Max: values[len(values)-1]}
	const points = 50
	for i := 1; i <= points; i++ {
		share := float64(i) / points
		d.CDF = append(d.CDF, [2]float64{quantile(values, share), share})
	}
	return d
}

// rateOf is how many answers of an endpoint had the status, per second,
// from the first such answer to the last.
func (r *recorder) rateOf(endpoint string, status int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	var first, last time.Duration
	for _, c := range r.calls[endpoint] {
		if c.err != answered || c.status != status {
			continue
		}
		done := c.at + c.took
		if n == 0 || done < first {
			first = done
		}
		last = max(last, done)
		n++
	}
	if n < 2 || last <= first {
		return 0
	}
	return float64(n-1) / (last - first).Seconds()
}
