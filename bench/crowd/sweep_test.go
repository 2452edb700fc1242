package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestParseRates(t *testing.T) {
	tests := []struct {
		in   string
		want []float64
		bad  bool
	}{
		{in: defaultSweep, want: []float64{250, 500, 1000, 2000, 4000, 8000}},
		{in: "2000, 500,1000", want: []float64{500, 1000, 2000}},
		{in: "250.5", want: []float64{250.5}},
		{in: "500,500", bad: true},
		{in: "500,0", bad: true},
		{in: "-1", bad: true},
		{in: "500,,1000", bad: true},
		{in: "fast", bad: true},
	}
	for _, tt := range tests {
		got, err := parseRates(tt.in)
		if (err != nil) != tt.bad || (!tt.bad && !equal(got, tt.want)) {
			t.Errorf("parseRates(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// -sweep starts from the capacity scenario, which scenario flags change,
// whatever their order; the standard run's scenario is left as it was.
func TestSweepOptions(t *testing.T) {
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_CROWD_NAIVE_URL": "http://127.0.0.1:9400"}
	getenv := func(k string) string { return env[k] }
	o, err := loadOptions([]string{"-stock", "300", "-sweep", "1000,500"}, getenv, io.Discard)
	if err != nil {
		t.Fatalf("loadOptions(-sweep) = %v", err)
	}
	want := capacityScenario()
	want.Stock, want.Shoppers = 300, 1500
	if o.Scenario != want || !equal(o.Sweep, []float64{500, 1000}) || o.NaiveURL != env["FLASHGATE_CROWD_NAIVE_URL"] {
		t.Errorf("loadOptions(-sweep) = scenario %+v, rates %v, naive %q; want %+v, [500 1000], the variable's", o.Scenario, o.Sweep, o.NaiveURL, want)
	}
	if !strings.HasPrefix(o.Out, filepath.Join(".data", "capacity")) {
		t.Errorf("out = %q, want under .data/capacity", o.Out)
	}
	// No gateway token and no Postgres: nobody pays, and the naive server is its own.
	if o, err := loadOptions(nil, func(k string) string { return map[string]string{"FLASHGATE_GATEWAY_CONTROL_TOKEN": "c"}[k] + env[k] }, io.Discard); err != nil ||
		o.Scenario != crowdsim.DefaultScenario() || o.Sweep != nil {
		t.Errorf("loadOptions(no -sweep) = %v, scenario %+v, rates %v; want the default scenario", err, o.Scenario, o.Sweep)
	}
	for _, args := range [][]string{{"-sweep", "0"}, {"-sweep", "500", "-naive-url", "http://10.0.0.5:9400"}} {
		if _, err := loadOptions(args, getenv, io.Discard); err == nil {
			t.Errorf("loadOptions(%q) accepted", args)
		}
	}
}

func TestSweepCommand(t *testing.T) {
	for args, want := range map[string]string{
		"-sweep " + defaultSweep:                     "make bench-capacity",
		"-sweep " + defaultSweep + " -stock 300":     "make bench-capacity CAPACITY_FLAGS='-stock 300'",
		"-sweep " + defaultSweep + " -sweep 250,500": "make bench-capacity CAPACITY_FLAGS='-sweep 250,500'",
		"-sweep 100,200":                             "bin/crowd -sweep 100,200",
	} {
		if got := sweepCommand(strings.Fields(args)); got != want {
			t.Errorf("sweepCommand(%q) = %q, want %q", args, got, want)
		}
	}
}

// Two tiny steps of the sweep end to end, the way make bench-capacity runs
// it: the real binaries, bench/naiveserver as a process of its own, a
// fresh sale and a reset baseline per step. Every step of both designs
// sells its stock exactly, answers its shoppers and is judged; the report
// files and the one-line verdict come out, and the naive server's CPU is
// its own group.
func TestCapacitySweepAgainstTheRealStack(t *testing.T) {
	t.Parallel()
	st := startStack(t, 0)
	naiveURL := startNaiveServer(t)
	sc := capacityScenario()
	sc.Stock, sc.BurstS, sc.MaxDurationS = 30, 1, 8
	o := options{
		Config: crowdsim.Config{
			Scenario: sc, EdgeURL: "http://" + st.edge, EdgeAdminURL: "http://" + st.edgeAdmin,
			OriginAdminURL: "http://" + st.originAdmin, GatewayURL: "http://" + st.gateway,
			AdminToken: adminToken, UserSecret: []byte(userSecret), Conns: 64, SetUp: testSetUp, Seed: 9, Progress: t.Logf, NaiveURL: naiveURL,
		},
		Naive: true, Sweep: []float64{100, 200}, SweepMax: 400, SweepRefine: 1, Out: t.TempDir(),
	}
	var stdout bytes.Buffer
	if err := runSweep(context.Background(), o, "test sweep", &stdout); err != nil {
		t.Fatalf("runSweep = %v", err)
	}
	if !strings.Contains(stdout.String(), "capacity at the promise: flashgate") {
		t.Errorf("stdout = %q, want the verdict line", stdout.String())
	}
	for _, f := range []string{"capacity.md", "capacity.json", "capacity.png"} {
		if fi, err := os.Stat(filepath.Join(o.Out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.Out, "capacity.md"))
	t.Logf("capacity.md:\n%s", md)
	var sw crowdreport.Sweep
	b, _ := os.ReadFile(filepath.Join(o.Out, "capacity.json"))
	if err := json.Unmarshal(b, &sw); err != nil || len(sw.Steps) < 2 {
		t.Fatalf("capacity.json: %v, %d steps; want the 2 asked at least", err, len(sw.Steps))
	}
	// Past the rates asked, the sweep doubles while flashgate holds, up to
	// -sweep-max: a third step at 400/s exactly when it held at 200/s. Then
	// one refinement of each design that held at a rate and missed above
	// it, halfway between, with that design's run alone.
	want := 2
	if crowdreport.Judge(sw.Steps[1].Flashgate).Held {
		want = 3
	}
	if len(sw.Steps) < want || sw.Steps[want-1].RatePerS != []float64{100, 200, 400}[want-1] {
		t.Fatalf("sweep steps = %d; want %d, the last at %g/s, before any refinement", len(sw.Steps), want, []float64{100, 200, 400}[want-1])
	}
	swept, refined := sw.Steps[:want], sw.Steps[want:]
	for _, d := range crowdreport.Designs {
		c := crowdreport.CapacityOf(crowdreport.Sweep{Steps: swept}, d)
		wantRefined := c.RatePerS > 0 && c.MissedAt > 0 && !c.AtLeast
		got := 0
		for _, step := range refined {
			if r := step.Result(d); r != nil {
				got++
				if step.RatePerS != (c.RatePerS+c.MissedAt)/2 || step.Result(otherDesign(d)) != nil {
					t.Errorf("%s refined at %g/s (with the other's run: %v), want at %g/s alone", d, step.RatePerS, step.Result(otherDesign(d)) != nil, (c.RatePerS+c.MissedAt)/2)
				}
			}
		}
		if (got == 1) != wantRefined {
			t.Errorf("%s: %d refinements, capacity %s missed at %g/s; want one exactly when it held and then missed", d, got, c, c.MissedAt)
		}
	}
	sw.Steps = swept
	naiveMissed := false
	for _, step := range sw.Steps {
		for _, d := range crowdreport.Designs {
			r := step.Result(d)
			if d == "naive" && naiveMissed {
				if r != nil {
					t.Errorf("%g/s: a naive run above the rate it first missed at", step.RatePerS)
				}
				continue
			}
			if r == nil {
				t.Errorf("%g/s: no %s run", step.RatePerS, d)
				continue
			}
			shoppers := int(step.RatePerS * sc.BurstS)
			if r.Scenario.Shoppers != shoppers || r.Oversold != 0 || !r.InvariantOK || r.Fates.Reserved.Count != sc.Stock || r.Fates.Answered < shoppers*99/100 {
				t.Errorf("%g/s %s: %d shoppers, oversold %d, invariant %v, %d reserved, %d answered; want %d, 0, true, %d, (almost) all",
					step.RatePerS, d, r.Scenario.Shoppers, r.Oversold, r.InvariantOK, r.Fates.Reserved.Count, r.Fates.Answered, shoppers, sc.Stock)
			}
		}
		if step.Naive == nil {
			continue
		}
		if cpus := step.Naive.CPUs["naive server"]; cpus == "" {
			t.Errorf("%g/s: the naive run's CPUs %v name no naive server", step.RatePerS, step.Naive.CPUs)
		}
		naiveMissed = !crowdreport.Judge(step.Naive).Held
	}
}

func otherDesign(d string) string {
	if d == "naive" {
		return "flashgate"
	}
	return "naive"
}

// startNaiveServer builds and starts bench/naiveserver on a free loopback
// port, its tables in a schema of this test's; it stops with the test.
func startNaiveServer(t *testing.T) string {
	t.Helper()
	env := testenv.New(t)
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../naiveserver").CombinedOutput(); err != nil {
		t.Fatalf("go build naiveserver: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(filepath.Join(bin, "naiveserver"), "-listen", addr, "-pool", "16", "-schema", "naive_"+testenv.RandomHex(4))
	cmd.Env = append(os.Environ(), "FLASHGATE_POSTGRES_URL="+env.PostgresURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start naiveserver: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("naiveserver log:\n%s", lastLines(out.String(), 30))
		}
	})
	waitHealthy(t, "http://"+addr+"/healthz")
	return "http://" + addr
}
