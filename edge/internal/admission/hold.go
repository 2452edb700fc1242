package admission

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sojourns is an upstream that tells how long its requests spend with it
// (proxy.Upstream): the shortest time of those finished since it was last
// asked, and how many are in flight.
type Sojourns interface {
	TakeLeast() time.Duration
	InFlight() int
}

// CheckoutHold returns an Options.Hold for the checkout behind this node,
// the origin pools named in upstreams: congested when, for any of them,
// even the quickest request finished since the last tick took longer than
// after. That is CoDel's test for a standing queue: a slow request or two
// leave the quickest fast, but once the origin (or the CPU it runs on) is
// behind, every request waits, and admitting more shoppers would only make
// them wait longer and then hear please_wait. As in CoDel the verdict
// stands until a request says otherwise: a tick in which requests are in
// flight but none finished (the slow ones come back in waves) keeps the
// last one, and only a pool with nothing in flight is clear by itself.
// The least sojourns are exported as
// flashgate_edge_checkout_least_sojourn_seconds{upstream}. The returned
// func is called by the tick alone, never concurrently.
func CheckoutHold(after time.Duration, upstreams map[string]Sojourns, reg prometheus.Registerer) func() bool {
	least := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flashgate_edge_checkout_least_sojourn_seconds",
		Help: "Shortest time a request to the origin's pool spent there (its wait for a connection included) over the last tick; 0 when none finished. Above FLASHGATE_ADMISSION_HOLD_AFTER admission holds.",
	}, []string{"upstream"})
	reg.MustRegister(least)
	behind := make(map[string]bool, len(upstreams))
	return func() bool {
		congested := false
		for name, u := range upstreams {
			switch d := u.TakeLeast(); {
			case d > 0:
				least.WithLabelValues(name).Set(d.Seconds())
				behind[name] = d > after
			case u.InFlight() == 0:
				least.WithLabelValues(name).Set(0)
				behind[name] = false
			}
			congested = congested || behind[name]
		}
		return congested
	}
}
