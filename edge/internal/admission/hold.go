package admission

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sojourns is an upstream that tells how long its requests spend with it
// (proxy.Upstream): the shortest time of those finished since it was last
// asked and how many finished, how many are in flight, and how many
// connections it has.
type Sojourns interface {
	TakeLeast() (least time.Duration, finished int)
	InFlight() int
	MaxConns() int
}

// minBehind is how many requests must have finished in a tick, all slower
// than the bound, for it to find the checkout behind: at a trickle one
// slow webhook would otherwise hold the whole line.
const minBehind = 3

// CheckoutHold returns an Options.Hold for the checkout behind this node,
// the origin pools named in upstreams: congested when, for any of them,
// even the quickest request finished since the last tick took longer than
// after: CoDel's test for a standing queue, behind which more shoppers
// would only wait longer and then hear please_wait. It takes minBehind slow
// requests in a tick to find a pool behind, one quick one to clear it; the
// verdict stands until requests say otherwise (a tick with fewer finished
// keeps it), and only a pool with nothing in flight is clear by itself. A
// pool with half its connections in flight is behind whatever finished: a
// wave of admissions fills it before the answers that would show the queue.
// The least sojourns are exported as
// flashgate_edge_checkout_least_sojourn_seconds{upstream}. The returned
// func is called by the tick alone, never concurrently.
func CheckoutHold(after time.Duration, upstreams map[string]Sojourns, reg prometheus.Registerer) func() bool {
	least := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flashgate_edge_checkout_least_sojourn_seconds",
		Help: "Shortest time a request to the origin's pool spent there (its wait for a connection included) over the last tick that finished any (0 once the pool is idle). Above FLASHGATE_ADMISSION_HOLD_AFTER admission holds.",
	}, []string{"upstream"})
	reg.MustRegister(least)
	behind := make(map[string]bool, len(upstreams))
	return func() bool {
		congested := false
		for name, u := range upstreams {
			d, n := u.TakeLeast()
			if n > 0 {
				least.WithLabelValues(name).Set(d.Seconds())
			}
			inFlight := u.InFlight()
			switch {
			case inFlight*2 >= u.MaxConns():
				behind[name] = true
			case n > 0 && d <= after:
				behind[name] = false
			case n >= minBehind:
				behind[name] = true
			case n > 0:
				// slow, but too few to say
			case inFlight == 0:
				least.WithLabelValues(name).Set(0)
				behind[name] = false
			}
			congested = congested || behind[name]
		}
		return congested
	}
}
