package capmodel

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
)

// The markers around the generated part of docs/CAPACITY.md.
const (
	BeginMarker = "<!-- model:begin -->"
	EndMarker   = "<!-- model:end -->"
)

// Result is the model computed from a set of inputs.
type Result struct {
	Fleets []Fleet // one per seed, in the inputs' order
	// Factor is the primary edge check's measured CPU over the model's:
	// what crowd requests cost against the micro-benchmarks' figures.
	Factor float64
	// CalibratedEdgeNodes are the fleets' edge nodes with the edge CPU
	// times Factor.
	CalibratedEdgeNodes []int
}

// Model computes every seed's fleet and the check's factor.
func Model(in *Inputs) (Result, error) {
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	c, page, plan := in.Costs.Costs(), in.Page.Page(), in.Plan.Plan()
	var res Result
	primary := in.PrimaryCheck().Check()
	res.Factor = primary.AddedEdgeCPUS / c.Predict(primary)
	for _, s := range in.Seeds {
		f, err := Compute(c, page, plan, s.Seed())
		if err != nil {
			return Result{}, err
		}
		res.Fleets = append(res.Fleets, f)
		res.CalibratedEdgeNodes = append(res.CalibratedEdgeNodes,
			Nodes(f.Peak.Cores*res.Factor, plan.EdgeCoresPerNode, plan.Headroom, plan.MinNodes))
	}
	return res, nil
}

// Render writes the generated part of docs/CAPACITY.md, the markers not
// included.
func Render(in *Inputs) (string, error) {
	res, err := Model(in)
	if err != nil {
		return "", err
	}
	c, plan := in.Costs.Costs(), in.Plan.Plan()
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("_Written by `make bench-model` (command bench/model) from [capacity-inputs.json](capacity-inputs.json), which it first " +
		"updates from the newest benchmark reports under `.data/`. `go test ./bench/model/` fails when this part differs " +
		"from what the model computes: change the inputs or the model, then run `make bench-model`, never edit it by hand._\n\n")

	w("### The measured costs\n\n")
	w("| cost | value | as measured | command | when | recorded in |\n|---|---|---|---|---|---|\n")
	for _, r := range in.Costs.Rows() {
		f := r.Fig
		w("| %s | %s | %s | %s | %s | %s |\n", r.Label, withUnit(f.Value, r.Unit), cell(f.Measured), code(f.Command), orNone(f.Date, "not recorded"), cell(f.Source))
	}

	w("\n### The page's rules\n\n| rule | value | as written | where |\n|---|---|---|---|\n")
	for _, r := range in.Page.Rows() {
		w("| %s | %s | %s | %s |\n", r.Label, withUnit(r.Fig.Value, r.Unit), cell(r.Fig.Measured), cell(r.Fig.Source))
	}

	w("\n### The plan (choices, not measurements)\n\n")
	for _, ch := range []struct {
		name string
		c    Choice
		show string
	}{
		{"headroom", in.Plan.Headroom, pct(in.Plan.Headroom.Value) + " of each core and of Redis's one thread at the peak"},
		{"edge node", in.Plan.EdgeCoresPerNode, num(in.Plan.EdgeCoresPerNode.Value) + " cores"},
		{"origin node", in.Plan.OriginCoresPerNode, num(in.Plan.OriginCoresPerNode.Value) + " cores"},
		{"nodes of a tier at the least", in.Plan.MinNodes, num(in.Plan.MinNodes.Value)},
		{"CDN caches in front of the edges", in.Plan.CDNCaches, num(in.Plan.CDNCaches.Value)},
	} {
		w("- **%s**: %s. %s\n", ch.name, ch.show, ch.c.Why)
	}

	w("\n### One edge node at the plan's headroom\n\n")
	w("| request | edge CPU | a %s-core edge node at %s answers |\n|---|---|---|\n", num(plan.EdgeCoresPerNode), pct(plan.Headroom))
	for _, k := range []struct {
		name   string
		micros float64
		extra  string
	}{
		{"join", c.EdgeJoinMicros, fmt.Sprintf(" (each also %s µs of the sale's Redis line slot)", num(c.RedisJoinMicros))},
		{"status poll", c.EdgePollMicros, ""},
		{"sold-out reserve", c.EdgeSoldOutMicros, ""},
		{"request passed to the origin", c.EdgeProxiedMicros, ""},
	} {
		w("| %s | %s µs | %s/s%s |\n", k.name, num(k.micros), count(PerNode(k.micros, plan.EdgeCoresPerNode, plan.Headroom)), k.extra)
	}

	fl := res.Fleets
	row := func(label string, f func(Fleet) string) {
		w("| %s |", label)
		for _, x := range fl {
			w(" %s |", f(x))
		}
		w("\n")
	}
	header := func() {
		w("| |")
		for _, x := range fl {
			w(" %s |", x.Seed.Name)
		}
		w("\n|---|")
		for range fl {
			w("---|")
		}
		w("\n")
	}

	w("\n### Each seed's peak\n\n")
	header()
	row("shoppers, arriving over", func(f Fleet) string { return count(f.Seed.Shoppers) + " in " + num(f.Seed.WindowS) + " s" })
	row("stock", func(f Fleet) string { return count(f.Seed.Stock) })
	row("arrivals a second", func(f Fleet) string { return count(f.ArrivalsPerS) })
	row("admissions a second (stock ÷ window unless set)", func(f Fleet) string { return count(f.AdmissionPerS) })
	for _, ph := range []struct {
		name string
		p    func(Fleet) Phase
	}{
		{"edge, the arrivals' last second", func(f Fleet) Phase { return f.Arrivals }},
		{"edge, the line after the arrivals", func(f Fleet) Phase { return f.Line }},
	} {
		row(ph.name+": joins, polls, passed to the origin, snapshot fetches a second", func(f Fleet) string {
			p := ph.p(f)
			return fmt.Sprintf("%s, %s, %s, %s", count(p.JoinsPerS), count(p.PollsPerS), count(p.ProxiedPerS), count(p.FetchesPerS))
		})
		row(ph.name+": requests a second, edge CPU", func(f Fleet) string {
			p := ph.p(f)
			return fmt.Sprintf("%s/s, %s cores", count(p.RequestsPerS), cores(p.Cores))
		})
	}
	row("CDN: snapshot re-reads and page files a second", func(f Fleet) string {
		return count(f.SnapshotLoadsPerS) + " + " + count(f.PageFilesPerS)
	})
	row("the CDN's share of every request at the peak", func(f Fleet) string { return pct(f.CDNShare) })

	w("\n### The fleet\n\n")
	header()
	row(fmt.Sprintf("edge nodes (%s cores, ≤ %s busy), from the micro-benchmarks' costs", num(plan.EdgeCoresPerNode), pct(plan.Headroom)),
		func(f Fleet) string { return fmt.Sprintf("**%d** (peak: %s)", f.EdgeNodes, f.Peak.Name) })
	i := 0
	row(fmt.Sprintf("edge nodes if crowd requests cost what the check below measured (× %s)", dec(res.Factor, 2)), func(f Fleet) string {
		n := res.CalibratedEdgeNodes[i]
		i++
		return fmt.Sprintf("**%d**", n)
	})
	row("Redis: the sale's line slot (joins)", func(f Fleet) string {
		s := fmt.Sprintf("%s of a thread, %s of the plan's %s", cores(f.LineRedisCores), pct(f.LineRedisCores/plan.Headroom), num(plan.Headroom))
		if !f.LineFits {
			s += ": **does not fit one thread**"
		}
		return s
	})
	row("Redis: the sale's stock slot (reserves)", func(f Fleet) string { return cores(f.StockRedisCores) + " of a thread" })
	row("Redis primaries for the sale (each with a replica)", func(f Fleet) string {
		if !f.LineFits {
			return fmt.Sprintf("%d, were the line split over primaries (not built)", f.RedisPrimaries)
		}
		return fmt.Sprintf("**%d**", f.RedisPrimaries)
	})
	row("Redis memory, the whole crowd in line", func(f Fleet) string { return count(f.RedisBytes/1e6) + " MB" })
	row(fmt.Sprintf("origin nodes (%s cores, ≤ %s): the reserve path alone – everything per unit sold", num(plan.OriginCoresPerNode), pct(plan.Headroom)),
		func(f Fleet) string {
			return fmt.Sprintf("%d – **%d** (%s – %s cores)", f.OriginNodesLow, f.OriginNodesHigh, cores(f.OriginCoresLow), cores(f.OriginCoresHigh))
		})
	row(fmt.Sprintf("Postgres primary, cores at ≤ %s: the reserve journal alone – everything per unit sold", pct(plan.Headroom)),
		func(f Fleet) string {
			return fmt.Sprintf("%s – **%s**", cores(f.PostgresCoresLow), cores(f.PostgresCoresHigh))
		})

	w("\n### Where it stops\n\n")
	w("What one sale cannot spread over more machines, at the plan's %s; the edge and the origin are stateless and scale out.\n\n", pct(plan.Headroom))
	w("| resource | capacity at %s |", pct(plan.Headroom))
	for _, f := range fl {
		w(" %s: demand (use) |", f.Seed.Name)
	}
	w("\n|---|---|")
	for range fl {
		w("---|")
	}
	w("\n")
	for j, l := range fl[0].Limits {
		w("| %s | %s %s/s |", l.Resource, count(l.Capacity), l.Unit)
		for _, f := range fl {
			x := f.Limits[j]
			w(" %s/s (%s) |", count(x.Demand), pct(x.Use()))
		}
		w("\n")
	}
	w("\n")
	for _, f := range fl {
		l := f.First
		w("- **%s**: the first to stop is %s, at %s of its capacity", f.Seed.Name, l.Resource, pct(l.Use()))
		if l.Use() <= 1 {
			w("; the peak could grow %s× before it does.", dec(1/l.Use(), 2))
		} else {
			w(": the peak does not fit.")
		}
		if next, ok := second(f); ok {
			w(" Next: %s, at %s.", next.Resource, pct(next.Use()))
		}
		if !f.LineFits {
			w(" One sale's line is one hash slot, so one primary's thread takes every join: at %s µs a join the crowd's joins "+
				"must be spread over at least %s s (a pre-queue before the start) for one thread at %s, or the line split over "+
				"primaries, which is not built.", num(c.RedisJoinMicros), count(f.JoinSpreadS), pct(plan.Headroom))
		}
		if f.BestRateUse > 1 {
			w(" Even the most joins one Redis has taken in any benchmark, %s/s with its thread full, is %s× too few.",
				count(c.RedisBestJoinsPerS), dec(f.BestRateUse, 2))
		} else {
			w(" The joins are %s of the most one Redis has taken in any benchmark (%s/s, its thread full).",
				pct(f.BestRateUse), count(c.RedisBestJoinsPerS))
		}
		w("\n")
	}

	w("\n### The check against measured points the model did not use\n\n")
	w("| point | as measured | the model | error |\n|---|---|---|---|\n")
	for _, e := range in.EdgeChecks {
		p := c.Predict(e.Check())
		name := e.Name
		if e.Primary {
			name = "**" + name + "** (the primary point)"
		}
		errCell := signedPct(Error(p, e.AddedEdgeCPUS))
		if e.AddedEdgeCPUS <= 0 {
			errCell = "none: the larger crowd added no edge CPU to compare with"
		}
		w("| %s | %s (%s, %s) | %s CPU-s | %s |\n", name, cell(e.Measured), code(e.Command), e.Date, dec(p, 2), errCell)
	}
	cc := in.CheckoutCheck
	p := c.PredictCheckout(cc.Check())
	w("| %s | %s (%s, %s) | %s CPU-s | %s |\n", cc.Name, cell(cc.Measured), code(cc.Command), cc.Date, dec(p, 1), signedPct(Error(p, cc.MeasuredCPUS)))
	w("\nThe edge rows price each added join at the edge's join cost and every other added request at the poll's. "+
		"The primary point's measured CPU over the model's, %s, is the factor of the second edge row of the fleet.\n", dec(res.Factor, 2))
	return b.String(), nil
}

// second is the limit with the highest use after f.First.
func second(f Fleet) (Limit, bool) {
	var out Limit
	found := false
	for _, l := range f.Limits {
		if l.Resource == f.First.Resource {
			continue
		}
		if !found || l.Use() > out.Use() {
			out, found = l, true
		}
	}
	return out, found
}

// Splice returns doc with the text between BeginMarker and EndMarker
// replaced by generated.
func Splice(doc, generated string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i || strings.Count(doc, BeginMarker) != 1 || strings.Count(doc, EndMarker) != 1 {
		return "", errors.New("want one " + BeginMarker + " followed by one " + EndMarker)
	}
	head := doc[:i+len(BeginMarker)]
	return head + "\n" + generated + doc[j:], nil
}

// withUnit is v followed by its unit.
func withUnit(v float64, unit string) string {
	switch unit {
	case "":
		return num(v)
	case "/s":
		return num(v) + "/s"
	}
	return num(v) + " " + unit
}

// num is v with up to two decimals, thousands separated from 1,000 up.
func num(v float64) string {
	if math.Abs(v) >= 1000 {
		return count(v)
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// cores is a number of cores: three decimals under 0.1, else two.
func cores(v float64) string {
	if math.Abs(v) < 0.1 {
		return dec(v, 3)
	}
	return dec(v, 2)
}

// dec is v with prec decimals.
func dec(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// count is v rounded to a whole number, thousands separated: 1234567.4 →
// "1,234,567".
func count(v float64) string { return benchreport.Thousands(int64(math.Round(v))) }

// pct is a share as a percentage with one decimal, or none from 10 % up
// where it is whole.
func pct(share float64) string {
	v := 100 * share
	if v == math.Trunc(v) {
		return dec(v, 0) + " %"
	}
	return dec(v, 1) + " %"
}

// signedPct is a share as a signed percentage.
func signedPct(share float64) string {
	s := dec(100*share, 1) + " %"
	if share >= 0 {
		return "+" + s
	}
	return "−" + s[1:]
}

// orNone is s, or none when s is empty.
func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// code is s as inline code, or "—" when empty.
func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + cell(strings.ReplaceAll(s, "`", "'")) + "`"
}
