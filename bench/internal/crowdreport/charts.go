package crowdreport

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// Chart geometry: every chart is chartWidth wide and stacks its panels.
const (
	chartWidth  = 9 * vg.Inch
	panelHeight = 3 * vg.Inch
	barWidth    = 16 // points
	// headroom is the share added above the data so the legend, top right,
	// covers none of it.
	headroom = 0.35
)

// runColors keep each run's colour the same across charts.
var runColors = map[string]color.Color{
	"flashgate":               color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"flashgate, defences off": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"flashgate, defences on":  color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"naive":                   color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"ceiling":                 color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// dashed draws a run's second series within one panel; the panel's title
// says which series is dashed.
var dashed = []vg.Length{vg.Points(6), vg.Points(3)}

// WriteCharts draws the charts into dir as PNG files and returns their file
// names (relative to dir, ready for WriteMarkdown): timeline.png,
// latency.png, fates.png, stock.png and cpu.png. Runs with no data give empty panels.
func WriteCharts(dir string, runs Runs) ([]string, error) {
	charts := []struct {
		name   string
		height vg.Length // per panel
		plots  func([]run) ([]*plot.Plot, error)
	}{
		{"timeline.png", panelHeight, timelinePlots},
		{"latency.png", panelHeight, latencyPlots},
		{"fates.png", 1.5 * panelHeight, fatesPlots},
		{"stock.png", panelHeight, stockPlots},
		{"cpu.png", panelHeight, cpuPlots},
	}
	rs := runs.list()
	var names []string
	for _, c := range charts {
		plots, err := c.plots(rs)
		if err == nil {
			err = savePNG(filepath.Join(dir, c.name), c.height, plots)
		}
		if err != nil {
			return names, fmt.Errorf("report: chart %s: %w", c.name, err)
		}
		names = append(names, c.name)
	}
	return names, nil
}

// savePNG stacks plots top to bottom, their axes aligned, into one PNG file.
func savePNG(file string, height vg.Length, plots []*plot.Plot) error {
	img := vgimg.New(chartWidth, height*vg.Length(len(plots)))
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	pad := vg.Points(8)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: 2 * pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: 2 * pad}
	canvases := plot.Align(grid, tiles, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return benchreport.WriteFile(file, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Tick.Marker = plainTicks{}
	p.Y.Tick.Marker = plainTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// plainTicks are gonum's default ticks without trailing zeros: 250, not 250.00.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ts {
		if strings.Contains(t.Label, ".") && !strings.ContainsAny(t.Label, "eE") {
			ts[i].Label = strings.TrimSuffix(strings.TrimRight(t.Label, "0"), ".")
		}
	}
	return ts
}

// addLine draws the finite points of pts in colour c and reports whether
// there was any.
func addLine(p *plot.Plot, pts plotter.XYs, c color.Color, dashes []vg.Length) (bool, error) {
	var xys plotter.XYs
	for _, pt := range pts {
		if finite(pt.X) && finite(pt.Y) {
			xys = append(xys, pt)
		}
	}
	if len(xys) == 0 {
		return false, nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return false, err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	l.Dashes = dashes
	p.Add(l)
	return true, nil
}

// addLegend adds an entry drawn as a solid line in colour c.
func addLegend(p *plot.Plot, name string, c color.Color) {
	l := &plotter.Line{LineStyle: plotter.DefaultLineStyle}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Legend.Add(name, l)
}

// raiseTop leaves room above the data for the legend.
func raiseTop(p *plot.Plot) {
	lo, hi := min(p.Y.Min, 0), p.Y.Max
	if finite(lo) && finite(hi) && hi > lo {
		p.Y.Max = hi + headroom*(hi-lo)
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// series turns each second of a timeline into a point (t, y).
func series(tl []crowdsim.Second, y func(crowdsim.Second) float64) plotter.XYs {
	xys := make(plotter.XYs, len(tl))
	for i, s := range tl {
		xys[i] = plotter.XY{X: s.T, Y: y(s)}
	}
	return xys
}

const timeAxis = "time since the sale's start (s)"

// timelinePlots: requests per second; 5xx and client errors per second;
// queue length and now serving.
func timelinePlots(rs []run) ([]*plot.Plot, error) {
	reqs := newPlot("Requests per second", timeAxis, "requests/s")
	bad := newPlot("5xx (solid) and timeouts + transport errors (dashed) per second", timeAxis, "requests/s")
	queue := newPlot("Queue length (solid) and now serving (dashed)", timeAxis, "queue positions")
	perSecond := func(f func(crowdsim.Second) int64) func(crowdsim.Second) float64 {
		return func(s crowdsim.Second) float64 { return float64(f(s)) }
	}
	panels := []struct {
		p      *plot.Plot
		solid  func(crowdsim.Second) float64
		dashed func(crowdsim.Second) float64
		skip   func([]crowdsim.Second) bool
	}{
		{reqs, perSecond(func(s crowdsim.Second) int64 { return int64(s.Requests) }), nil, nil},
		{bad, perSecond(func(s crowdsim.Second) int64 { return int64(s.Status5xx) }),
			perSecond(func(s crowdsim.Second) int64 { return int64(s.Errors) }), nil},
		{queue, perSecond(func(s crowdsim.Second) int64 { return s.QueueLength }),
			perSecond(func(s crowdsim.Second) int64 { return s.NowServing }), noQueue},
	}
	var errs []error
	for _, pn := range panels {
		for _, x := range rs {
			tl, c := x.r.Timeline, runColors[x.label]
			if pn.skip != nil && pn.skip(tl) {
				continue
			}
			drawn, err := addLine(pn.p, series(tl, pn.solid), c, nil)
			errs = append(errs, err)
			if pn.dashed != nil {
				_, err = addLine(pn.p, series(tl, pn.dashed), c, dashed)
				errs = append(errs, err)
			}
			if drawn {
				addLegend(pn.p, x.label, c)
			}
		}
		raiseTop(pn.p)
	}
	return []*plot.Plot{reqs, bad, queue}, errors.Join(errs...)
}

// noQueue: the run has no queue to draw (the naive baseline).
func noQueue(tl []crowdsim.Second) bool {
	for _, s := range tl {
		if s.QueueLength != 0 || s.NowServing != 0 {
			return false
		}
	}
	return true
}

// latencyPlots: one panel per run, p50 and p99 bars per endpoint (the runs'
// endpoints differ, and their scales by orders of magnitude).
func latencyPlots(rs []run) ([]*plot.Plot, error) {
	var plots []*plot.Plot
	for _, x := range rs {
		eps := x.r.Endpoints
		p := newPlot(x.label+": latency per endpoint", "", "latency (ms)")
		plots = append(plots, p)
		if len(eps) == 0 {
			p.Title.Text = x.label + ": no requests"
			continue
		}
		names := make([]string, len(eps))
		p50, p99 := make(plotter.Values, len(eps)), make(plotter.Values, len(eps))
		for i, e := range eps {
			names[i], p50[i], p99[i] = e.Name, orZero(e.P50Ms), orZero(e.P99Ms)
		}
		c := runColors[x.label]
		for i, s := range []struct {
			name string
			vals plotter.Values
			fill color.Color
		}{{"p50", p50, lighter(c)}, {"p99", p99, c}} {
			bars, err := plotter.NewBarChart(s.vals, vg.Points(barWidth))
			if err != nil {
				return nil, err
			}
			bars.Color = s.fill
			bars.LineStyle.Width = 0
			bars.Offset = vg.Points(barWidth * (float64(i) - 0.5))
			p.Add(bars)
			p.Legend.Add(s.name, bars)
		}
		nominal(p, names...)
	}
	return plots, nil
}

// nominal labels the x axis with names at 0, 1, ... and leaves half a slot
// either side.
func nominal(p *plot.Plot, names ...string) {
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	raiseTop(p)
}

func orZero(v float64) float64 {
	if !finite(v) {
		return 0
	}
	return v
}

// lighter mixes c halfway to white.
func lighter(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8 + 255) / 2) }
	return color.RGBA{R: mix(r), G: mix(g), B: mix(b), A: 0xff}
}

// minFateS is where the log time axis of fates.png starts; faster fates
// are drawn there.
const minFateS = 0.001

// fatesPlots: the CDF of time from arrival to each fate, per run, on a log
// time axis.
func fatesPlots(rs []run) ([]*plot.Plot, error) {
	p := newPlot("Time from arrival to fate, CDF: reserved or bought (solid), sold out (dashed)",
		"seconds from the first click (log scale)", "share of those shoppers")
	lo, hi := math.Inf(1), math.Inf(-1)
	var errs []error
	for _, x := range rs {
		f := x.r.Fates
		var drawn bool
		for _, s := range []struct {
			d      crowdsim.Dist
			dashes []vg.Length
		}{{f.Reserved, nil}, {f.SoldOut, dashed}} {
			var xys plotter.XYs
			for _, pt := range s.d.CDF {
				if !finite(pt[0]) || !finite(pt[1]) {
					continue
				}
				t := max(pt[0], minFateS)
				lo, hi = min(lo, t), max(hi, t)
				xys = append(xys, plotter.XY{X: t, Y: pt[1]})
			}
			ok, err := addLine(p, xys, runColors[x.label], s.dashes)
			drawn = drawn || ok
			errs = append(errs, err)
		}
		if drawn {
			addLegend(p, fmt.Sprintf("%s (%s reserved, %s sold out)", x.label, count(f.Reserved.Count), count(f.SoldOut.Count)), runColors[x.label])
		}
	}
	if lo <= hi { // there is a point: the log scale has a positive range
		if hi == lo {
			hi = lo * 10
		}
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Min, p.X.Max = lo, hi
	}
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25}, {Value: 0.5, Label: "0.5"}, {Value: 0.75}, {Value: 1, Label: "1"}}
	raiseTop(p)
	return []*plot.Plot{p}, errors.Join(errs...)
}

// stockPlots: available units over time; stock, sold, held and oversold
// per run.
func stockPlots(rs []run) ([]*plot.Plot, error) {
	avail := newPlot("Available units", timeAxis, "units")
	var errs []error
	for _, x := range rs {
		pts := series(x.r.Timeline, func(s crowdsim.Second) float64 { return float64(s.Available) })
		drawn, err := addLine(avail, pts, runColors[x.label], nil)
		errs = append(errs, err)
		if drawn {
			addLegend(avail, x.label, runColors[x.label])
		}
	}
	raiseTop(avail)
	units := newPlot("Stock and what became of it", "", "units")
	for i, x := range rs {
		r := x.r
		vals := plotter.Values{float64(r.Stock), float64(r.Sold), float64(r.Held), float64(r.Oversold)}
		bars, err := plotter.NewBarChart(vals, vg.Points(barWidth))
		if err != nil {
			return nil, err
		}
		bars.Color = runColors[x.label]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Points(barWidth * (float64(i) - float64(len(rs)-1)/2))
		units.Add(bars)
		units.Legend.Add(x.label, bars)
	}
	nominal(units, "stock", "sold", "held at the end", "oversold")
	return []*plot.Plot{avail, units}, errors.Join(errs...)
}

// groupColors keep each process group's colour the same across the CPU
// panels; a group not named here is drawn grey.
var groupColors = map[string]color.Color{
	"edge":                  color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"redis":                 color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"origin":                color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"postgres":              color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"sandbox gateway":       color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"naive server":          color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"crowd (the simulator)": color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// cpuPlots: one panel per run, the cores each process group used per
// second: which process held the stack's core at the moment an answer was
// slow.
func cpuPlots(rs []run) ([]*plot.Plot, error) {
	var plots []*plot.Plot
	var errs []error
	for _, x := range rs {
		p := newPlot(x.label+": cores used per second, by process", timeAxis, "cores")
		plots = append(plots, p)
		groups := map[string]bool{}
		for _, s := range x.r.Timeline {
			for g := range s.CPU {
				groups[g] = true
			}
		}
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			c, ok := groupColors[g]
			if !ok {
				c = color.Gray{Y: 0xa0}
			}
			var pts plotter.XYs
			for _, s := range x.r.Timeline {
				if s.CPU != nil {
					pts = append(pts, plotter.XY{X: s.T, Y: s.CPU[g]})
				}
			}
			drawn, err := addLine(p, pts, c, nil)
			errs = append(errs, err)
			if drawn {
				addLegend(p, g, c)
			}
		}
		if len(groups) == 0 {
			p.Title.Text = x.label + ": no CPU readings"
		}
		raiseTop(p)
	}
	return plots, errors.Join(errs...)
}
