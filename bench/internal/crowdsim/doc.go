// Package crowdsim plays a whole sale against a running stack the way real
// shoppers do — arriving on a curve, loading the snapshot, joining, polling
// as told, reserving when admitted, paying or walking away — and measures
// what happened. The same crowd can be pointed at the naive baseline (every
// buy a conditional UPDATE straight on Postgres) for a side-by-side report.
package crowdsim
