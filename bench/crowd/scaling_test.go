package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: defaultScaling, want: []int{20000, 100000}},
		{in: "100000, 20000,50000", want: []int{20000, 50000, 100000}},
		{in: "500", want: []int{500}},
		{in: "500,500", bad: true},
		{in: "0,500", bad: true},
		{in: "-1", bad: true},
		{in: "1e5", bad: true},
		{in: "500,,1000", bad: true},
	}
	for _, tt := range tests {
		got, err := parseSizes(tt.in)
		if (err != nil) != tt.bad || (!tt.bad && !slices.Equal(got, tt.want)) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// -scaling keeps the standard scenario as the scenario flags set it, and
// refuses to be mixed with the other multi-run modes.
func TestScalingOptions(t *testing.T) {
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_CROWD_NAIVE_URL": "http://127.0.0.1:9400",
		"FLASHGATE_GATEWAY_CONTROL_TOKEN": "c"}
	getenv := func(k string) string { return env[k] }
	o, err := loadOptions([]string{"-max-duration", "60", "-scaling", "100000,20000"}, getenv, io.Discard)
	if err != nil {
		t.Fatalf("loadOptions(-scaling) = %v", err)
	}
	want := crowdsim.DefaultScenario()
	want.MaxDurationS, want.Shoppers = 60, 20000
	if o.Scenario != want || !slices.Equal(o.Scaling, []int{20000, 100000}) || o.Sweep != nil {
		t.Errorf("loadOptions(-scaling) = scenario %+v, sizes %v, sweep %v; want %+v, [20000 100000], none", o.Scenario, o.Scaling, o.Sweep, want)
	}
	if !strings.HasPrefix(o.Out, filepath.Join(".data", "scaling")) {
		t.Errorf("out = %q, want under .data/scaling", o.Out)
	}
	for _, args := range [][]string{{"-scaling", "0"}, {"-scaling", "20000", "-sweep", "500"}, {"-scaling", "20000", "-ceiling"}} {
		if _, err := loadOptions(args, getenv, io.Discard); err == nil {
			t.Errorf("loadOptions(%q) accepted", args)
		}
	}
}

func TestScalingCommand(t *testing.T) {
	for args, want := range map[string]string{
		"-scaling " + defaultScaling:                       "make bench-scaling",
		"-scaling " + defaultScaling + " -max-duration 60": "make bench-scaling SCALING_FLAGS='-max-duration 60'",
		"-scaling 1000,2000":                               "bin/crowd -scaling 1000,2000",
	} {
		if got := scalingCommand(strings.Fields(args)); got != want {
			t.Errorf("scalingCommand(%q) = %q, want %q", args, got, want)
		}
	}
}

// originCounts takes the difference of two scrapes per label value, added
// up over the other labels, with a series born between them counted from
// zero and one that did not move kept at 0.
func TestOriginCounts(t *testing.T) {
	parse := func(text string) procstat.Scrape {
		t.Helper()
		s, err := procstat.ParseMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	series := func(metric, labels string, n int) string {
		c := strconv.Itoa(n)
		return metric + `_bucket{` + labels + `,le="0.01"} ` + c + "\n" + metric + `_bucket{` + labels + `,le="+Inf"} ` + c + "\n" +
			metric + `_sum{` + labels + `} 0.001` + "\n" + metric + `_count{` + labels + `} ` + c + "\n"
	}
	const req, pg = "flashgate_origin_request_seconds", "flashgate_origin_postgres_seconds"
	head := "# TYPE " + req + " histogram\n"
	before := parse(head + series(req, `route="sale",status="200"`, 100) + series(req, `route="reserve",status="201"`, 7))
	after := parse(head + series(req, `route="sale",status="200"`, 500) + series(req, `route="sale",status="503"`, 2) +
		series(req, `route="reserve",status="201"`, 7) +
		"# TYPE " + pg + " histogram\n" + series(pg, `op="record_grants"`, 40))
	got := originCounts(before, after)
	want := []crowdreport.OriginCount{
		{Kind: "route", Name: "reserve", Count: 0},
		{Kind: "route", Name: "sale", Count: 402},
		{Kind: "postgres op", Name: "record_grants", Count: 40},
	}
	if !slices.Equal(got, want) {
		t.Errorf("originCounts = %+v, want %+v", got, want)
	}
}

// Two tiny sizes of the scaling run end to end, the way make bench-scaling
// runs it: the real binaries, bench/naiveserver as a process of its own, a
// fresh sale and a reset baseline per size. Both designs play both sizes
// and sell their stock exactly, the origin's counts and Postgres's
// counters come back, and the report files and the verdict line come out.
func TestScalingAgainstTheRealStack(t *testing.T) {
	t.Parallel()
	st := startStack(t, 0)
	naiveURL := startNaiveServer(t)
	sc := crowdsim.DefaultScenario()
	sc.Stock, sc.RatePerS, sc.Hammering.Accounts, sc.Hammering.Addresses = 30, 200, 0, 1
	sc.PreQueueS, sc.BurstS, sc.TailS, sc.MaxDurationS = 1, 1, 1, 6
	sc.PayProbability, sc.StayShare, sc.PageRefreshS, sc.ReactionS = 0, 0, 0, 0 // buy at once: every unit sells within the short run
	o := options{
		Config: crowdsim.Config{
			Scenario: sc, EdgeURL: "http://" + st.edge, EdgeAdminURL: "http://" + st.edgeAdmin,
			OriginAdminURL: "http://" + st.originAdmin, GatewayURL: "http://" + st.gateway,
			AdminToken: adminToken, UserSecret: []byte(userSecret), Conns: 64, SetUp: testSetUp, Seed: 11, Progress: t.Logf, NaiveURL: naiveURL,
		},
		PostgresURL: testenv.New(t).PostgresURL, Naive: true, Scaling: []int{100, 300}, Out: t.TempDir(),
	}
	var stdout bytes.Buffer
	if err := runScaling(context.Background(), o, "test scaling", &stdout); err != nil {
		t.Fatalf("runScaling = %v", err)
	}
	if !strings.Contains(stdout.String(), "scaling law: origin + postgres CPU at 300 ÷ at 100 shoppers") {
		t.Errorf("stdout = %q, want the verdict line", stdout.String())
	}
	for _, f := range []string{"scaling.md", "scaling.json"} {
		if fi, err := os.Stat(filepath.Join(o.Out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.Out, "scaling.md"))
	t.Logf("scaling.md:\n%s", md)
	var got crowdreport.Scaling
	b, _ := os.ReadFile(filepath.Join(o.Out, "scaling.json"))
	if err := json.Unmarshal(b, &got); err != nil || len(got.Sizes) != 2 {
		t.Fatalf("scaling.json: %v, %d sizes; want 2", err, len(got.Sizes))
	}
	for _, sz := range got.Sizes {
		for _, d := range crowdreport.Designs {
			r := sz.Result(d)
			if r == nil {
				t.Errorf("%d shoppers: no %s run", sz.Shoppers, d)
				continue
			}
			if r.Scenario.Shoppers != sz.Shoppers || r.Scenario.Stock != sc.Stock || r.Oversold != 0 || r.Fates.Reserved.Count != sc.Stock {
				t.Errorf("%d shoppers %s: scenario %d shoppers %d units, oversold %d, %d reserved; want %d, %d, 0, %d",
					sz.Shoppers, d, r.Scenario.Shoppers, r.Scenario.Stock, r.Oversold, r.Fates.Reserved.Count, sz.Shoppers, sc.Stock, sc.Stock)
			}
		}
		reserves := slices.IndexFunc(sz.Origin, func(c crowdreport.OriginCount) bool { return c.Kind == "route" && c.Name == "reserve" })
		if reserves < 0 || sz.Origin[reserves].Count < sc.Stock {
			t.Errorf("%d shoppers: origin counts %+v; want the reserve route's, at least the stock", sz.Shoppers, sz.Origin)
		}
		if sz.Postgres["flashgate"].Transactions == 0 || sz.Postgres["naive"].Transactions < int64(sc.Stock) {
			t.Errorf("%d shoppers: Postgres activity %+v; want transactions for both designs", sz.Shoppers, sz.Postgres)
		}
	}
}
