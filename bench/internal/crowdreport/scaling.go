package crowdreport

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// ScalingFactorMax is the most the flashgate checkout's CPU (origin and
// Postgres) may grow from the smallest crowd to the largest, with the same
// stock and rate: the design's claim is that only the edge grows with the
// shoppers, and the checkout's work with the stock.
const ScalingFactorMax = 1.3

// BareEdgeNote is where the edge's CPU per answered request can be read
// against a bare fasthttp server's: docs/BENCHMARKS.md's figures from
// `make bench-edge`, quoted, not measured by the scaling run.
const BareEdgeNote = "Beside it, `make bench-edge`'s bare fasthttp handler (docs/BENCHMARKS.md, Edge, measured 2026-11-30): " +
	"19.2–32.4 µs of CPU per request for its whole process, server and load generator together, over eight runs (\"CPU per " +
	"request\"); in a profile of 100,000 polls (\"Where the time goes now\") 23.2 µs, of which 10.3 µs the load generator, " +
	"so about 13 µs the bare server (10.5 µs fasthttp outside the handler). The edge's figure here is the edge process alone " +
	"(the simulator is its load generator), over every request it answered — joins, polls, reserves and orders proxied to " +
	"the origin, snapshot loads the CDN missed — so it reads against the bare server's ~13 µs."

// Scaling is the scaling law's runs: the same sale — stock, admission rate,
// the crowd's shape — at several crowd sizes, each size a fresh flashgate
// sale and the naive baseline's sale reset, on the same pinned CPUs.
type Scaling struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Wall    float64   `json:"wall_s"` // the whole run, in seconds
	// Scenario is every size's crowd but for Shoppers.
	Scenario crowdsim.Scenario `json:"scenario"`
	Sizes    []Size            `json:"sizes"` // smallest crowd first
	// Notes are sentences the report prints as they are.
	Notes []string `json:"notes,omitempty"`
}

// Size is one crowd size's runs; a run that did not happen is nil.
type Size struct {
	Shoppers  int              `json:"shoppers"` // bots not counted
	Flashgate *crowdsim.Result `json:"flashgate,omitempty"`
	Naive     *crowdsim.Result `json:"naive,omitempty"`
	// Origin is what the origin's own histograms observed over the
	// flashgate run, set-up and ledger check included; empty when its
	// /metrics could not be read.
	Origin []OriginCount `json:"origin,omitempty"`
	// Postgres is the run's database activity by design, from
	// pg_stat_database; a design without a reading is absent.
	Postgres map[string]PostgresActivity `json:"postgres,omitempty"`
}

// Result is the size's run of design ("flashgate" or "naive"), nil when
// there is none.
func (s Size) Result(design string) *crowdsim.Result {
	if design == "naive" {
		return s.Naive
	}
	return s.Flashgate
}

// OriginCount is how many observations one kind of origin work made over a
// run: a route's requests, a ledger op's Postgres calls, a Redis script's
// runs, a gateway call's attempts.
type OriginCount struct {
	Kind  string `json:"kind"` // "route", "postgres op", "redis script", "gateway call"
	Name  string `json:"name"` // the label's value: "sale", "record_grants", ...
	Count int    `json:"count"`
}

// OriginKinds are OriginCount's kinds, in report order.
var OriginKinds = []string{"route", "postgres op", "redis script", "gateway call"}

// PostgresActivity is what the run's database did over one run, as
// pg_stat_database counts it (every client of that database).
type PostgresActivity struct {
	Transactions int64 `json:"transactions"` // committed and rolled back
	RowsRead     int64 `json:"rows_read"`    // tuples returned by scans and fetched by index
	RowsWritten  int64 `json:"rows_written"` // inserted, updated and deleted
}

// ScalingRow is one process's (or a sum of processes') CPU at each size.
type ScalingRow struct {
	Process string `json:"process"`
	// CPUS and Per1000 are by size, smallest crowd first: CPU seconds
	// while the crowd ran, and those per 1,000 shoppers; 0 where the
	// process used none or the size has no run of the design.
	CPUS    []float64 `json:"cpu_s"`
	Per1000 []float64 `json:"cpu_s_per_1000_shoppers"`
	// Ratio is the largest crowd's CPU over the smallest's; 0 when there is
	// no such ratio (fewer than two sizes, a run missing, none used at the
	// smallest).
	Ratio float64 `json:"ratio"`
}

// processRow names a row of the CPU table and the process groups (the
// labels crowdsim.Result.CPU uses) it adds up; nil groups: every group but
// the simulator.
type processRow struct {
	name   string
	groups []string
}

// The process groups as crowdsim labels them.
const (
	originGroup   = "origin"
	postgresGroup = "postgres"
	naiveGroup    = "naive server"
	edgeGroup     = "edge"
)

// checkout is each design's checkout: what must not grow with the crowd.
var checkout = map[string]processRow{
	"flashgate": {"origin + postgres", []string{originGroup, postgresGroup}},
	"naive":     {"naive server + postgres", []string{naiveGroup, postgresGroup}},
}

// processRows are the CPU table's rows for design: its checkout, each
// group, every group but the simulator, and the simulator.
func processRows(design string) []processRow {
	rows := []processRow{checkout[design]}
	for _, g := range []string{originGroup, postgresGroup, "redis", edgeGroup, gatewayGroup, naiveGroup} {
		rows = append(rows, processRow{g, []string{g}})
	}
	return append(rows, processRow{"all but the simulator", nil}, processRow{simulatorGroup, []string{simulatorGroup}})
}

// cpuOf is the CPU seconds of r's groups (nil: every group but the
// simulator).
func cpuOf(r *crowdsim.Result, groups []string) float64 {
	var sum float64
	for g, s := range r.CPU {
		if (groups == nil && g != simulatorGroup) || slices.Contains(groups, g) {
			sum += s
		}
	}
	return sum
}

// sortedSizes is sc's sizes, smallest crowd first.
func sortedSizes(sc Scaling) []Size {
	sizes := slices.Clone(sc.Sizes)
	slices.SortStableFunc(sizes, func(a, b Size) int { return a.Shoppers - b.Shoppers })
	return sizes
}

// CPURows is design's CPU table: one row per processRows entry.
func CPURows(sc Scaling, design string) []ScalingRow {
	sizes := sortedSizes(sc)
	var out []ScalingRow
	for _, pr := range processRows(design) {
		row := ScalingRow{Process: pr.name}
		for _, sz := range sizes {
			var s float64
			if r := sz.Result(design); r != nil {
				s = cpuOf(r, pr.groups)
			}
			per := 0.0
			if sz.Shoppers > 0 {
				per = 1000 * s / float64(sz.Shoppers)
			}
			row.CPUS, row.Per1000 = append(row.CPUS, s), append(row.Per1000, per)
		}
		row.Ratio = growth(sizes, design, row.CPUS)
		out = append(out, row)
	}
	return out
}

// growth is vs' last over its first, where sizes' first and last both have
// a run of design and the first is above zero; 0 otherwise.
func growth(sizes []Size, design string, vs []float64) float64 {
	n := len(sizes)
	if n < 2 || sizes[0].Result(design) == nil || sizes[n-1].Result(design) == nil || vs[0] <= 0 {
		return 0
	}
	return vs[n-1] / vs[0]
}

// ScalingGoal judges the flashgate checkout's CPU growth from the smallest
// crowd to the largest against ScalingFactorMax, with the naive checkout's
// beside it (not judged: it is the contrast).
func ScalingGoal(sc Scaling) Goal {
	g := Goal{Name: "scaling law", Verdict: NotMeasured}
	sizes := sortedSizes(sc)
	if len(sizes) < 2 {
		g.Measured = "two crowd sizes at least are needed"
		return g
	}
	lo, hi := count(sizes[0].Shoppers), count(sizes[len(sizes)-1].Shoppers)
	fg, nv := CPURows(sc, "flashgate")[0].Ratio, CPURows(sc, "naive")[0].Ratio
	naive := "naive server + postgres " + growthCell(nv)
	if nv == 0 {
		naive = "naive server + postgres not measured"
	}
	g.Measured = fmt.Sprintf("origin + postgres CPU at %s ÷ at %s shoppers = %s (goal ≤ %s×); %s",
		hi, lo, growthCell(fg), num(ScalingFactorMax, 1), naive)
	if fg > 0 {
		g.Verdict = verdict(fg <= ScalingFactorMax)
	}
	return g
}

// growthCell is a ratio to two decimals, "—" for none.
func growthCell(r float64) string {
	if r <= 0 {
		return "—"
	}
	return num(r, 2) + "×"
}

// EdgeMicrosPerAnswered is the edge's CPU per request it answered, in µs;
// 0 for a run without both.
func EdgeMicrosPerAnswered(r *crowdsim.Result) float64 {
	if r == nil || r.Answered == 0 {
		return 0
	}
	return 1e6 * r.CPU[edgeGroup] / float64(r.Answered)
}

// EdgeMicrosPerAddedRequest is what the edge's CPU grew by per request it
// answered more, from the smallest crowd's flashgate run to the largest's
// (µs), and the edge CPU seconds the smallest run had beyond that rate
// (its clock-driven work: admission ticks, snapshot refreshes); ok is false
// without two runs whose requests differ.
func EdgeMicrosPerAddedRequest(sc Scaling) (us, fixedS float64, ok bool) {
	sizes := sortedSizes(sc)
	if len(sizes) < 2 {
		return 0, 0, false
	}
	lo, hi := sizes[0].Flashgate, sizes[len(sizes)-1].Flashgate
	if lo == nil || hi == nil || hi.Answered == lo.Answered {
		return 0, 0, false
	}
	perReq := (hi.CPU[edgeGroup] - lo.CPU[edgeGroup]) / float64(hi.Answered-lo.Answered)
	return 1e6 * perReq, lo.CPU[edgeGroup] - perReq*float64(lo.Answered), true
}

// ScalingSummary is the scaling law's verdict in one line for the terminal.
func ScalingSummary(sc Scaling) string {
	g := ScalingGoal(sc)
	return fmt.Sprintf("%-4s  %s: %s\n", g.Verdict, g.Name, g.Measured)
}

// scalingReport is scaling.json: the runs, the verdict and the tables.
type scalingReport struct {
	Scaling
	Goal Goal                    `json:"goal"`
	CPU  map[string][]ScalingRow `json:"cpu"` // by design
	// EdgeMicrosPerAnswered is flashgate's edge CPU per answered request
	// (µs) by size, smallest crowd first.
	EdgeMicrosPerAnswered []float64 `json:"edge_us_per_answered_request"`
	// EdgeMicrosPerAddedRequest: see the function; 0 without it.
	EdgeMicrosPerAddedRequest float64 `json:"edge_us_per_added_request,omitempty"`
}

// WriteScalingJSON writes the runs with their verdict and CPU tables as
// indented JSON.
func WriteScalingJSON(w io.Writer, sc Scaling) error {
	rep := scalingReport{Scaling: sc, Goal: ScalingGoal(sc), CPU: map[string][]ScalingRow{}}
	for _, d := range Designs {
		rep.CPU[d] = CPURows(sc, d)
	}
	for _, sz := range sortedSizes(sc) {
		rep.EdgeMicrosPerAnswered = append(rep.EdgeMicrosPerAnswered, EdgeMicrosPerAnswered(sz.Flashgate))
	}
	rep.EdgeMicrosPerAddedRequest, _, _ = EdgeMicrosPerAddedRequest(sc)
	if err := benchreport.WriteJSON(w, rep); err != nil {
		return fmt.Errorf("report: write scaling json: %w", err)
	}
	return nil
}

// WriteScalingMarkdown writes scaling.md.
func WriteScalingMarkdown(w io.Writer, sc Scaling) error {
	var b strings.Builder
	g := ScalingGoal(sc)
	sizes := sortedSizes(sc)
	b.WriteString("# The scaling law\n\n")
	fmt.Fprintf(&b, "**%s** — %s: %s\n\n", g.Verdict, g.Name, g.Measured)
	fmt.Fprintf(&b, "Started %s, took %s s", started(sc.Started), num(sc.Wall, 0))
	if sc.Command != "" {
		fmt.Fprintf(&b, "; `%s`", sc.Command)
	}
	if r := firstScalingResult(sizes); r != nil && r.Machine != "" {
		fmt.Fprintf(&b, "; on %s", r.Machine)
	}
	b.WriteString(".\n\n")
	s := sc.Scenario
	fmt.Fprintf(&b, "The claim: only the edge grows with the crowd; Redis, the origin and Postgres do work in proportion to the "+
		"stock, not to the shoppers. Goal: the origin's and Postgres's CPU at the largest crowd ≤ %s× that at the smallest, "+
		"where the naive baseline's grows with the shoppers. Every size is the same sale: %s units admitted at %s/s, "+
		"%s of the shoppers over the %s s before the open, %s in a %s s burst, the rest over %s s; pay probability %s, "+
		"%s impatient, %s stay after a sold-out, %s bots, holds of %d s, the crowd stopped %s s after the open.\n\n",
		num(ScalingFactorMax, 1), count(s.Stock), rate(s.RatePerS), pct(s.PreQueueShare), num(s.PreQueueS, -1),
		pct(s.BurstShare), num(s.BurstS, -1), num(s.TailS, -1), num(s.PayProbability, -1), pct(s.ImpatientShare),
		pct(s.StayShare), count(s.BotAccounts()), s.HoldTTLS, num(s.MaxDurationS, -1))
	b.WriteString("Where the processes ran:\n\n")
	for _, d := range Designs {
		var ps []string
		for _, sz := range sizes {
			if r := sz.Result(d); r != nil && !slices.Contains(ps, Pinning(r)) {
				ps = append(ps, Pinning(r))
			}
		}
		fmt.Fprintf(&b, "- %s: %s\n", d, or(strings.Join(ps, " / "), "no runs"))
	}
	b.WriteString("\n")
	writeScalingRuns(&b, sizes)
	for _, d := range Designs {
		writeScalingCPU(&b, sc, sizes, d)
	}
	writeEdgePerRequest(&b, sizes)
	writeOriginCounts(&b, sizes)
	writePostgresActivity(&b, sizes)
	writeScalingNotes(&b, sc, sizes)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: write scaling markdown: %w", err)
	}
	return nil
}

func firstScalingResult(sizes []Size) *crowdsim.Result {
	for _, sz := range sizes {
		for _, d := range Designs {
			if r := sz.Result(d); r != nil {
				return r
			}
		}
	}
	return nil
}

// writeScalingRuns: each run's size, length and outcome, to see that the
// runs compared were the sale asked for.
func writeScalingRuns(b *strings.Builder, sizes []Size) {
	b.WriteString("## Runs\n\n")
	header(b, "shoppers", "design", "crowd ran", "requests", "answered requests", "shoppers answered", "p99 to an answer",
		"units taken (sold + held)", "5xx", "oversold", "simulator lag p99")
	for _, sz := range sizes {
		for _, d := range Designs {
			r := sz.Result(d)
			if r == nil {
				line(b, count(sz.Shoppers), d, "no run", "—", "—", "—", "—", "—", "—", "—", "—")
				continue
			}
			line(b, count(sz.Shoppers), d, num(r.CrowdS, 1)+" s", count(r.Requests), count(r.Answered),
				count(r.Fates.Answered), num(r.Fates.AnswerP99, 2)+" s", count(r.Sold+r.Held), count(r.Status5xx),
				count(r.Oversold), num(r.StartLag.P99, 3)+" s")
		}
	}
	b.WriteString("\n")
}

// sizeColumns are the headers "<what> at 20,000" for each size ("at
// 20,000" for an empty what).
func sizeColumns(sizes []Size, what string) []string {
	cols := make([]string, len(sizes))
	for i, sz := range sizes {
		cols[i] = strings.TrimSpace(what + " at " + count(sz.Shoppers))
	}
	return cols
}

// ratioColumn is the header of the largest ÷ smallest column.
func ratioColumn(sizes []Size) string {
	if len(sizes) < 2 {
		return "ratio"
	}
	return count(sizes[len(sizes)-1].Shoppers) + " ÷ " + count(sizes[0].Shoppers)
}

func writeScalingCPU(b *strings.Builder, sc Scaling, sizes []Size, design string) {
	fmt.Fprintf(b, "## CPU: %s\n\nCPU seconds each process used while the crowd ran (from /proc), and per 1,000 shoppers.\n\n", design)
	cols := append(sizeColumns(sizes, "CPU s"), sizeColumns(sizes, "per 1,000")...)
	header(b, "process", append(cols, ratioColumn(sizes))...)
	for _, row := range CPURows(sc, design) {
		cells := []string{row.Process}
		for i, sz := range sizes {
			cells = append(cells, cpuSeconds(sz.Result(design), row.CPUS[i], 1))
		}
		for i, sz := range sizes {
			cells = append(cells, cpuSeconds(sz.Result(design), row.Per1000[i], 3))
		}
		line(b, append(cells, growthCell(row.Ratio))...)
	}
	b.WriteString("\n")
}

// cpuSeconds formats a CPU figure of run r: "no run", "–" for none used.
func cpuSeconds(r *crowdsim.Result, s float64, prec int) string {
	switch {
	case r == nil:
		return "no run"
	case s == 0:
		return "–"
	}
	return num(s, prec)
}

func writeEdgePerRequest(b *strings.Builder, sizes []Size) {
	b.WriteString("## Edge CPU per answered request\n\n")
	header(b, "shoppers", "edge CPU", "requests answered", "µs per answered request")
	for _, sz := range sizes {
		r := sz.Flashgate
		if r == nil {
			line(b, count(sz.Shoppers), "no run", "—", "—")
			continue
		}
		line(b, count(sz.Shoppers), num(r.CPU[edgeGroup], 1)+" s", count(r.Answered), num(EdgeMicrosPerAnswered(r), 1))
	}
	b.WriteString("\n")
	if us, fixed, ok := EdgeMicrosPerAddedRequest(Scaling{Sizes: sizes}); ok {
		lo, hi := sizes[0], sizes[len(sizes)-1]
		fmt.Fprintf(b, "From %s to %s shoppers the edge answered %s more requests for %s CPU s more: %s µs per added request. "+
			"The rest of the smallest run's edge CPU, %s s, is what the edge did whatever the crowd: its clock-driven work "+
			"(admission ticks, the snapshot refresh of every listed sale), which raises the per-request figures above at a "+
			"small crowd.\n\n", count(lo.Shoppers), count(hi.Shoppers), count(hi.Flashgate.Answered-lo.Flashgate.Answered),
			num(hi.Flashgate.CPU[edgeGroup]-lo.Flashgate.CPU[edgeGroup], 1), num(us, 1), num(fixed, 1))
	}
	b.WriteString(BareEdgeNote + "\n\n")
}

// writeOriginCounts: the origin's work by route, ledger op, Redis script
// and gateway call at each size, so that work which grows with the crowd
// shows.
func writeOriginCounts(b *strings.Builder, sizes []Size) {
	type key struct{ kind, name string }
	var keys []key // the kinds of work done at some size; none done at any is left out
	for _, sz := range sizes {
		for _, c := range sz.Origin {
			if k := (key{c.Kind, c.Name}); c.Count > 0 && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.SortStableFunc(keys, func(a, c key) int {
		if d := slices.Index(OriginKinds, a.kind) - slices.Index(OriginKinds, c.kind); d != 0 {
			return d
		}
		return strings.Compare(a.name, c.name)
	})
	b.WriteString("## What the origin did (flashgate)\n\n")
	b.WriteString("Observations of the origin's own histograms over each flashgate run (`flashgate_origin_request_seconds` by route, " +
		"`flashgate_origin_postgres_seconds` by op, `flashgate_origin_redis_script_seconds` by script, " +
		"`flashgate_origin_gateway_seconds` by call), read from its /metrics before the sale was created and after the run's ledger " +
		"check. ")
	if len(sizes) > 1 {
		lo, hi := sizes[0], sizes[len(sizes)-1]
		fmt.Fprintf(b, "The crowd grew %s×: a row near that grows with the shoppers, one near 1× with the stock or the sale. "+
			"Rows that run on a clock (the edges' snapshot refresh: the `sales` and `sale` routes) grow with the sales the origin lists (every edge fetches each listed sale's snapshot on every refresh) "+
			"and with how long the run took",
			num(float64(hi.Shoppers)/float64(lo.Shoppers), 1))
		var took []string
		for _, sz := range sizes {
			if sz.Flashgate != nil {
				took = append(took, fmt.Sprintf("%s s at %s shoppers", num(sz.Flashgate.Wall, 0), count(sz.Shoppers)))
			}
		}
		if len(took) > 0 {
			fmt.Fprintf(b, ": %s (wall time, set-up and ledger check included)", strings.Join(took, ", "))
		}
		b.WriteString(".")
	}
	b.WriteString("\n\n")
	header(b, "kind", append(append([]string{"name"}, sizeColumns(sizes, "count")...), ratioColumn(sizes))...)
	for _, k := range keys {
		cells := []string{k.kind, "`" + k.name + "`"}
		var vs []float64
		for _, sz := range sizes {
			i := slices.IndexFunc(sz.Origin, func(c OriginCount) bool { return c.Kind == k.kind && c.Name == k.name })
			switch {
			case len(sz.Origin) == 0:
				cells = append(cells, "not read")
				vs = append(vs, 0)
			case i < 0:
				cells = append(cells, "0")
				vs = append(vs, 0)
			default:
				cells = append(cells, count(sz.Origin[i].Count))
				vs = append(vs, float64(sz.Origin[i].Count))
			}
		}
		line(b, append(cells, growthCell(growth(sizes, "flashgate", vs)))...)
	}
	b.WriteString("\n")
}

func writePostgresActivity(b *strings.Builder, sizes []Size) {
	read := false
	for _, sz := range sizes {
		read = read || len(sz.Postgres) > 0
	}
	if !read {
		return
	}
	b.WriteString("## Postgres's own counters\n\n")
	b.WriteString("The run's database over each run, from `pg_stat_database` (every client of that database: the origin's " +
		"request paths and workers for flashgate, the naive server for naive; a backend's last second of work may reach " +
		"these counters up to 10 s late).\n\n")
	header(b, "design", append(append([]string{"counter"}, sizeColumns(sizes, "")...), ratioColumn(sizes))...)
	for _, d := range Designs {
		for _, c := range []struct {
			name string
			of   func(PostgresActivity) int64
		}{
			{"transactions", func(a PostgresActivity) int64 { return a.Transactions }},
			{"rows read", func(a PostgresActivity) int64 { return a.RowsRead }},
			{"rows written", func(a PostgresActivity) int64 { return a.RowsWritten }},
		} {
			cells := []string{d, c.name}
			var vs []float64
			for _, sz := range sizes {
				a, ok := sz.Postgres[d]
				cells = append(cells, orDash(ok, count(c.of(a))))
				vs = append(vs, float64(c.of(a)))
			}
			line(b, append(cells, growthCell(growth(sizes, d, vs)))...)
		}
	}
	b.WriteString("\n")
}

func writeScalingNotes(b *strings.Builder, sc Scaling, sizes []Size) {
	var notes []string
	for _, n := range sc.Notes {
		notes = append(notes, "- "+n)
	}
	for _, sz := range sizes {
		for _, d := range Designs {
			if r := sz.Result(d); r != nil {
				for _, n := range r.Notes {
					notes = append(notes, fmt.Sprintf("- %s at %s shoppers: %s", d, count(sz.Shoppers), n))
				}
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("## Notes\n\n" + strings.Join(notes, "\n") + "\n")
	}
}
