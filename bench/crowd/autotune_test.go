package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

var compareEnv = map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_AUTOTUNE_PERIOD": "2s",
	"FLASHGATE_GATEWAY_CONTROL_TOKEN": "ctl_0123456789abcdef"}

func compareGetenv(k string) string { return compareEnv[k] }

// -autotune-compare starts from the comparison's scenario, which scenario
// flags change; it needs the controller's bounds, runs no naive baseline
// and takes no Postgres; -autotune-min/-max alone switch the controller on
// for the standard run, which must start within them.
func TestAutotuneOptions(t *testing.T) {
	o, err := loadOptions(strings.Fields(compareFlags+" -max-duration 60 -too-low-rate 250"), compareGetenv, io.Discard)
	if err != nil {
		t.Fatalf("loadOptions(make bench-autotune's flags) = %v", err)
	}
	want := autotuneScenario()
	want.MaxDurationS = 60
	if !o.Compare || o.Scenario != want || o.Autotune != (crowdsim.Autotune{MinRatePerS: 100, MaxRatePerS: 8000}) || o.Naive ||
		o.TooLowPerS != 250 || o.TooHighPerS != 0 || o.CompareRounds != 1 || o.AutotunePeriod != "2s" ||
		!strings.HasPrefix(o.Out, filepath.Join(".data", "autotune")) {
		t.Errorf("options: compare %v, scenario %+v, autotune %+v, naive %v, rates %g/%g, rounds %d, period %q, out %q",
			o.Compare, o.Scenario, o.Autotune, o.Naive, o.TooHighPerS, o.TooLowPerS, o.CompareRounds, o.AutotunePeriod, o.Out)
	}
	o, err = loadOptions([]string{"-autotune-min", "50", "-autotune-max", "4000", "-rate", "500", "-naive=false"}, compareGetenv, io.Discard)
	if err != nil || o.Compare || o.Autotune != (crowdsim.Autotune{MinRatePerS: 50, MaxRatePerS: 4000}) || o.RatePerS != 500 ||
		o.Scenario.Shoppers != crowdsim.DefaultScenario().Shoppers {
		t.Errorf("loadOptions(autotune on the standard run) = %v, %+v", err, o.Autotune)
	}
	for _, args := range [][]string{
		{"-autotune-compare", "-autotune-max", "100", "-autotune-min", "200"},          // min above max
		{"-autotune-min", "50", "-autotune-max", "1000", "-naive=false"},               // starts at 2,000/s, above its ceiling
		{"-autotune-min", "50", "-autotune-max", "4000", "-rate", "0", "-naive=false"}, // unthrottled
		{"-autotune-compare", "-autotune-max", "4000", "-sweep", "500"},                // a run of its own
		{"-autotune-compare", "-autotune-max", "4000", "-defences", "on"},
		{"-autotune-compare", "-autotune-max", "4000", "-compare-rounds", "0"},
		{"-autotune-compare", "-autotune-max", "4000", "-too-high-rate", "-1"},
		{"-autotune-compare", "-autotune-max", "4000", "-shoppers", "-1"},
		{"-autotune-min", "50", "-autotune-max", "4000", "-stock", "0", "-naive=false"}, // 0 sizes only the comparison's
	} {
		if _, err := loadOptions(args, compareGetenv, io.Discard); err == nil {
			t.Errorf("loadOptions(%q) accepted", args)
		}
	}
	if _, err := loadOptions([]string{"-autotune-compare"}, compareGetenv, io.Discard); err == nil || !strings.Contains(err.Error(), "-autotune-min") {
		t.Errorf("loadOptions(-autotune-compare without bounds) = %v, want an error naming -autotune-min", err)
	}
}

func TestAutotuneCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{strings.Fields(compareFlags), "make bench-autotune"},
		{strings.Fields(compareFlags + " -capacity 1500 -compare-rounds 2"), "make bench-autotune AUTOTUNE_FLAGS='-capacity 1500 -compare-rounds 2'"},
		{strings.Fields(compareFlags + "0"), "bin/crowd " + compareFlags + "0"},
		{[]string{"-autotune-compare", "-autotune-max", "900"}, "bin/crowd -autotune-compare -autotune-max 900"},
	} {
		if got := autotuneCommand(tt.args); got != tt.want {
			t.Errorf("autotuneCommand(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestPlanComparison(t *testing.T) {
	base := options{Config: crowdsim.Config{Scenario: autotuneScenario(), Autotune: crowdsim.Autotune{MinRatePerS: 100, MaxRatePerS: 8000}}}
	p, err := planComparison(base, 1500)
	if err != nil {
		t.Fatalf("planComparison(1,500/s) = %v", err)
	}
	want := autotuneScenario()
	want.Stock, want.Shoppers, want.RatePerS = 30_000, 37_500, 375
	if p.TooHigh != 4500 || p.TooLow != 375 || p.Scenario != want || len(p.Notes) != 2 {
		t.Errorf("planComparison(1,500/s) = %g/s, %g/s, %+v, notes %q; want 4,500/s, 375/s, 30,000 units for 37,500 shoppers from 375/s",
			p.TooHigh, p.TooLow, p.Scenario, p.Notes)
	}

	p, err = planComparison(base, 9000) // a quick stack: the crowd is bounded
	if err != nil || p.Scenario.Shoppers != compareMaxShoppers || p.Scenario.Stock != 80_000 || p.Scenario.RatePerS != 2250 {
		t.Errorf("planComparison(9,000/s) = %v, %d shoppers for %d units from %g/s; want 100,000 for 80,000 from 2,250/s",
			err, p.Scenario.Shoppers, p.Scenario.Stock, p.Scenario.RatePerS)
	}
	p, err = planComparison(base, 200) // a slow one: autotune starts at its floor
	if err != nil || p.Scenario.RatePerS != 100 || p.TooLow != 50 {
		t.Errorf("planComparison(200/s) = %v, from %g/s, too low %g/s; want from the floor 100/s, too low 50/s", err, p.Scenario.RatePerS, p.TooLow)
	}

	given := base
	given.TooHighPerS, given.TooLowPerS, given.Scenario.Stock, given.Scenario.Shoppers, given.Scenario.RatePerS = 5000, 300, 900, 1000, 400
	p, err = planComparison(given, 0) // all given: no capacity needed
	if err != nil || p.TooHigh != 5000 || p.TooLow != 300 || p.Scenario.Stock != 900 || p.Scenario.Shoppers != 1000 || p.Scenario.RatePerS != 400 || len(p.Notes) != 0 {
		t.Errorf("planComparison(all given) = %v, %+v; want them as given", err, p)
	}

	for name, tt := range map[string]struct {
		o        func(o options) options
		capacity float64
	}{
		"no capacity to size it by":    {func(o options) options { return o }, 0},
		"too low not below too high":   {func(o options) options { o.TooLowPerS, o.TooHighPerS = 900, 800; return o }, 1000},
		"a start outside the bounds":   {func(o options) options { o.Scenario.RatePerS = 9000; return o }, 1000},
		"a rate too high past the max": {func(o options) options { o.TooHighPerS = 2e6; return o }, 1000},
	} {
		if _, err := planComparison(tt.o(base), tt.capacity); err == nil {
			t.Errorf("planComparison(%s) accepted", name)
		}
	}
}

func TestComparisonOrder(t *testing.T) {
	var got []string
	for _, x := range comparisonOrder(2) {
		got = append(got, x.Kind+" "+string(rune('0'+x.Round)))
	}
	want := []string{"autotune 1", "too high 1", "too low 1", "autotune 2", "too high 2", "too low 2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("comparisonOrder(2) = %q, want %q", got, want)
	}
}

// The comparison measures the capacity first (admission unthrottled, the
// controller off), sizes the runs from it and plays them interleaved, each
// a fresh sale of the same crowd, the controller on only for autotune;
// then writes its report. A failed run ends it, naming the run, with what
// was measured until then written.
func TestRunComparison(t *testing.T) {
	var played []crowdsim.Config
	play := func(_ context.Context, c crowdsim.Config) (*crowdsim.Result, error) {
		played = append(played, c)
		if c.RatePerS == 777 {
			return nil, errors.New("boom")
		}
		res := &crowdsim.Result{Mode: "flashgate", Scenario: c.Scenario, Machine: "test machine"}
		if c.RatePerS == 0 {
			res.ReservesPerS = 1200 // the ceiling run
		}
		return res, nil
	}
	o := options{Config: crowdsim.Config{Scenario: autotuneScenario(), Autotune: crowdsim.Autotune{MinRatePerS: 100, MaxRatePerS: 8000},
		Seed: 7, Progress: t.Logf}, CeilingShoppers: 5000, CompareRounds: 1, AutotunePeriod: "2s", Out: t.TempDir()}
	var out bytes.Buffer
	if err := runComparison(context.Background(), o, "make bench-autotune", &out, play); err != nil {
		t.Fatalf("runComparison = %v", err)
	}
	if len(played) != 4 {
		t.Fatalf("played %d runs, want the ceiling and three", len(played))
	}
	ceil, at, hi, lo := played[0], played[1], played[2], played[3]
	if ceil.RatePerS != 0 || ceil.Shoppers != 5000 || ceil.Autotune.On() {
		t.Errorf("ceiling run: rate %g, %d shoppers, autotune %+v; want unthrottled, 5,000, off", ceil.RatePerS, ceil.Shoppers, ceil.Autotune)
	}
	if at.Autotune != o.Autotune || at.RatePerS != 300 || hi.Autotune.On() || hi.RatePerS != 3600 || lo.Autotune.On() || lo.RatePerS != 300 {
		t.Errorf("runs: autotune %+v from %g/s, too high %g/s (%+v), too low %g/s (%+v); want 100–8,000 from 300, 3,600 and 300, fixed",
			at.Autotune, at.RatePerS, hi.RatePerS, hi.Autotune, lo.RatePerS, lo.Autotune)
	}
	sales := map[string]bool{}
	for _, c := range played[1:] {
		sales[c.SaleID] = true
		if c.Stock != 24_000 || c.Shoppers != 30_000 || c.Seed != 7 {
			t.Errorf("%s: %d shoppers for %d units, seed %d; want 30,000 for 24,000 (20 s of 1,200/s), seed 7", c.SaleID, c.Shoppers, c.Stock, c.Seed)
		}
	}
	if len(sales) != 3 || sales[""] {
		t.Errorf("sales %v, want three fresh ones", sales)
	}
	md, err := os.ReadFile(filepath.Join(o.Out, "autotune.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Capacity**: 1,200/s", "FLASHGATE_AUTOTUNE_PERIOD=2s", "| too high | 3,600/s |", "autotune.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("autotune.md lacks %q", want)
		}
	}
	for _, name := range []string{"autotune.json", "autotune.png"} {
		if _, err := os.Stat(filepath.Join(o.Out, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(out.String(), "capacity (admission unthrottled): 1,200 holds granted/s") {
		t.Errorf("summary:\n%s", out.String())
	}

	played, o.Out = nil, t.TempDir()
	o.CapacityPerS, o.TooHighPerS = 1000, 777
	err = runComparison(context.Background(), o, "", io.Discard, play)
	if err == nil || !strings.Contains(err.Error(), "too high, round 1: boom") || len(played) != 2 || played[0].RatePerS != 250 {
		t.Errorf("a failed run with the capacity given: %v after %d runs; want no ceiling run, autotune from 250/s, then the error, named", err, len(played))
	}
	if _, err := os.Stat(filepath.Join(o.Out, "autotune.md")); err != nil {
		t.Errorf("the report of what was measured before the failure: %v", err)
	}
}
