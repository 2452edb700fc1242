// Package faults is the harness behind make chaos (command bench/chaos): it
// starts the real binaries (origin, two edges, sandbox gateway) on their own
// Redis, Postgres and, for the failovers, a replica and Sentinels, on free
// 127.0.0.1 ports; plays a sale through them with a bounded crowd, a stream
// of probes and two line sales (one paused, one admitting at 1/s) whose
// shoppers poll both edges; breaks one thing while the sales run (a
// scenario: the payment ones once per provider the sandbox gateway plays,
// the origin taking payments through that provider pointed at the sandbox;
// the others with the sandbox's own protocol); and checks afterwards that
// nothing was oversold, every 201 was kept or its loss reported, no paid
// order was lost, nobody was charged twice, every shopper got an answer,
// only 503 please_wait was a 5xx, the line kept its order, the paused sale
// admitted nobody and the slow one no more than its rate allows, and how
// long the stack took to work again. WriteMarkdown turns the results into
// docs/RELIABILITY.md.
package faults
