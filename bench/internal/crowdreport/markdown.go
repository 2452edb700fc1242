package crowdreport

import (
	"fmt"
	"io"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// chartCaptions are the captions of the charts WriteCharts draws, by file name.
var chartCaptions = map[string]string{
	"timeline.png": "Requests, 5xx and errors per second; queue length and now serving",
	"latency.png":  "Per-endpoint p50 and p99 latency",
	"fates.png":    "Time from arrival to fate (CDF)",
	"stock.png":    "Available units over time; stock, sold and held",
	"cpu.png":      "Cores each process used per second",
}

// WriteMarkdown writes the report a person reads. charts are the chart files
// as WriteCharts names them, relative to the Markdown file's directory; they
// are linked as given, in that order.
func WriteMarkdown(w io.Writer, runs Runs, charts []string) error {
	rs := runs.list()
	var b strings.Builder
	title := "Flash sale: flashgate"
	if runs.Naive != nil {
		title += " vs the naive baseline"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	writeRuns(&b, rs)
	writeScenario(&b, rs)
	writeGoals(&b, runs)
	writeNaive(&b, runs)
	writeTotals(&b, rs)
	writeCPU(&b, rs)
	writeEndpoints(&b, rs)
	writeOpen(&b, &runs.Flashgate)
	writeStages(&b, rs)
	writeFates(&b, rs)
	writeRegions(&b, rs)
	writeFairness(&b, rs)
	writeBots(&b, runs, rs)
	writeLedger(&b, rs)
	writeCharts(&b, charts)
	writeNotes(&b, rs)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: write markdown: %w", err)
	}
	return nil
}

func writeRuns(b *strings.Builder, rs []run) {
	for _, x := range rs {
		r := x.r
		fmt.Fprintf(b, "- **%s**: started %s, ran %s s", x.label, started(r.Started), num(r.Wall, 1))
		if r.Machine != "" {
			fmt.Fprintf(b, ", on %s", r.Machine)
		}
		if r.Command != "" {
			fmt.Fprintf(b, "; `%s`", r.Command)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func started(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func writeScenario(b *strings.Builder, rs []run) {
	b.WriteString("## Scenario\n\n")
	rows := []struct {
		name string
		cell func(s crowdsim.Scenario) string
	}{
		{"shoppers", func(s crowdsim.Scenario) string { return count(s.Shoppers) }},
		{"stock", func(s crowdsim.Scenario) string { return count(s.Stock) }},
		{"admission rate", func(s crowdsim.Scenario) string {
			if s.RatePerS == 0 {
				return "unthrottled"
			}
			return rate(s.RatePerS) + "/s"
		}},
		{"pre-queue", func(s crowdsim.Scenario) string {
			return pct(s.PreQueueShare) + " over " + num(s.PreQueueS, -1) + " s"
		}},
		{"burst", func(s crowdsim.Scenario) string {
			return pct(s.BurstShare) + " over " + num(s.BurstS, -1) + " s"
		}},
		{"tail", func(s crowdsim.Scenario) string { return num(s.TailS, -1) + " s" }},
		{"pay probability", func(s crowdsim.Scenario) string { return pct(s.PayProbability) }},
		{"impatient share", func(s crowdsim.Scenario) string { return pct(s.ImpatientShare) }},
		{"reaction to their turn", func(s crowdsim.Scenario) string {
			if s.ReactionS <= 0 {
				return "none"
			}
			return num(0.5*s.ReactionS, 2) + "–" + num(1.5*s.ReactionS, 2) + " s"
		}},
		{"bots", func(s crowdsim.Scenario) string { return botsCell(s) }},
		{"hold TTL", func(s crowdsim.Scenario) string { return count(s.HoldTTLS) + " s" }},
		{"max duration", func(s crowdsim.Scenario) string { return num(s.MaxDurationS, -1) + " s" }},
		{"max requests", func(s crowdsim.Scenario) string { return count(s.MaxRequests) }},
	}
	header(b, "", labels(rs)...)
	for _, row := range rows {
		cells := []string{row.name}
		for _, x := range rs {
			cells = append(cells, row.cell(x.r.Scenario))
		}
		line(b, cells...)
	}
	b.WriteString("\n")
}

// botsCell names the scenario's bot cohorts and their accounts.
func botsCell(s crowdsim.Scenario) string {
	var parts []string
	for _, c := range s.Cohorts() {
		where := "an address each"
		if c.Addresses > 0 {
			where = "on " + count(c.Addresses) + " addresses"
		}
		parts = append(parts, c.Name+": "+count(c.Accounts)+" accounts "+where)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func writeGoals(b *strings.Builder, runs Runs) {
	b.WriteString("## Goals\n\nThe first eight are the flashgate run's (with the defences against bots off, when it ran both ways), " +
		"the last four the run's with them on; the naive baseline is held to none of them.\n\n")
	header(b, "goal", "measured", "result")
	for _, g := range Goals(runs) {
		line(b, g.Name, g.Measured, "**"+string(g.Verdict)+"**")
	}
	b.WriteString("\n")
}

// writeNaive says in words what the baseline did, and whether it faced the
// same crowd.
func writeNaive(b *strings.Builder, runs Runs) {
	n := runs.Naive
	if n == nil {
		return
	}
	b.WriteString("## The naive baseline\n\n")
	fmt.Fprintf(b, "Under the same crowd the naive baseline sold %s of %s units and oversold %s. "+
		"Of its %s requests %s got an answer (%s of them 5xx); %s timed out and %s failed in transport. "+
		"%s of %s shoppers learned their fate, the p99 of them after %s s; %s never did.\n\n",
		count(n.Sold), count(n.Stock), count(n.Oversold),
		count(n.Requests), count(n.Answered), count(n.Status5xx), count(n.Timeouts), count(n.Transport),
		count(n.Fates.Answered), count(n.Scenario.Shoppers), num(n.Fates.AnswerP99, 2), count(n.Fates.Unknown))
	fs, ns := runs.Flashgate.Scenario, n.Scenario
	fs.RatePerS, ns.RatePerS = 0, 0 // the baseline admits no one
	if fs != ns {
		b.WriteString("**Its scenario differs from the flashgate run's** (see Scenario): the comparisons above are between different crowds.\n\n")
	}
}

func writeTotals(b *strings.Builder, rs []run) {
	b.WriteString("## Totals\n\n")
	rows := []struct {
		name string
		cell func(r *crowdsim.Result) string
	}{
		{"requests", func(r *crowdsim.Result) string { return count(r.Requests) }},
		{"answered", func(r *crowdsim.Result) string { return count(r.Answered) }},
		{"4xx (429 included)", func(r *crowdsim.Result) string { return count(r.Status4xx) }},
		{"5xx", func(r *crowdsim.Result) string { return count(r.Status5xx) }},
		{"timeouts", func(r *crowdsim.Result) string { return count(r.Timeouts) }},
		{"transport errors", func(r *crowdsim.Result) string { return count(r.Transport) }},
		{"peak requests/s", func(r *crowdsim.Result) string { return rate(r.PeakRPS) }},
		{"answered requests/s during the burst", func(r *crowdsim.Result) string { return rate(r.AnsweredRPS) }},
		{"burst p99 ms", func(r *crowdsim.Result) string { return num(r.BurstP99Ms, 1) }},
		{"stock", func(r *crowdsim.Result) string { return count(r.Stock) }},
		{"sold", func(r *crowdsim.Result) string { return count(r.Sold) }},
		{"held at the end", func(r *crowdsim.Result) string { return count(r.Held) }},
		{"oversold", func(r *crowdsim.Result) string { return count(r.Oversold) }},
		{"last unit at s", func(r *crowdsim.Result) string { return orDash(r.LastUnitAt > 0, num(r.LastUnitAt, 2)) }},
		{"holds granted/s", func(r *crowdsim.Result) string { return orDash(reservesPerS(r) > 0, rate(reservesPerS(r))) }},
	}
	header(b, "", labels(rs)...)
	for _, row := range rows {
		cells := []string{row.name}
		for _, x := range rs {
			cells = append(cells, row.cell(x.r))
		}
		line(b, cells...)
	}
	b.WriteString("\n*Holds granted/s* counts 201 reserves from the first to the last.\n\n")
}

// writeCPU shows where the machine's cores went while each crowd ran: the
// simulator shares them with the stack, which is what limits a run on a
// small machine.
func writeCPU(b *strings.Builder, rs []run) {
	groups := map[string]bool{}
	for _, x := range rs {
		for g := range x.r.CPU {
			groups[g] = true
		}
	}
	if len(groups) == 0 {
		return
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	b.WriteString("## Where the CPU went\n\n")
	b.WriteString("CPU seconds each process used while the crowd ran (from /proc), and the share of the machine's cores.\n\n")
	for _, x := range rs {
		fmt.Fprintf(b, "- %s: %s; the simulator's goroutines waited p50 %s ms, p99 %s ms to run (Go's /sched/latencies: "+
			"a reply the simulator reads late carries that wait in its latency)",
			x.label, Pinning(x.r), num(x.r.SchedWait[0], 2), num(x.r.SchedWait[1], 1))
		if loops := CoreLoops(x.r); loops != "" {
			fmt.Fprintf(b, "; before and after the crowd %s (about 70 ms on a quick core of this machine: "+
				"more is the VM's core running slow under the run, not the system)", loops)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	header(b, "process", labels(rs)...)
	for _, g := range names {
		cells := []string{g}
		for _, x := range rs {
			cells = append(cells, cpuCell(x.r, x.r.CPU[g]))
		}
		line(b, cells...)
	}
	total := []string{"all"}
	for _, x := range rs {
		var sum float64
		for _, v := range x.r.CPU {
			sum += v
		}
		total = append(total, cpuCell(x.r, sum))
	}
	line(b, total...)
	b.WriteString("\n")
}

// Pinning states where a run's processes were allowed to run: "pinned: the
// simulator on CPU 1; the stack on CPU 0", or that they shared the CPUs.
func Pinning(r *crowdsim.Result) string {
	if len(r.CPUs) == 0 {
		return "CPUs not known (no /proc)"
	}
	sim := r.CPUs[simulatorGroup]
	// The stack's groups, gathered by where they ran and at what priority;
	// the payment gateway is the world outside the stack, like the
	// simulator, and may share its CPUs.
	type place struct{ cpus, nice string }
	byPlace := map[place][]string{}
	var outside []string
	for g, list := range r.CPUs {
		switch {
		case g == simulatorGroup:
		case g == gatewayGroup && !overlapsStack(r, list):
			outside = append(outside, g+" on CPU "+list)
		default:
			p := place{list, r.Nice[g]}
			byPlace[p] = append(byPlace[p], g)
		}
	}
	places := make([]place, 0, len(byPlace))
	for p := range byPlace {
		places = append(places, p)
	}
	sort.Slice(places, func(i, j int) bool {
		if places[i].cpus != places[j].cpus {
			return places[i].cpus < places[j].cpus
		}
		return places[i].nice < places[j].nice
	})
	var stack []string
	shared := sim == ""
	for _, p := range places {
		sort.Strings(byPlace[p])
		where := strings.Join(byPlace[p], ", ") + " on CPU " + p.cpus
		if p.nice != "" && p.nice != "0" {
			where += " at nice " + p.nice
		}
		stack = append(stack, where)
		shared = shared || overlap(cpuSet(sim), cpuSet(p.cpus))
	}
	if shared {
		return "not pinned: the simulator on CPU " + or(sim, "?") + " shares it with " + strings.Join(append(stack, outside...), "; ")
	}
	if len(outside) > 0 {
		stack = append(stack, "outside the stack, "+strings.Join(outside, ", "))
	}
	return "pinned: the simulator on CPU " + sim + "; " + strings.Join(stack, "; ")
}

// CoreLoops says how long the fixed loop took on each CPU before and after
// the crowd ("a fixed loop took 40 → 41 ms on CPU 0, 39 → 40 ms on CPU 1"),
// or "" when it was not timed: a slow core under the run is the machine,
// not the system.
func CoreLoops(r *crowdsim.Result) string {
	before, after := r.CoreLoopMs[0], r.CoreLoopMs[1]
	cpus := make([]string, 0, len(before))
	for cpu := range before {
		cpus = append(cpus, cpu)
	}
	sort.Slice(cpus, func(i, j int) bool {
		a, _ := strconv.Atoi(cpus[i])
		b, _ := strconv.Atoi(cpus[j])
		return a < b
	})
	var parts []string
	for _, cpu := range cpus {
		took := num(before[cpu], 0)
		if ms, ok := after[cpu]; ok {
			took += " → " + num(ms, 0)
		}
		parts = append(parts, took+" ms on CPU "+cpu)
	}
	if len(parts) == 0 {
		return ""
	}
	return "a fixed loop took " + strings.Join(parts, ", ")
}

// gatewayGroup is the sandbox payment gateway's label among the CPU groups.
const gatewayGroup = "sandbox gateway"

// overlapsStack reports whether a CPU list shares a CPU with any of the
// stack's groups (all but the simulator and the gateway).
func overlapsStack(r *crowdsim.Result, list string) bool {
	for g, l := range r.CPUs {
		if g != simulatorGroup && g != gatewayGroup && overlap(cpuSet(list), cpuSet(l)) {
			return true
		}
	}
	return false
}

// cpuSet reads a kernel CPU list ("0-2,5", or several joined by "|") into
// the CPUs it names.
func cpuSet(list string) map[int]bool {
	set := map[int]bool{}
	for _, part := range strings.Split(strings.ReplaceAll(list, "|", ","), ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, errA := strconv.Atoi(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil {
			continue
		}
		for c := a; c <= b; c++ {
			set[c] = true
		}
	}
	return set
}

func overlap(a, b map[int]bool) bool {
	for c := range a {
		if b[c] {
			return true
		}
	}
	return false
}

// simulatorGroup is the simulator's label among the CPU groups.
const simulatorGroup = "crowd (the simulator)"

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func cpuCell(r *crowdsim.Result, sec float64) string {
	if sec == 0 || r.CrowdS <= 0 || r.Machine == "" {
		return "–"
	}
	return fmt.Sprintf("%.1f s (%.0f%% of one core)", sec, 100*sec/r.CrowdS)
}

func writeEndpoints(b *strings.Builder, rs []run) {
	b.WriteString("## Endpoints\n\n")
	header(b, "run", "endpoint", "count", "by status", "p50 ms", "p99 ms", "max ms")
	for _, x := range rs {
		if len(x.r.Endpoints) == 0 {
			line(b, x.label, "—", "0", "", "", "", "")
		}
		for _, e := range x.r.Endpoints {
			line(b, x.label, e.Name, count(e.Count), byStatus(e.ByStatus),
				num(e.P50Ms, 1), num(e.P99Ms, 1), num(e.MaxMs, 1))
		}
	}
	b.WriteString("\n")
}

// openEndpoints are the endpoints the open's table shows, in its order.
var openEndpoints = []string{"join", "status", "reserve", "order_create"}

// writeOpen shows the burst second by second: what the shoppers asked for
// and how long it took, beside the cores the simulator and the stack used,
// so a second the simulator was short of its core is told apart from one
// the stack was.
func writeOpen(b *strings.Builder, r *crowdsim.Result) {
	from, to := r.BurstWindowS[0], r.BurstWindowS[1]
	if to <= from {
		return
	}
	b.WriteString("## The open, second by second\n\n")
	b.WriteString("The flashgate run's burst: requests sent in each second and their p99 (ms), by endpoint; " +
		"the cores the simulator and the stack (every other process) used in that second.\n\n")
	cols := append([]string{"requests", "5xx", "p99 ms"}, openEndpoints...)
	header(b, "second", append(cols, "simulator cores", "stack cores")...)
	for _, s := range r.Timeline {
		if s.T < from || s.T >= to {
			continue
		}
		cells := []string{num(s.T, 0), count(s.Requests), count(s.Status5xx), num(s.P99Ms, 0)}
		for _, name := range openEndpoints {
			e, ok := s.Endpoints[name]
			cells = append(cells, orDash(ok, count(e.Requests)+" / "+num(e.P99Ms, 0)))
		}
		var stack float64
		for g, v := range s.CPU {
			if g != crowdsim.SimulatorCPU {
				stack += v
			}
		}
		sim, ok := s.CPU[crowdsim.SimulatorCPU]
		cells = append(cells, orDash(ok, num(sim, 2)), orDash(len(s.CPU) > 0, num(stack, 2)))
		line(b, cells...)
	}
	b.WriteString("\n")
}

func byStatus(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+": "+count(m[k]))
	}
	return strings.Join(parts, ", ")
}

func writeFates(b *strings.Builder, rs []run) {
	b.WriteString("## Fates\n\nSeconds from a shopper's first click to knowing their fate; the sold-out notice is seconds from the last unit to hearing \"sold out\" while in line, " +
		"the sold-out news seconds from the stock count's first zero (below).\n\n")
	header(b, "run", "fate", "shoppers", "p50 s", "p90 s", "p99 s", "max s")
	for _, x := range rs {
		f := x.r.Fates
		reserved := "reserved"
		if x.label == "naive" {
			reserved = "bought"
		}
		dist(b, x.label, reserved, f.Reserved)
		dist(b, x.label, "sold out", f.SoldOut)
		if x.r.SoldOutNotice.Count > 0 {
			dist(b, x.label, "sold-out notice", x.r.SoldOutNotice)
		}
		if n := x.r.SoldOutNews; n != nil {
			dist(b, x.label, "sold-out news", n.Page)
		}
	}
	b.WriteString("\n")
	writeNews(b, rs)
	header(b, "run", "paid", "abandoned", "unknown", "answered", "p99 time to answer s")
	for _, x := range rs {
		f := x.r.Fates
		line(b, x.label, count(f.Paid), count(f.Abandoned), count(f.Unknown), count(f.Answered),
			orDash(f.Answered > 0, num(f.AnswerP99, 2)))
	}
	b.WriteString("\n")
}

// writeNews splits the sold-out news into its parts: how long returned
// units kept the sale open, how long the news took to the CDN and to the
// pages, and what the CDN carried for a waiting page.
func writeNews(b *strings.Builder, rs []run) {
	var with []run
	for _, x := range rs {
		if x.r.SoldOutNews != nil {
			with = append(with, x)
		}
	}
	if len(with) == 0 {
		return
	}
	b.WriteString("### Sold-out news\n\nTimed from the moment the origin's stock count first reached zero, as the reserve script " +
		"recorded it in Redis (the ledger's `first_zero_at`), not from the last unit's 201: holds that ran out before it had put units " +
		"back on sale. Returned units: from the first zero to the last, while holds ran out or payments failed and their units went " +
		"again. To the CDN: until the CDN held a snapshot saying sold out (the edge's refresh, the CDN's max-age). To the pages: until " +
		"each shopper in line at the first zero heard it (the page's refresh added). From the last zero, the count at zero for good: " +
		"the same to the CDN and to the pages in line then and not yet told — the news pipeline alone, the goal's figure. Told before: " +
		"in line and told \"sold out\" before the count first reached zero (should be none). A return shown: after the last unit that came back to a count at zero, until the CDN " +
		"said available (or the unit went again): how long a page was told \"sold out for now\" while a unit was there, before its own " +
		"refresh (reopened: after the last zero, and not taken by the end; never: not shown before the run ended). Page reads: the " +
		"snapshot reads pages made through the CDN, per shopper-second in line.\n\n")
	header(b, "run", "returned units s", "to the CDN s", "to the pages p50 / p99 / max s", "from the last zero: to the CDN s",
		"to the pages p50 / p99 / max s", "told before", "never heard",
		"a return shown s", "page reads", "per shopper-s")
	for _, x := range with {
		n := x.r.SoldOutNews
		line(b, x.label, num(n.ReturnedTailS, 2), orDash(n.CDNS >= 0, num(n.CDNS, 2)),
			orDash(n.Page.Count > 0, num(n.Page.P50, 2)+" / "+num(n.Page.P99, 2)+" / "+num(n.Page.Max, 2)),
			orDash(n.CDNLastS >= 0, num(n.CDNLastS, 2)),
			orDash(n.Pipeline.Count > 0, num(n.Pipeline.P50, 2)+" / "+num(n.Pipeline.P99, 2)+" / "+num(n.Pipeline.Max, 2)),
			count(n.ToldBefore), count(n.Missed), returnShown(n),
			count(int(n.PageReads)), num(n.PageReadsPerS, 2))
	}
	b.WriteString("\n")
}

func returnShown(n *crowdsim.SoldOutNews) string {
	shown := "never"
	if n.ReturnShownS >= 0 {
		shown = num(n.ReturnShownS, 2)
	}
	switch {
	case n.ReturnedAtS <= 0:
		return "—"
	case n.Reopened:
		return shown + " (reopened)"
	}
	return shown
}

// writeRegions splits the runs that had two regions by region: what the
// distance to the home region costs the far region's shoppers.
func writeRegions(b *strings.Builder, rs []run) {
	var two []run
	for _, x := range rs {
		if len(x.r.Regions) > 0 {
			two = append(two, x)
		}
	}
	if len(two) == 0 {
		return
	}
	b.WriteString("## Regions\n\nShoppers by the region they shopped through (bots left out); seconds. " +
		"answer: click → first honest answer; join and reserve: the request's round trip; admitted: click → \"admitted\"; sold-out notice: last unit → hearing \"sold out\" while in line.\n\n")
	header(b, "run, region", "what", "shoppers", "p50 s", "p90 s", "p99 s", "max s")
	for _, x := range two {
		for _, r := range x.r.Regions {
			label := x.label + ", " + r.Name
			line(b, label, "answered", count(r.Answered)+" of "+count(r.Shoppers), "", "", "", "")
			dist(b, label, "answer", r.Answer)
			dist(b, label, "join", r.Join)
			dist(b, label, "admitted", r.Admitted)
			dist(b, label, "reserve", r.Reserve)
			dist(b, label, "sold-out notice", r.SoldOutNotice)
		}
	}
	b.WriteString("\n")
}

func dist(b *strings.Builder, label, fate string, d crowdsim.Dist) {
	if d.Count == 0 {
		line(b, label, fate, "0", "—", "—", "—", "—")
		return
	}
	line(b, label, fate, count(d.Count), num(d.P50, 2), num(d.P90, 2), num(d.P99, 2), num(d.Max, 2))
}

func writeFairness(b *strings.Builder, rs []run) {
	b.WriteString("## Fairness\n\n")
	rows := []struct {
		name string
		cell func(f crowdsim.Fairness) string
	}{
		{"rank correlation, join order vs admission position", func(f crowdsim.Fairness) string {
			return orDash(f.Compared > 0, num(f.RankCorrelation, 4)+" ("+count(f.Compared)+" shoppers)")
		}},
		{"observed correlation, join order vs first seen admitted", func(f crowdsim.Fairness) string {
			return orDash(f.ObservedCompared > 0, num(f.ObservedCorrelation, 4)+" ("+count(f.ObservedCompared)+" shoppers)")
		}},
		{"bot accounts", func(f crowdsim.Fairness) string { return count(f.BotAccounts) }},
		{"units bots got", func(f crowdsim.Fairness) string { return count(f.BotUnits) }},
		{"bots' share of the stock", func(f crowdsim.Fairness) string { return pct(f.BotShare) }},
	}
	header(b, "", labels(rs)...)
	for _, row := range rows {
		cells := []string{row.name}
		for _, x := range rs {
			cells = append(cells, row.cell(x.r.Fairness))
		}
		line(b, cells...)
	}
	b.WriteString("\n")
}

func writeLedger(b *strings.Builder, rs []run) {
	b.WriteString("## Final ledger\n\nAvailable / held / sold per SKU.\n\n")
	header(b, "run", "SKU", "total", "Redis", "Postgres", "drift", "pending intents")
	for _, x := range rs {
		if len(x.r.Ledger) == 0 {
			line(b, x.label, "—", "", "", "", "", "")
		}
		for _, l := range x.r.Ledger {
			line(b, x.label, l.SKU, count(l.Total), triple(l.Redis), triple(l.Postgres), triple(l.Drift), count(l.Pending))
		}
	}
	b.WriteString("\nLedger invariant:")
	for i, x := range rs {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(b, "%s %s **%s**", sep, x.label, okWord(x.r.InvariantOK))
	}
	b.WriteString(".\n\n")
}

func triple(v [3]int64) string {
	return count(v[0]) + " / " + count(v[1]) + " / " + count(v[2])
}

func writeCharts(b *strings.Builder, charts []string) {
	if len(charts) == 0 {
		return
	}
	b.WriteString("## Charts\n\n")
	for _, c := range charts {
		link := filepath.ToSlash(c)
		caption := chartCaptions[path.Base(link)]
		if caption == "" {
			caption = strings.TrimSuffix(path.Base(link), path.Ext(link))
		}
		fmt.Fprintf(b, "![%s](%s)\n\n", caption, link)
	}
}

func writeNotes(b *strings.Builder, rs []run) {
	var notes []string
	for _, x := range rs {
		for _, n := range x.r.Notes {
			notes = append(notes, "- "+x.label+": "+n)
		}
	}
	if len(notes) == 0 {
		return
	}
	b.WriteString("## Notes\n\n" + strings.Join(notes, "\n") + "\n")
}

func labels(rs []run) []string {
	out := make([]string, len(rs))
	for i, x := range rs {
		out[i] = x.label
	}
	return out
}

func header(b *strings.Builder, first string, rest ...string) {
	cols := append([]string{first}, rest...)
	line(b, cols...)
	b.WriteString("|" + strings.Repeat(" --- |", len(cols)) + "\n")
}

// line writes one table row, escaping the cells' pipes.
func line(b *strings.Builder, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	b.WriteString("\n")
}

func orDash(ok bool, s string) string {
	if !ok {
		return "—"
	}
	return s
}

func okWord(ok bool) string {
	if ok {
		return "OK"
	}
	return "not OK"
}
