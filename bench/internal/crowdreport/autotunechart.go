package crowdreport

import (
	"errors"
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// ComparisonChart is the chart WriteComparisonChart draws.
const ComparisonChart = "autotune.png"

// kindColors keep each kind of run's colour the same across the panels
// (and rounds).
var kindColors = map[string]color.Color{
	KindAutotune: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	KindTooHigh:  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	KindTooLow:   color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// minP99Ms is where the reserve p99 panel's log axis starts; quicker
// seconds are drawn there.
const minP99Ms = 1

// WriteComparisonChart draws autotune.png into dir, one panel above the
// other, per run: the admission rate set (solid) and admitted per second
// (dashed) with the capacity (grey); the reserve p99 per second with the
// controller's 250 ms target (grey); please_wait and 5xx per second; the
// units left. It returns the file's name.
func WriteComparisonChart(dir string, c Comparison) (string, error) {
	rates := newPlot("Admission rate: set (solid), admitted per second over the last 5 s (dashed); grey: the capacity measured unthrottled",
		timeAxis, "shoppers/s")
	p99 := newPlot("Reserve p99 per second, client (grey: the controller's 250 ms target; log scale)", timeAxis, "ms (log scale)")
	bad := newPlot("5xx per second (please_wait included)", timeAxis, "answers/s")
	units := newPlot("Units left", timeAxis, "units")
	var errs []error
	lo, hi := 0.0, 0.0 // the time axis the runs span
	rounds := c.Rounds()
	for _, x := range c.Runs {
		r := x.Result
		if r == nil {
			continue
		}
		label, col := x.Label(rounds), kindColors[x.Kind]
		var set, admitted plotter.XYs
		if r.Admission != nil {
			set, admitted = rateXYs(r.Admission.Samples)
		}
		var lat, fails, left plotter.XYs
		for _, s := range r.Timeline {
			if e, ok := s.Endpoints["reserve"]; ok && e.P99Ms > 0 {
				lat = append(lat, plotter.XY{X: s.T, Y: max(e.P99Ms, minP99Ms)})
			}
			fails = append(fails, plotter.XY{X: s.T, Y: float64(s.Status5xx)})
			if s.Available != 0 || s.NowServing != 0 || s.QueueLength != 0 { // a second with a snapshot sample
				left = append(left, plotter.XY{X: s.T, Y: float64(s.Available)})
			}
		}
		for _, pts := range []plotter.XYs{set, lat, left} {
			if len(pts) > 0 {
				lo, hi = min(lo, pts[0].X), max(hi, pts[len(pts)-1].X)
			}
		}
		for _, l := range []struct {
			p   *plot.Plot
			pts plotter.XYs
			dsh bool
		}{{rates, set, false}, {rates, admitted, true}, {p99, lat, false}, {bad, fails, false}, {units, left, false}} {
			var d []vg.Length
			if l.dsh {
				d = dashed
			}
			drawn, err := addLine(l.p, l.pts, col, d)
			errs = append(errs, err)
			if drawn && !l.dsh {
				addLegend(l.p, label, col)
			}
		}
	}
	grey := color.Gray{Y: 0x60}
	if hi > lo {
		if c.CapacityPerS > 0 {
			_, err := addLine(rates, plotter.XYs{{X: lo, Y: c.CapacityPerS}, {X: hi, Y: c.CapacityPerS}}, grey, dashed)
			errs = append(errs, err)
		}
		_, err := addLine(p99, plotter.XYs{{X: lo, Y: ReserveP99TargetMs}, {X: hi, Y: ReserveP99TargetMs}}, grey, dashed)
		errs = append(errs, err)
		for _, p := range []*plot.Plot{rates, p99, bad, units} { // one time axis for all
			p.X.Min, p.X.Max = lo, hi
		}
	}
	p99.Y.Scale = plot.LogScale{}
	p99.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p99.Y.Min = minP99Ms
	p99.Y.Max = max(p99.Y.Max, 10*ReserveP99TargetMs) * 10 // room for the legend on a log axis
	for _, p := range []*plot.Plot{rates, bad, units} {
		raiseTop(p)
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("report: chart %s: %w", ComparisonChart, err)
	}
	if err := savePNG(filepath.Join(dir, ComparisonChart), panelHeight, []*plot.Plot{rates, p99, bad, units}); err != nil {
		return "", fmt.Errorf("report: chart %s: %w", ComparisonChart, err)
	}
	return ComparisonChart, nil
}

// admittedWindowS is how far back the chart's admitted rate looks: the
// cursor moves in ticks and holds some, so a second's rise is noise.
const admittedWindowS = 5

// rateXYs are the samples as the set rate, drawn as steps (each held until
// the next sample), and the places admitted per second over the
// admittedWindowS before each sample (from the first sample on).
func rateXYs(samples []crowdsim.RateSample) (set, admitted plotter.XYs) {
	for i, s := range samples {
		if i > 0 {
			set = append(set, plotter.XY{X: s.T, Y: samples[i-1].RatePerS})
			if from := max(s.T-admittedWindowS, samples[0].T); s.T > from {
				admitted = append(admitted, plotter.XY{X: s.T, Y: (float64(s.AdmittedTotal) - admittedAt(samples, from)) / (s.T - from)})
			}
		}
		set = append(set, plotter.XY{X: s.T, Y: s.RatePerS})
	}
	return set, admitted
}
