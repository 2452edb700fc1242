package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// compareFlags are the flags make bench-autotune gives before
// AUTOTUNE_FLAGS (the Makefile's bench-autotune target); keep the two the
// same.
const compareFlags = "-autotune-compare -autotune-min 100 -autotune-max 8000"

// How the comparison sizes what it is not given, from the capacity
// measured (the stack's holds granted per second, admission unthrottled).
const (
	compareTooHigh = 3    // the rate too high, times the capacity
	compareTooLow  = 0.25 // the rate too low, times the capacity
	// compareStockS is the units on sale in seconds of the capacity: a
	// rate near the capacity sells out in about that long, a few periods
	// of the controller after it has found it; a quarter of it takes four
	// times as long.
	compareStockS = 20
	// compareShoppersPerUnit: enough shoppers that the line outlasts the
	// stock at any rate.
	compareShoppersPerUnit = 1.25
	// compareMaxShoppers bounds the crowd the simulator's one core plays.
	compareMaxShoppers = 100_000
)

// autotuneScenario is a comparison run's crowd but for its size and the
// autotune run's starting rate, which come from the capacity (0 here; a
// scenario flag given sets them): everyone in line within five seconds of
// the open — half in a pre-queue over the ten seconds before it, half in
// a five-second burst, no tail, no bots — so that from the open the line
// is longer than the stock and the admission rate alone sets how fast it
// sells. Shoppers press Buy as in the standard run; nobody pays (a
// payment's orders, gateway and webhooks would add load that depends on
// the run, not the rate) and holds outlast the run, so every unit goes
// once; nobody waits on after a sold-out. The crowd stops 100 s after the
// open: a rate a quarter of the capacity sells out in about 80.
func autotuneScenario() crowdsim.Scenario {
	sc := crowdsim.DefaultScenario()
	sc.Shoppers, sc.Stock, sc.RatePerS = 0, 0, 0
	sc.PreQueueS, sc.PreQueueShare, sc.BurstS, sc.BurstShare, sc.TailS = 10, 0.5, 5, 0.5, 0
	sc.PayProbability, sc.StayShare, sc.HoldTTLS = 0, 0, 200
	sc.Hammering.Accounts, sc.Smart.Accounts = 0, 0
	sc.MaxDurationS, sc.MaxRequests = 100, 3_000_000
	return sc
}

// comparePlan is what the comparison plays, once the capacity is known.
type comparePlan struct {
	Scenario crowdsim.Scenario // RatePerS: the autotune run's starting rate
	TooHigh  float64
	TooLow   float64
	Notes    []string
}

// planComparison sizes what o leaves to the capacity (shoppers/s the stack
// grants holds at, unthrottled): the fixed rates, the stock and the crowd,
// and the autotune run's starting rate (the rate too low, within the
// bounds).
func planComparison(o options, capacity float64) (comparePlan, error) {
	p := comparePlan{Scenario: o.Scenario, TooHigh: o.TooHighPerS, TooLow: o.TooLowPerS}
	sc := &p.Scenario
	derived := p.TooHigh == 0 || p.TooLow == 0 || sc.Stock == 0 || sc.Shoppers == 0
	if derived && capacity <= 0 {
		return comparePlan{}, errors.New("the capacity was not measured (the ceiling run did not grant holds): give -capacity, or the rates, -stock and -shoppers")
	}
	round := func(v float64) float64 { return math.Round(v*10) / 10 }
	if p.TooHigh == 0 {
		p.TooHigh = round(compareTooHigh * capacity)
	}
	if p.TooLow == 0 {
		p.TooLow = round(compareTooLow * capacity)
	}
	if sc.Stock == 0 {
		sc.Stock = max(1, int(math.Round(compareStockS*capacity)))
		if sc.Shoppers == 0 {
			sc.Stock = min(sc.Stock, int(compareMaxShoppers/compareShoppersPerUnit))
		}
		p.Notes = append(p.Notes, fmt.Sprintf("The stock is %d seconds of the capacity (at most %d units), the crowd %g shoppers a unit: "+
			"a rate near the capacity sells it out in about that long, a quarter of it in about %d seconds.",
			compareStockS, int(compareMaxShoppers/compareShoppersPerUnit), compareShoppersPerUnit, int(compareStockS/compareTooLow)))
	}
	if sc.Shoppers == 0 {
		sc.Shoppers = min(compareMaxShoppers, int(math.Round(compareShoppersPerUnit*float64(sc.Stock))))
	}
	if sc.RatePerS == 0 {
		sc.RatePerS = min(max(p.TooLow, o.Autotune.MinRatePerS), o.Autotune.MaxRatePerS)
		p.Notes = append(p.Notes, "Autotune starts at the rate too low (within its bounds): where the fixed run stays, it should climb from.")
	}
	switch {
	case p.TooHigh <= 0 || p.TooLow <= 0 || p.TooHigh > 1e6:
		return comparePlan{}, fmt.Errorf("fixed rates %g/s and %g/s: want each above 0 and at most 1,000,000", p.TooHigh, p.TooLow)
	case p.TooLow >= p.TooHigh:
		return comparePlan{}, fmt.Errorf("the rate too low (%g/s) is not below the rate too high (%g/s)", p.TooLow, p.TooHigh)
	}
	if err := o.Autotune.Validate(sc.RatePerS); err != nil {
		return comparePlan{}, err
	}
	return p, nil
}

// autotuneCommand is how the comparison was started, for the report: make
// bench-autotune passes compareFlags, then AUTOTUNE_FLAGS.
func autotuneCommand(args []string) string {
	joined := strings.Join(args, " ")
	rest, ok := strings.CutPrefix(joined, compareFlags)
	if !ok || (rest != "" && rest[0] != ' ') {
		return "bin/crowd " + joined
	}
	if rest = strings.TrimSpace(rest); rest != "" {
		return "make bench-autotune AUTOTUNE_FLAGS='" + rest + "'"
	}
	return "make bench-autotune"
}

// comparisonOrder is what the comparison plays, in order: round after
// round, each the three kinds interleaved (crowdreport.Kinds), so that a
// stack that slows over the comparison slows them alike.
func comparisonOrder(rounds int) []crowdreport.Compared {
	var out []crowdreport.Compared
	for round := 1; round <= rounds; round++ {
		for _, kind := range crowdreport.Kinds {
			out = append(out, crowdreport.Compared{Kind: kind, Round: round})
		}
	}
	return out
}

// comparisonConfig is the config of one comparison run: the plan's crowd,
// a fresh sale, the controller on only for autotune.
func comparisonConfig(o options, p comparePlan, x crowdreport.Compared, stamp int64) crowdsim.Config {
	c := o.Config
	c.Scenario = p.Scenario
	c.Autotune = crowdsim.Autotune{}
	switch x.Kind {
	case crowdreport.KindAutotune:
		c.Autotune = o.Autotune
	case crowdreport.KindTooHigh:
		c.RatePerS = p.TooHigh
	case crowdreport.KindTooLow:
		c.RatePerS = p.TooLow
	}
	c.SaleID = fmt.Sprintf("autotune-%d-%s-%d", stamp, strings.ReplaceAll(x.Kind, " ", "-"), x.Round)
	return c
}

// runComparison measures the capacity (unless given), then plays the
// comparison's runs and writes autotune.md, autotune.json and
// autotune.png into o.Out, with the summary on stdout. A run that fails
// ends it; what was measured until then is still written.
func runComparison(ctx context.Context, o options, command string, stdout io.Writer,
	play func(context.Context, crowdsim.Config) (*crowdsim.Result, error)) error {
	c := crowdreport.Comparison{Command: command, Started: time.Now(), Autotune: o.Autotune, AutotunePeriod: o.AutotunePeriod,
		CapacityPerS: o.CapacityPerS}
	runErr := playComparison(ctx, o, &c, play)
	c.Wall = time.Since(c.Started).Seconds()
	if c.Ceiling == nil && len(c.Runs) == 0 {
		return runErr
	}
	if err := writeComparison(o.Out, c); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprint(stdout, crowdreport.ComparisonSummary(c))
	benchreport.PrintPath(stdout, filepath.Join(o.Out, "autotune.md"))
	return runErr
}

// playComparison measures the capacity into c unless o gives it, sizes
// the plan, and plays its runs in order into c.
func playComparison(ctx context.Context, o options, c *crowdreport.Comparison,
	play func(context.Context, crowdsim.Config) (*crowdsim.Result, error)) error {
	stamp := time.Now().Unix()
	if c.CapacityPerS <= 0 {
		cfg := o.Config
		cfg.SaleID, cfg.Defences.Mode, cfg.Autotune = fmt.Sprintf("autotune-%d-ceiling", stamp), "", crowdsim.Autotune{}
		cfg.Scenario = ceilingScenario(o.Scenario, o.CeilingShoppers)
		o.Progress("the capacity: %d shoppers for as many units, admission unthrottled", o.CeilingShoppers)
		ceil, err := play(ctx, cfg)
		if err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		ceil.Mode, ceil.Command = "ceiling", c.Command
		c.Ceiling, c.CapacityPerS = ceil, ceil.ReservesPerS
		o.Progress("  capacity %.0f holds granted/s (5xx %d, timeouts %d)", c.CapacityPerS, ceil.Status5xx, ceil.Timeouts)
	}
	p, err := planComparison(o, c.CapacityPerS)
	if err != nil {
		return err
	}
	c.Scenario, c.TooHighPerS, c.TooLowPerS = p.Scenario, p.TooHigh, p.TooLow
	c.Notes = append(c.Notes, p.Notes...)
	for i, x := range comparisonOrder(o.CompareRounds) {
		cfg := comparisonConfig(o, p, x, stamp)
		tuned := ""
		if cfg.Autotune.On() {
			tuned = fmt.Sprintf(", autotune %g–%g/s", cfg.Autotune.MinRatePerS, cfg.Autotune.MaxRatePerS)
		}
		o.Progress("autotune comparison %d of %d: %s, round %d (rate %g/s%s)", i+1, len(crowdreport.Kinds)*o.CompareRounds, x.Kind, x.Round, cfg.RatePerS, tuned)
		res, err := play(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s, round %d: %w", x.Kind, x.Round, err)
		}
		res.Command = c.Command
		x.Result = res
		c.Runs = append(c.Runs, x)
		f := crowdreport.FiguresOf(x, o.CompareRounds, c.CapacityPerS)
		o.Progress("  %s: sold out at %.1f s (%d units taken), please_wait %d, other 5xx %d, reserve p99 %.0f ms (origin %.0f ms), answer p99 %.2f s",
			f.Label, f.SoldOutS, f.UnitsTaken, f.PleaseWait, f.Other5xx, f.ReserveP99Ms, f.OriginReserveP99Ms, f.AnswerP99S)
	}
	return nil
}

// writeComparison writes autotune.json, autotune.md and autotune.png into
// dir.
func writeComparison(dir string, c crowdreport.Comparison) error {
	chart, err := crowdreport.WriteComparisonChart(dir, c)
	if err != nil {
		return err
	}
	return benchreport.WriteFiles(dir, map[string]func(io.Writer) error{
		"autotune.json": func(w io.Writer) error { return crowdreport.WriteComparisonJSON(w, c) },
		"autotune.md":   func(w io.Writer) error { return crowdreport.WriteComparisonMarkdown(w, c, chart) },
	})
}
