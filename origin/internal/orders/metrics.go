package orders

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	ordersCreated prometheus.Counter
	paid          prometheus.Counter
	refunds       prometheus.Counter
	payerRefusals prometheus.Counter
	webhooks      *prometheus.CounterVec
	repairs       *prometheus.CounterVec
	alerts        *prometheus.CounterVec
	reconciles    *prometheus.CounterVec
	intents       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		ordersCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_orders_created_total",
			Help: "Orders made (one per reservation whose shopper started to pay).",
		}),
		paid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_orders_paid_total",
			Help: "Orders whose payment sold their held unit.",
		}),
		refunds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_refunds_issued_total",
			Help: "Refunds issued at the gateway (payments that came after their hold was gone).",
		}),
		payerRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_origin_payer_refusals_total",
			Help: "Payments refused by the one-unit-per-payer rule: their payer had paid for another order of the sale; the hold went back to the line and the money is refunded.",
		}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_payment_webhooks_total",
			Help: "Gateway webhooks by result (applied, duplicate, ignored, bad_signature, bad_event, failed).",
		}, []string{"result"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_reconcile_repairs_total",
			Help: "Differences between the gateway and our orders that reconciliation repaired, by kind.",
		}, []string{"kind"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_payment_alerts_total",
			Help: "Payment differences no code can repair, for a person to look at (alert on any), by kind.",
		}, []string{"kind"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_reconcile_runs_total",
			Help: "Reconciliation runs by result (ok, failed, skipped: another origin was reconciling).",
		}, []string{"result"}),
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_order_intents_total",
			Help: "Order requests that waited for a payment intent, by result: in_time (in the answer), late (answered without it: it is still being made), failed (the gateway call failed within the wait).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.ordersCreated, m.paid, m.refunds, m.payerRefusals, m.webhooks, m.repairs, m.alerts, m.reconciles, m.intents)
	}
	return m
}
