package checkout

import "github.com/prometheus/client_golang/prometheus"

// stageBuckets (seconds) span a Redis round trip on loopback (0.1 ms) to a
// request's whole budget (5 s), fine enough to read a p99 from.
var stageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// scriptTimes is flashgate_origin_redis_script_seconds: each script run's
// round trip to Redis, by script. A pipelined run's round trip is its
// pipeline's (its reply comes with the others'), so a reserve is observed
// with the round trip of the pipeline that carried it.
type scriptTimes struct {
	reserve prometheus.Observer // nil: not observed
}

// newScriptTimes registers the histogram on reg; a nil reg observes nothing.
func newScriptTimes(reg prometheus.Registerer) scriptTimes {
	if reg == nil {
		return scriptTimes{}
	}
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flashgate_origin_redis_script_seconds",
		Help:    "Redis script runs by script, with the round trip of the pipeline that carried each.",
		Buckets: stageBuckets,
	}, []string{"script"})
	reg.MustRegister(v)
	return scriptTimes{reserve: v.WithLabelValues("reserve")}
}
