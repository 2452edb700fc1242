package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/capmodel"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/edgeperf"
	"github.com/flashgate/flashgate/bench/internal/reserveperf"
)

// config is one run's flags.
type config struct {
	inputs string // docs/capacity-inputs.json
	doc    string // docs/CAPACITY.md
	data   string // where the reports are: .data
	check  bool   // compare only: no reports read, nothing written
}

// run reads flags, updates the inputs from the newest reports (unless
// -check), computes the model and rewrites the document's generated part,
// or with -check fails when the document differs from it.
func run(args []string, stdout, stderr io.Writer) error {
	c, err := loadConfig(args, stderr)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(c.inputs)
	if err != nil {
		return fmt.Errorf("read inputs: %w", err)
	}
	in, err := capmodel.DecodeInputs(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", c.inputs, err)
	}
	docRaw, err := os.ReadFile(c.doc)
	if err != nil {
		return fmt.Errorf("read document: %w", err)
	}
	if c.check {
		want, err := document(in, string(docRaw))
		if err != nil {
			return fmt.Errorf("%s: %w", c.doc, err)
		}
		if want != string(docRaw) {
			return fmt.Errorf("%s is not what the model computes from %s (first difference at line %d): run make bench-model",
				c.doc, c.inputs, firstDiffLine(string(docRaw), want))
		}
		fmt.Fprintf(stdout, "model: %s matches the model of %s\n", c.doc, c.inputs)
		return nil
	}

	for _, s := range sources {
		path, at, ok := newest(filepath.Join(c.data, s.glob))
		if !ok {
			fmt.Fprintf(stdout, "model: no %s report (%s): %s; keeping the recorded figures\n", s.name, filepath.Join(c.data, s.glob), s.missing)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s report: %w", s.name, err)
		}
		took, err := s.apply(b, stamp{path: path, at: at, command: s.command}, in)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(took) == 0 {
			fmt.Fprintf(stdout, "model: %s: nothing newer than the recorded figures\n", path)
			continue
		}
		fmt.Fprintf(stdout, "model: %s: took %s\n", path, strings.Join(took, ", "))
	}
	out, err := capmodel.EncodeInputs(in)
	if err != nil {
		return err
	}
	if _, err := capmodel.DecodeInputs(out); err != nil {
		return fmt.Errorf("the reports gave figures the model refuses: %w", err)
	}
	if !bytes.Equal(out, raw) {
		if err := os.WriteFile(c.inputs, out, 0o644); err != nil {
			return fmt.Errorf("write inputs: %w", err)
		}
		fmt.Fprintf(stdout, "model: wrote %s\n", c.inputs)
	}
	doc, err := document(in, string(docRaw))
	if err != nil {
		return fmt.Errorf("%s: %w", c.doc, err)
	}
	if doc != string(docRaw) {
		if err := os.WriteFile(c.doc, []byte(doc), 0o644); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		fmt.Fprintf(stdout, "model: wrote %s\n", c.doc)
	} else {
		fmt.Fprintf(stdout, "model: %s unchanged\n", c.doc)
	}
	return summary(stdout, in)
}

func loadConfig(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.inputs, "inputs", "docs/capacity-inputs.json", "the model's inputs, rewritten with the newest reports' figures")
	fs.StringVar(&c.doc, "doc", "docs/CAPACITY.md", "the document whose part between "+capmodel.BeginMarker+" and "+capmodel.EndMarker+" the model writes")
	fs.StringVar(&c.data, "data", ".data", "where the benchmarks write their reports")
	fs.BoolVar(&c.check, "check", false, "only compare the document with the model of the inputs file (no reports read, nothing written); fail when they differ")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, nil
}

// document is doc with its generated part computed from in.
func document(in *capmodel.Inputs, doc string) (string, error) {
	gen, err := capmodel.Render(in)
	if err != nil {
		return "", err
	}
	return capmodel.Splice(doc, gen)
}

// summary writes each seed's fleet in a line.
func summary(w io.Writer, in *capmodel.Inputs) error {
	res, err := capmodel.Model(in)
	if err != nil {
		return err
	}
	for i, f := range res.Fleets {
		fmt.Fprintf(w, "model: %s: %d edge nodes (%d with the check's × %.2f), %d Redis primaries (line fits one: %v), %d–%d origins, Postgres %.2f–%.1f cores; first to stop: %s at %.0f %%\n",
			f.Seed.Name, f.EdgeNodes, res.CalibratedEdgeNodes[i], res.Factor, f.RedisPrimaries, f.LineFits,
			f.OriginNodesLow, f.OriginNodesHigh, f.PostgresCoresLow, f.PostgresCoresHigh, f.First.Resource, 100*f.First.Use())
	}
	return nil
}

// firstDiffLine is the 1-based line where a and b first differ.
func firstDiffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// reportTime is how the benchmarks name a report's folder: its UTC start.
const reportTime = "20060102-150405"

// newest is the report matching glob (whose folder is named reportTime)
// with the latest folder name, and that time.
func newest(glob string) (path string, at time.Time, ok bool) {
	matches, _ := filepath.Glob(glob) // the only error is a malformed pattern, and ours are fixed
	slices.Sort(matches)
	for _, m := range slices.Backward(matches) {
		if t, err := time.Parse(reportTime, filepath.Base(filepath.Dir(m))); err == nil {
			return m, t, true
		}
	}
	return "", time.Time{}, false
}

// stamp is where a report's figures come from.
type stamp struct {
	path    string
	at      time.Time
	command string
}

// set puts value into f when the report is not older than f's own date
// (or f has none), and reports whether it did.
func (s stamp) set(f *capmodel.Figure, value float64, measured string) bool {
	if !(value > 0) {
		return false
	}
	if t, ok := f.Time(); ok && s.at.Before(t) {
		return false
	}
	*f = capmodel.Figure{Value: value, Measured: measured, Command: s.command, Date: s.at.Format(capmodel.DateLayout), Source: s.path}
	return true
}

// source is one benchmark's reports.
type source struct {
	name    string
	glob    string // under the data folder
	command string // what writes it
	missing string // what to say when there is none
	apply   func(b []byte, s stamp, in *capmodel.Inputs) (took []string, err error)
}

// sources are the reports the model reads, in the order it reads them.
var sources = []source{
	{name: "bench-edge", glob: "edgebench/*/report.json", command: "make bench-edge", apply: applyEdge,
		missing: "make bench-edge writes it (deploy/local/bench.sh: -report-json)"},
	{name: "bench-reserve", glob: "reservebench/*/report.json", command: "make bench-reserve", apply: applyReserve,
		missing: "make bench-reserve writes it (deploy/local/bench.sh: -report-json)"},
	{name: "bench-scaling", glob: "scaling/*/scaling.json", command: "make bench-scaling", apply: applyScaling,
		missing: "make bench-scaling writes it"},
	{name: "bench", glob: "crowd/*/report.json", command: "make bench", apply: applyCrowd,
		missing: "make bench writes it"},
}

// decode reads a report's JSON into v; fields the model does not read are
// ignored, so a report may grow without breaking it.
func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode report: %w", err)
	}
	return nil
}

// applyEdge takes bench/edgebench's per-request CPU (median over rounds of
// the edge runs) and the memory phase's Redis bytes and fill rate.
func applyEdge(b []byte, s stamp, in *capmodel.Inputs) ([]string, error) {
	var rep edgeperf.Report
	if err := decode(b, &rep); err != nil {
		return nil, err
	}
	var took []string
	note := func(ok bool, what string) {
		if ok {
			took = append(took, what)
		}
	}
	cf := &in.Costs
	for _, p := range rep.Paths {
		proc, redis, diff := medians(p)
		what := fmt.Sprintf("median of %d rounds: process CPU per request of the edge run (edge node and load generator in one process)", len(p.Rounds))
		switch p.Name {
		case "join":
			note(s.set(&cf.EdgeJoin, proc, what), "edge join µs")
			note(s.set(&cf.RedisJoin, redis, fmt.Sprintf("median of %d rounds: redis-server CPU per join of the edge run", len(p.Rounds))), "Redis join µs")
		case "status poll":
			note(s.set(&cf.EdgePoll, proc, what), "edge poll µs")
		case "sold-out reserve":
			note(s.set(&cf.EdgeSoldOut, proc, what), "edge sold-out µs")
		case "proxied reserve":
			note(s.set(&cf.EdgeProxied, diff, fmt.Sprintf("median of %d rounds: process CPU per reserve through the edge minus the origin alone's", len(p.Rounds))), "edge proxied µs")
		}
	}
	if m := rep.Memory; m != nil && len(m.Sizes) > 0 {
		last := m.Sizes[len(m.Sizes)-1]
		note(s.set(&cf.RedisBytesPerShopper, last.Redis.PerShopper, fmt.Sprintf("MEMORY USAGE of the sale's queue keys per shopper at %d in line", last.Shoppers)), "Redis bytes per shopper")
		best := m.Sizes[0]
		for _, z := range m.Sizes[1:] {
			if z.FillPerSecond > best.FillPerSecond {
				best = z
			}
		}
		if best.FillPerSecond > cf.RedisBestJoins.Value {
			note(s.set(&cf.RedisBestJoins, best.FillPerSecond, fmt.Sprintf("joins/s filling a line to %d through the edge's Joiner, above the best recorded", best.Shoppers)), "most joins/s of one Redis")
		}
	}
	return took, nil
}

// medians are a path's medians over rounds of the edge run's process and
// Redis µs per request, and of the edge run's process µs less the origin
// run's (0 without an origin run).
func medians(p *edgeperf.Path) (proc, redis, diff float64) {
	var ps, rs, ds []float64
	for _, r := range p.Rounds {
		var edge, origin *edgeperf.ServerRun
		for i := range r.Runs {
			switch r.Runs[i].Server {
			case "edge":
				edge = &r.Runs[i]
			case "origin":
				origin = &r.Runs[i]
			}
		}
		if edge == nil || edge.Calls == 0 {
			continue
		}
		ps, rs = append(ps, edge.ProcessMicros), append(rs, edge.RedisMicros)
		if origin != nil && origin.Calls > 0 {
			ds = append(ds, edge.ProcessMicros-origin.ProcessMicros)
		}
	}
	return benchreport.Median(ps), benchreport.Median(rs), benchreport.Median(ds)
}

// applyReserve takes bench/reservebench's HTTP path: the origin's process
// and Redis CPU per reserve, median over rounds.
func applyReserve(b []byte, s stamp, in *capmodel.Inputs) ([]string, error) {
	var rep reserveperf.Report
	if err := decode(b, &rep); err != nil {
		return nil, err
	}
	if rep.HTTP == nil {
		return nil, nil
	}
	var procs, rediss []float64
	for _, r := range rep.HTTP.Rounds {
		o := r.Origin
		if o.Calls == 0 {
			continue
		}
		per := o.Seconds / float64(o.Calls) * 1e6
		procs, rediss = append(procs, o.CPU.Process*per), append(rediss, o.CPU.Redis*per)
	}
	var took []string
	n := len(procs)
	if s.set(&in.Costs.OriginReserve, benchreport.Median(procs), fmt.Sprintf("median of %d rounds: process CPU per reserve through the origin's HTTP path, journal on (the load generator in it), %d connections", n, rep.HTTP.Conns)) {
		took = append(took, "origin reserve µs")
	}
	if s.set(&in.Costs.RedisReserve, benchreport.Median(rediss), fmt.Sprintf("median of %d rounds: redis-server CPU per reserve through the origin's HTTP path", n)) {
		took = append(took, "Redis reserve µs")
	}
	return took, nil
}

// applyScaling takes the largest crowd's origin and Postgres CPU per unit
// and its route counts, and makes the step between the smallest and the
// largest crowd the primary edge check, and the smallest crowd's checkout
// the checkout check: points the model's figures do not come from.
func applyScaling(b []byte, s stamp, in *capmodel.Inputs) ([]string, error) {
	var sc crowdreport.Scaling
	if err := decode(b, &sc); err != nil {
		return nil, err
	}
	var sizes []crowdreport.Size
	for _, z := range sc.Sizes {
		if z.Flashgate != nil && z.Flashgate.Stock > 0 {
			sizes = append(sizes, z)
		}
	}
	if len(sizes) == 0 {
		return nil, nil
	}
	slices.SortFunc(sizes, func(a, b crowdreport.Size) int { return a.Shoppers - b.Shoppers })
	lo, hi := sizes[0], sizes[len(sizes)-1]
	stock := float64(hi.Flashgate.Stock)
	var took []string
	note := func(ok bool, what string) {
		if ok {
			took = append(took, what)
		}
	}
	cf := &in.Costs
	note(s.set(&cf.OriginUnit, hi.Flashgate.CPU["origin"]/stock*1e6,
		fmt.Sprintf("%.1f origin CPU-s for one sale of %d units at %d shoppers, everything in it: an upper bound", hi.Flashgate.CPU["origin"], hi.Flashgate.Stock, hi.Shoppers)), "origin µs per unit")
	note(s.set(&cf.PostgresUnit, hi.Flashgate.CPU["postgres"]/stock*1e6,
		fmt.Sprintf("%.1f Postgres CPU-s for one sale of %d units at %d shoppers, everything in it: an upper bound", hi.Flashgate.CPU["postgres"], hi.Flashgate.Stock, hi.Shoppers)), "Postgres µs per unit")
	routes := map[string]int{}
	for _, o := range hi.Origin {
		if o.Kind == "route" {
			routes[o.Name] += o.Count
		}
	}
	if passed := routes["reserve"] + routes["create_order"] + routes["order"] + routes["payment_webhook"]; passed > 0 {
		note(s.set(&cf.ProxiedPerUnit, float64(passed)/stock, fmt.Sprintf("the origin's route counts at %d shoppers: reserve, create_order, order, payment_webhook = %d, for %d units", hi.Shoppers, passed, hi.Flashgate.Stock)), "proxied per unit")
		note(s.set(&cf.IntentsPerUnit, 2*float64(routes["reserve"])/stock, fmt.Sprintf("%d reserve route calls for %d units: at most a reserve and a pay or expire intent each", routes["reserve"], hi.Flashgate.Stock)), "intents per unit")
	}
	if len(sizes) < 2 {
		return took, nil
	}
	date := s.at.Format(capmodel.DateLayout)
	if p := in.PrimaryCheck(); p.Date != "" {
		if t, err := time.Parse(capmodel.DateLayout, p.Date); err == nil && s.at.Before(t) {
			return took, nil
		}
	}
	l, h := lo.Flashgate, hi.Flashgate
	check := capmodel.EdgeCheckInput{
		Name:          fmt.Sprintf("bench-scaling %s, %d → %d shoppers", s.at.Format("2006-01-02 15:04"), lo.Shoppers, hi.Shoppers),
		AddedRequests: float64(h.Answered - l.Answered),
		AddedJoins:    float64(joins(h) - joins(l)),
		AddedEdgeCPUS: h.CPU["edge"] - l.CPU["edge"],
		Primary:       true,
		Measured: fmt.Sprintf("edge %.1f → %.1f CPU-s for %d more answered requests, %d more joins", l.CPU["edge"], h.CPU["edge"],
			h.Answered-l.Answered, joins(h)-joins(l)),
		Command: s.command, Date: date, Source: s.path,
	}
	if check.AddedEdgeCPUS != 0 {
		checks := []capmodel.EdgeCheckInput{check}
		for _, e := range in.EdgeChecks {
			if e.Name != check.Name {
				e.Primary = false
				checks = append(checks, e)
			}
		}
		in.EdgeChecks = checks
		took = append(took, "the primary edge check")
	}
	if cpu := l.CPU["origin"] + l.CPU["postgres"]; cpu > 0 && l.Stock > 0 {
		in.CheckoutCheck = capmodel.CheckoutCheckInput{
			Name:         fmt.Sprintf("bench-scaling %s, origin + Postgres at %d shoppers", s.at.Format("2006-01-02 15:04"), lo.Shoppers),
			Stock:        float64(l.Stock),
			MeasuredCPUS: cpu,
			Measured: fmt.Sprintf("origin %.1f + Postgres %.1f CPU-s for the same %d-unit sale with %d shoppers (the model's per-unit costs are the %d run's)",
				l.CPU["origin"], l.CPU["postgres"], l.Stock, lo.Shoppers, hi.Shoppers),
			Command: s.command, Date: date, Source: s.path,
		}
		took = append(took, "the checkout check")
	}
	return took, nil
}

// applyCrowd takes the joins each account made in make bench's run (the
// defended one when there is one: the production settings).
func applyCrowd(b []byte, s stamp, in *capmodel.Inputs) ([]string, error) {
	var runs crowdreport.Runs
	if err := decode(b, &runs); err != nil {
		return nil, err
	}
	r := &runs.Flashgate
	if runs.Defended != nil {
		r = runs.Defended
	}
	accounts := r.Scenario.Shoppers + r.Scenario.BotAccounts()
	if accounts == 0 {
		return nil, nil
	}
	if s.set(&in.Costs.JoinsPerArrival, float64(joins(r))/float64(accounts),
		fmt.Sprintf("%d joins for %d accounts (%s run)", joins(r), accounts, r.Mode)) {
		return []string{"joins per arrival"}, nil
	}
	return nil, nil
}

// joins is the join requests a crowd run sent, whatever their answers.
func joins(r *crowdsim.Result) int {
	for _, e := range r.Endpoints {
		if e.Name == "join" {
			return e.Count
		}
	}
	return 0
}
