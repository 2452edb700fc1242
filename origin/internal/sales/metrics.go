package sales

import "github.com/prometheus/client_golang/prometheus"

// metrics are the service's: Redis losses found and what the rebuilds
// restored or lost, and every reserve's outcome.
type metrics struct {
	losses   *prometheus.CounterVec
	restored prometheus.Counter
	lost     prometheus.Counter
	reserves *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_redis_losses_total",
			Help: "Times Redis was found to have lost a sale's state, by how it was found (state_missing, epoch_foreign, sequence_behind, server_replaced).",
		}, []string{"kind"}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_reservations_restored_total",
			Help: "Granted holds that Redis lost and a rebuild put back from the reserve journal.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_reservations_lost_total",
			Help: "Granted holds that Redis lost and Postgres could not take back (cancelled, with the reason). Alert on any.",
		}),
		reserves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_reserves_total",
			Help: "Reserve outcomes (created, existing, limit_reached, hold_limit_reached, unknown_sku, sold_out, rebuilding, not_durable).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.losses, m.restored, m.lost, m.reserves)
	return m
}
