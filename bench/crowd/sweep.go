package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// defaultSweep is the rates make bench-capacity sweeps (deploy/local/capacity.sh).
const defaultSweep = "250,500,1000,2000,4000,8000"

// capacityScenario is a sweep step's crowd but for its size: everyone
// arriving evenly over a 3 s burst (no pre-queue, no tail, no bots) for the
// standard sale's 5,000 units admitted at 2,000/s (with 500 the naive
// design's row is hot for well under a second, and the sweep measures
// mostly its sold-out answers); nobody pays and nobody stays after a sold-out,
// and the crowd stops 12 s after the open, so that a step is over in well
// under 20 s. Holds last a minute: no unit comes back within a step.
// Admitted shoppers reserve at once (no reaction), as before reactions were
// modelled, so that steps compare with earlier sweeps.
func capacityScenario() crowdsim.Scenario {
	sc := crowdsim.DefaultScenario()
	sc.Stock, sc.RatePerS = 5_000, 2_000
	sc.PreQueueS, sc.PreQueueShare, sc.BurstS, sc.BurstShare, sc.TailS, sc.UniformBurst = 0, 0, 3, 1, 0, true
	sc.PayProbability, sc.StayShare, sc.HoldTTLS, sc.ReactionS = 0, 0, 60, 0
	sc.Hammering.Accounts, sc.Smart.Accounts = 0, 0
	sc.MaxDurationS, sc.MaxRequests = 12, 1_000_000
	return sc
}

// sweepNotes say why the sweep's scenario is what it is.
func sweepNotes(sc crowdsim.Scenario, retries int, sweepMax float64) []string {
	notes := []string{
		"Each step is a fresh sale on the flashgate stack and the naive baseline's sale reset (both tables truncated, the same stock), " +
			"flashgate first; both designs' servers, Redis and Postgres run on the stack's CPUs, the simulator on its own.",
		fmt.Sprintf("The same %d units at every rate: at most that many shoppers hold a unit, everyone else is told sold out — by the line, "+
			"or (flashgate) by the snapshot through the simulated CDN once the stock has gone; the naive baseline answers every click "+
			"with a transaction on the item's row.", sc.Stock),
		"No pre-queue and no tail: every shopper arrives within the burst, so its rate is the load.",
		fmt.Sprintf("A run in which the simulator lagged (start p99 above %s s) ran again, %d more times at most (the attempts column); "+
			"the last attempt is the one shown and judged.", strconv.FormatFloat(crowdreport.MaxStartLagS, 'f', -1, 64), retries),
		"The naive baseline is not played above the first rate it misses at (\"no run\"): its capacity is known there, and a step it " +
			"misses runs to its client timeouts.",
	}
	if sweepMax > 0 {
		notes = append(notes, fmt.Sprintf("While flashgate kept the promise at the top rate, the sweep doubled it, up to %s/s: "+
			"it stops where flashgate first misses (the promise broken, or the simulator unable to play the crowd).",
			strconv.FormatFloat(sweepMax, 'f', -1, 64)))
	}
	if sc.PayProbability == 0 {
		notes = append(notes, "Nobody pays (pay probability 0): the promise is about the answer, not the payment. The naive baseline "+
			"has no payment step, and paying would add orders, the sandbox gateway and its webhooks to flashgate's side of the same "+
			"CPUs, and up to 30 s of order polling to every step.")
	}
	if sc.StayShare == 0 {
		notes = append(notes, fmt.Sprintf("Nobody waits on after a sold-out, and the crowd is stopped %s s after the open: each step is "+
			"bounded. A shopper who had no answer by then counts as having waited until then.", strconv.FormatFloat(sc.MaxDurationS, 'f', -1, 64)))
	}
	return notes
}

// parseRates reads "500,1000,2000" into rates, lowest first.
func parseRates(s string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 || math.IsInf(r, 0) {
			return nil, fmt.Errorf("%q is not a positive rate", f)
		}
		if slices.Contains(rates, r) {
			return nil, fmt.Errorf("rate %g given twice", r)
		}
		rates = append(rates, r)
	}
	slices.Sort(rates)
	return rates, nil
}

// sweepCommand is how the sweep was started, for the report: make
// bench-capacity passes -sweep with the default rates, then CAPACITY_FLAGS.
func sweepCommand(args []string) string {
	if len(args) < 2 || args[0] != "-sweep" || args[1] != defaultSweep {
		return "bin/crowd " + strings.Join(args, " ")
	}
	if rest := args[2:]; len(rest) > 0 {
		return "make bench-capacity CAPACITY_FLAGS='" + strings.Join(rest, " ") + "'"
	}
	return "make bench-capacity"
}

// runSweep plays each rate's step — flashgate, then the naive baseline —
// and writes capacity.md, capacity.json and capacity.png into o.Out, with
// the one-line verdict on stdout. A run that fails ends the sweep; what
// was measured until then is still written.
func runSweep(ctx context.Context, o options, command string, stdout io.Writer) error {
	sw := crowdreport.Sweep{Command: command, Started: time.Now(), Scenario: o.Scenario, Notes: sweepNotes(o.Scenario, o.SweepRetries, o.SweepMax)}
	runErr := sweepSteps(ctx, o, &sw)
	sw.Wall = time.Since(sw.Started).Seconds()
	if len(sw.Steps) == 0 {
		return runErr
	}
	if err := writeSweep(o.Out, sw); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprint(stdout, crowdreport.SweepSummary(sw))
	benchreport.PrintPath(stdout, filepath.Join(o.Out, "capacity.md"))
	return runErr
}

// sweepSteps plays the rates asked, then, while flashgate held at the top
// one, doubles it up to o.SweepMax: a capacity never reached is not a
// measurement. The sweep stops where flashgate first misses, the promise
// broken or the simulator unable to play the crowd (the report says
// which). The naive baseline is not played above its first miss: its
// capacity is known, and a step it misses runs to its client timeouts.
func sweepSteps(ctx context.Context, o options, sw *crowdreport.Sweep) error {
	rates := slices.Clone(o.Sweep)
	naiveMissed := false
	for i := 0; i < len(rates); i++ {
		r := rates[i]
		c := o.Config
		c.Shoppers = max(1, int(math.Round(r*o.BurstS)))
		o.Progress("capacity step %d: %s shoppers/s, %d shoppers in %g s", i+1, strconv.FormatFloat(r, 'f', -1, 64), c.Shoppers, c.BurstS)
		step := crowdreport.Step{RatePerS: r, Discarded: map[string][]float64{}}
		attempts := 0
		fg, err := o.attempt(&step, "flashgate", func() (*crowdsim.Result, error) {
			attempts++
			c.SaleID = fmt.Sprintf("capacity-%d-%d-%d", time.Now().Unix(), i, attempts) // a fresh sale each time
			return crowdsim.Run(ctx, c)
		})
		if err != nil {
			return fmt.Errorf("step %g/s: flashgate: %w", r, err)
		}
		fg.Command = sw.Command
		step.Flashgate = fg
		if o.Naive && !naiveMissed {
			nv, err := o.attempt(&step, "naive", func() (*crowdsim.Result, error) { return crowdsim.RunNaive(ctx, c, o.PostgresURL) })
			if err != nil {
				sw.Steps = append(sw.Steps, step)
				return fmt.Errorf("step %g/s: naive: %w", r, err)
			}
			nv.Command = sw.Command
			step.Naive = nv
			naiveMissed = !crowdreport.Judge(nv).Held
		}
		sw.Steps = append(sw.Steps, step)
		for _, d := range crowdreport.Designs {
			if res := step.Result(d); res != nil {
				v := crowdreport.Judge(res)
				o.Progress("  %s at %g/s: p99 answer %.2f s, 5xx %d, oversold %d, simulator lag p99 %.3f s: %s",
					d, r, res.Fates.AnswerP99, res.Status5xx, res.Oversold, res.StartLag.P99, or(v.Why, "kept"))
			}
		}
		if i == len(rates)-1 && crowdreport.Judge(fg).Held && 2*r <= o.SweepMax {
			rates = append(rates, 2*r)
		}
	}
	return refine(ctx, o, sw)
}

// refine plays each design halfway between its highest rate held and its
// lowest missed, o.SweepRefine times, while both are known (a miss the
// simulator could not be trusted on is not refined). A refinement is a
// step of its own with that design's run alone.
func refine(ctx context.Context, o options, sw *crowdreport.Sweep) error {
	designs := []string{"flashgate"}
	if o.Naive {
		designs = append(designs, "naive")
	}
	for _, d := range designs {
		for range o.SweepRefine {
			c := crowdreport.CapacityOf(*sw, d)
			if c.RatePerS == 0 || c.MissedAt == 0 || c.AtLeast {
				break
			}
			r := roundRate((c.RatePerS + c.MissedAt) / 2)
			if r <= c.RatePerS || r >= c.MissedAt {
				break
			}
			cfg := o.Config
			cfg.Shoppers = max(1, int(math.Round(r*o.BurstS)))
			o.Progress("capacity refinement: %s at %s shoppers/s, between %g/s held and %g/s missed", d, strconv.FormatFloat(r, 'f', -1, 64), c.RatePerS, c.MissedAt)
			step := crowdreport.Step{RatePerS: r, Discarded: map[string][]float64{}}
			attempts := 0
			res, err := o.attempt(&step, d, func() (*crowdsim.Result, error) {
				if d == "naive" {
					return crowdsim.RunNaive(ctx, cfg, o.PostgresURL)
				}
				attempts++
				cfg.SaleID = fmt.Sprintf("capacity-%d-r%g-%d", time.Now().Unix(), r, attempts)
				return crowdsim.Run(ctx, cfg)
			})
			if err != nil {
				return fmt.Errorf("refinement %g/s: %s: %w", r, d, err)
			}
			res.Command = sw.Command
			if d == "naive" {
				step.Naive = res
			} else {
				step.Flashgate = res
			}
			sw.Steps = append(sw.Steps, step)
			v := crowdreport.Judge(res)
			o.Progress("  %s at %g/s: p99 answer %.2f s, 5xx %d, oversold %d, simulator lag p99 %.3f s: %s",
				d, r, res.Fates.AnswerP99, res.Status5xx, res.Oversold, res.StartLag.P99, or(v.Why, "kept"))
		}
	}
	return nil
}

// roundRate rounds a rate to a figure a report reads at a glance: to 250/s
// from 1,000/s, to 25/s below.
func roundRate(r float64) float64 {
	step := 25.0
	if r >= 1000 {
		step = 250
	}
	return math.Round(r/step) * step
}

// attempt plays one design's run of a step, and again while the simulator
// lagged (its start p99 above crowdreport.MaxStartLagS: it did not play the
// crowd asked for), o.SweepRetries more times at most; the lags of the
// attempts it discards go into step.Discarded.
func (o options) attempt(step *crowdreport.Step, design string, play func() (*crowdsim.Result, error)) (*crowdsim.Result, error) {
	for try := 0; ; try++ {
		res, err := play()
		if err != nil || res.StartLag.P99 <= crowdreport.MaxStartLagS || try >= o.SweepRetries {
			return res, err
		}
		step.Discarded[design] = append(step.Discarded[design], res.StartLag.P99)
		o.Progress("  %s at %g/s: the simulator lagged (start p99 %.2f s); once more", design, step.RatePerS, res.StartLag.P99)
	}
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// writeSweep writes capacity.json, capacity.md and capacity.png into dir.
func writeSweep(dir string, sw crowdreport.Sweep) error {
	chart, err := crowdreport.WriteSweepChart(dir, sw)
	if err != nil {
		return err
	}
	return benchreport.WriteFiles(dir, map[string]func(io.Writer) error{
		"capacity.json": func(w io.Writer) error { return crowdreport.WriteSweepJSON(w, sw) },
		"capacity.md":   func(w io.Writer) error { return crowdreport.WriteSweepMarkdown(w, sw, chart) },
	})
}
