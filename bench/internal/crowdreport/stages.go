package crowdreport

import (
	"strings"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// stagePaths are the paths "Where a request's time goes" shows, in order;
// a path a run has no stages for is left out.
var stagePaths = []string{"reserve", "order", "order read", "join", "status"}

// writeStages puts the client's view of each path beside the services' own
// histograms, so the time a request spent queueing before a handler ran
// shows as the gap between two rows.
func writeStages(b *strings.Builder, rs []run) {
	var with []run
	for _, x := range rs {
		if len(x.r.Stages) > 0 {
			with = append(with, x)
		}
	}
	if len(with) == 0 {
		return
	}
	b.WriteString("## Where a request's time goes\n\n")
	b.WriteString("Each path's time as the simulator saw it (client rows, every request timed) beside the services' own " +
		"histograms over the crowd (p50 and p99 interpolated inside their buckets, as Prometheus's histogram_quantile does). " +
		"The gap between the client's time and the edge handler's is queueing before the handler runs — the kernel's " +
		"accept queue, the edge's scheduling, the simulator's own — and the gap between the edge's upstream time and the " +
		"origin handler's is the connection and the origin's scheduling. The edge's upstream time includes its wait for " +
		"a connection, the row above it; the Redis script's row counts each reserve with the round trip of the pipeline " +
		"that carried it, and the journal's row counts writes, each carrying many reserves. A p99 read from buckets can come out above the " +
		"client's exact one when few requests fall in a wide bucket.\n\n")
	for _, x := range with {
		for _, p := range stagePaths {
			var rows []crowdsim.Stage
			for _, st := range x.r.Stages {
				if st.Path == p {
					rows = append(rows, st)
				}
			}
			if len(rows) == 0 {
				continue
			}
			title := p
			if len(rs) > 1 {
				title += " (" + x.label + ")"
			}
			b.WriteString("### " + title + "\n\n")
			header(b, "stage", "count", "p50 ms", "p99 ms")
			for _, st := range clientFirst(rows) {
				line(b, st.Name, count(st.Count), orDash(st.Count > 0, num(st.P50Ms, 2)), orDash(st.Count > 0, num(st.P99Ms, 2)))
			}
			b.WriteString("\n")
		}
	}
}

// clientFirst orders a path's stages: the client's rows, then the
// services' in the order the run gave them (inward, edge to origin).
func clientFirst(rows []crowdsim.Stage) []crowdsim.Stage {
	out := make([]crowdsim.Stage, 0, len(rows))
	for _, st := range rows {
		if st.Source == "client" {
			out = append(out, st)
		}
	}
	for _, st := range rows {
		if st.Source != "client" {
			out = append(out, st)
		}
	}
	return out
}
