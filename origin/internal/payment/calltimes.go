package payment

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a provider call, in flashgate_origin_gateway_seconds:
// answered, refused (IsRefusal), or failed (down, 5xx or 429 after every
// attempt, a bad answer, the caller's deadline).
var outcomeNames = [...]string{"ok", "refused", "error"}

// CallTimes times a provider's calls in
// flashgate_origin_gateway_seconds{call, outcome}: each call's time, its
// retries and their pauses included, as the caller waited for it. Every
// provider registers it under the same name: an origin talks to one.
type CallTimes struct {
	obs map[string][len(outcomeNames)]prometheus.Observer // by call; none when not registered
}

// NewCallTimes registers the histogram with reg for the named calls; a nil
// reg times nothing.
func NewCallTimes(reg prometheus.Registerer, calls ...string) *CallTimes {
	t := &CallTimes{obs: map[string][len(outcomeNames)]prometheus.Observer{}}
	if reg == nil {
		return t
	}
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flashgate_origin_gateway_seconds",
		Help: "Payment gateway calls by call and outcome, with their time (retries and their pauses included).",
		// A loopback sandbox answers in a fraction of a millisecond; a
		// real provider in tens to hundreds, and a call with retries in
		// seconds.
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"call", "outcome"})
	reg.MustRegister(v)
	for _, c := range calls {
		var o [len(outcomeNames)]prometheus.Observer
		for i, name := range outcomeNames {
			o[i] = v.WithLabelValues(c, name)
		}
		t.obs[c] = o
	}
	return t
}

// Observe records call, which started at start and ended in err.
func (t *CallTimes) Observe(call string, start time.Time, err error) {
	o, ok := t.obs[call]
	if !ok {
		return
	}
	i := 0
	switch {
	case IsRefusal(err):
		i = 1
	case err != nil:
		i = 2
	}
	o[i].Observe(time.Since(start).Seconds())
}
