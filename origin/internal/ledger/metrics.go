package ledger

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// op is a ledger call the request paths make, timed in
// flashgate_origin_postgres_seconds{op}. Only these are timed, so the label
// takes a fixed handful of values; the order writer's batches have their
// own histogram (workers).
type op int

const (
	opRecordGrants       op = iota // the reserve journal: one write per batch of pipelines
	opOrderOfReservation           // POST /v1/orders for a hold no longer held, and CreateOrder's repeat
	opCreateOrder                  // POST /v1/orders
	opSetOrderIntent               // POST /v1/orders, once the gateway made the intent; the reconciler
	opOrder                        // GET /v1/orders/{id}
	opReservation                  // GET /v1/reservations/{id} when Redis no longer has it; orders' checks
	opTakeSignature                // every signed line request
	opCount
)

var opNames = [opCount]string{"record_grants", "order_of_reservation", "create_order", "set_order_intent", "order", "reservation", "take_signature"}

// stageBuckets (seconds) span a short query on loopback (0.1 ms) to a
// request's whole budget (5 s), fine enough to read a p99 from.
var stageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// callTimes holds a histogram child per op; all nil when not observed.
type callTimes [opCount]prometheus.Observer

func newCallTimes(reg prometheus.Registerer) callTimes {
	var t callTimes
	if reg == nil {
		return t
	}
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flashgate_origin_postgres_seconds",
		Help:    "Ledger calls of the request paths by op, with their time in Postgres (the wait for a pool connection included).",
		Buckets: stageBuckets,
	}, []string{"op"})
	reg.MustRegister(v)
	for o := range opCount {
		t[o] = v.WithLabelValues(opNames[o])
	}
	return t
}

// observe records a call of o that started at start; written as
// defer s.observe(op, time.Now()), so it costs no closure.
func (s *Store) observe(o op, start time.Time) {
	if obs := s.times[o]; obs != nil {
		obs.Observe(time.Since(start).Seconds())
	}
}
