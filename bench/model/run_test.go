package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/capmodel"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/edgeperf"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/bench/internal/reserveperf"
)

const (
	checkedInInputs = "../../docs/capacity-inputs.json"
	checkedInDoc    = "../../docs/CAPACITY.md"
)

// TestCheckedInDocumentMatchesModel keeps docs/CAPACITY.md honest: its
// generated part must be what the model computes from the checked-in
// inputs.
func TestCheckedInDocumentMatchesModel(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-check", "-inputs", checkedInInputs, "-doc", checkedInDoc}, &out, io.Discard); err != nil {
		t.Fatalf("run -check: %v", err)
	}
}

// TestCheckedInInputsAreCanonical: the file is as the command writes it,
// so make bench-model without new reports changes nothing.
func TestCheckedInInputsAreCanonical(t *testing.T) {
	raw, err := os.ReadFile(checkedInInputs)
	if err != nil {
		t.Fatal(err)
	}
	in, err := capmodel.DecodeInputs(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := capmodel.EncodeInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, raw) {
		t.Errorf("EncodeInputs(DecodeInputs(%s)) differs from the file at line %d: write it with make bench-model",
			checkedInInputs, firstDiffLine(string(raw), string(out)))
	}
}

// copyCheckedIn puts the checked-in inputs and document in a fresh folder.
func copyCheckedIn(t *testing.T) (dir, inputs, doc string) {
	t.Helper()
	dir = t.TempDir()
	inputs, doc = filepath.Join(dir, "inputs.json"), filepath.Join(dir, "CAPACITY.md")
	for src, dst := range map[string]string{checkedInInputs: inputs, checkedInDoc: doc} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, inputs, doc
}

func TestCheckFailsWhenTheDocumentDrifts(t *testing.T) {
	_, inputs, doc := copyCheckedIn(t)
	b, _ := os.ReadFile(doc)
	i := strings.Index(string(b), "### The fleet")
	if i < 0 {
		t.Fatal("no fleet table in the document")
	}
	drifted := string(b[:i]) + strings.Replace(string(b[i:]), "**", "**9", 1)
	if err := os.WriteFile(doc, []byte(drifted), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"-check", "-inputs", inputs, "-doc", doc}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "run make bench-model") {
		t.Fatalf("run -check on a drifted document = %v, want an error telling to run make bench-model", err)
	}
	// Without -check the command puts it right, and the inputs stay as
	// they were (there are no reports).
	before, _ := os.ReadFile(inputs)
	if err := run([]string{"-inputs", inputs, "-doc", doc, "-data", t.TempDir()}, io.Discard, io.Discard); err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := run([]string{"-check", "-inputs", inputs, "-doc", doc}, io.Discard, io.Discard); err != nil {
		t.Errorf("run -check after run = %v, want nil", err)
	}
	if after, _ := os.ReadFile(inputs); !bytes.Equal(before, after) {
		t.Error("run without reports rewrote the inputs")
	}
}

// writeReport writes v as name under data/kind/<time>/.
func writeReport(t *testing.T, data, kind, at, name string, write func(w io.Writer) error) string {
	t.Helper()
	dir := filepath.Join(data, kind, at)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func jsonOf(v any) func(w io.Writer) error {
	return func(w io.Writer) error { return json.NewEncoder(w).Encode(v) }
}

// edgeRun is one server's run of a path with the given µs per request.
func edgeRun(server string, process, redis float64) edgeperf.ServerRun {
	return edgeperf.ServerRun{Server: server, Timing: benchreport.Timing{Calls: 1000}, ProcessMicros: process, RedisMicros: redis}
}

// rounds are three rounds of a path whose edge runs cost process[i] and
// redis[i], and whose origin runs (when origin is set) cost origin[i].
func rounds(process, redis, origin []float64) []edgeperf.Round {
	var out []edgeperf.Round
	for i := range process {
		r := edgeperf.Round{Round: i + 1, Runs: []edgeperf.ServerRun{edgeRun("bare", 10, 0)}}
		if origin != nil {
			r.Runs = append(r.Runs, edgeRun("origin", origin[i], 0))
		}
		r.Runs = append(r.Runs, edgeRun("edge", process[i], redis[i]))
		out = append(out, r)
	}
	return out
}

func result(stock, answered int, cpu map[string]float64, joins int) *crowdsim.Result {
	return &crowdsim.Result{Mode: "flashgate", Stock: stock, Answered: answered, CPU: cpu,
		Endpoints: []crowdsim.Endpoint{{Name: "join", Count: joins}, {Name: "status", Count: answered - joins}}}
}

// TestReportsUpdateInputs writes one report of each kind, newer than every
// recorded figure, and checks what the command takes from each.
func TestReportsUpdateInputs(t *testing.T) {
	dir, inputs, doc := copyCheckedIn(t)
	data := filepath.Join(dir, "data")
	const at = "20261210-120000"
	edge := writeReport(t, data, "edgebench", at, "report.json", jsonOf(edgeperf.Report{
		Paths: []*edgeperf.Path{
			{Name: "join", Rounds: rounds([]float64{40, 44, 42}, []float64{7, 9, 8}, nil)},
			{Name: "status poll", Rounds: rounds([]float64{31, 29, 30}, []float64{0, 0, 0}, nil)},
			{Name: "sold-out reserve", Rounds: rounds([]float64{18, 18, 18}, []float64{0, 0, 0}, nil)},
			// edge − origin: 150, 160, 140 → median 150
			{Name: "proxied reserve", Rounds: rounds([]float64{300, 320, 290}, []float64{60, 60, 60}, []float64{150, 160, 150})},
		},
		Memory: &edgeperf.Memory{Sizes: []edgeperf.MemSize{
			{Shoppers: 10_000, FillPerSecond: 100_000, Redis: edgeperf.RedisLine{PerShopper: 61}},
			{Shoppers: 1_000_000, FillPerSecond: 300_000, Redis: edgeperf.RedisLine{PerShopper: 57}},
		}},
	}))
	// 10,000 reserves in 2 s: 200 µs of wall time each; half a core of
	// process and a quarter of Redis: 100 and 50 µs.
	reserve := writeReport(t, data, "reservebench", at, "report.json", jsonOf(reserveperf.Report{
		HTTP: &reserveperf.HTTPReport{Conns: 256, Rounds: []reserveperf.HTTPRound{
			{Round: 1, Origin: reserveperf.HTTPRun{Timing: benchreport.Timing{Calls: 10_000, Seconds: 2, CPU: procstat.Usage{Process: 0.5, Redis: 0.25}}}},
		}},
	}))
	small := crowdreport.Size{Shoppers: 20_000, Flashgate: result(5_000, 100_000, map[string]float64{"edge": 10, "origin": 10, "postgres": 20}, 20_000)}
	large := crowdreport.Size{Shoppers: 100_000, Flashgate: result(5_000, 250_000, map[string]float64{"edge": 16, "origin": 8, "postgres": 12}, 100_000),
		Origin: []crowdreport.OriginCount{
			{Kind: "route", Name: "reserve", Count: 6_000}, {Kind: "route", Name: "create_order", Count: 5_000},
			{Kind: "route", Name: "order", Count: 5_000}, {Kind: "route", Name: "payment_webhook", Count: 4_000},
			{Kind: "postgres op", Name: "order", Count: 99}, // not a route: not counted
		}}
	scaling := writeReport(t, data, "scaling", at, "scaling.json", func(w io.Writer) error {
		return crowdreport.WriteScalingJSON(w, crowdreport.Scaling{Sizes: []crowdreport.Size{large, small}})
	})
	crowdRes := result(5_000, 5_000, nil, 1_210)
	crowdRes.Scenario = crowdsim.Scenario{Shoppers: 1_000, Hammering: crowdsim.BotCohort{Accounts: 100}}
	crowd := writeReport(t, data, "crowd", at, "report.json", func(w io.Writer) error {
		return crowdreport.WriteJSON(w, crowdreport.Runs{Flashgate: *crowdRes})
	})
	// An older report beside each newer one is never read.
	writeReport(t, data, "edgebench", "20261209-000000", "report.json", jsonOf(edgeperf.Report{}))
	// Nor is a folder not named by time.
	writeReport(t, data, "edgebench", "zzz-latest", "report.json", func(w io.Writer) error { _, err := io.WriteString(w, "not json"); return err })

	var out bytes.Buffer
	if err := run([]string{"-inputs", inputs, "-doc", doc, "-data", data}, &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	raw, _ := os.ReadFile(inputs)
	in, err := capmodel.DecodeInputs(raw)
	if err != nil {
		t.Fatalf("the written inputs: %v", err)
	}
	c := in.Costs
	date := "2026-12-10 12:00 UTC"
	for _, tc := range []struct {
		name   string
		fig    capmodel.Figure
		want   float64
		source string
	}{
		{"edge join", c.EdgeJoin, 42, edge},
		{"Redis join", c.RedisJoin, 8, edge},
		{"edge poll", c.EdgePoll, 30, edge},
		{"edge sold-out", c.EdgeSoldOut, 18, edge},
		{"edge proxied", c.EdgeProxied, 150, edge},
		{"Redis bytes", c.RedisBytesPerShopper, 57, edge},
		{"best joins", c.RedisBestJoins, 300_000, edge},
		{"origin reserve", c.OriginReserve, 100, reserve},
		{"Redis reserve", c.RedisReserve, 50, reserve},
		{"origin per unit", c.OriginUnit, 1_600, scaling},     // 8 CPU-s ÷ 5,000
		{"Postgres per unit", c.PostgresUnit, 2_400, scaling}, // 12 CPU-s ÷ 5,000
		{"proxied per unit", c.ProxiedPerUnit, 4, scaling},    // 20,000 ÷ 5,000
		{"intents per unit", c.IntentsPerUnit, 2.4, scaling},  // 2 × 6,000 ÷ 5,000
		{"joins per arrival", c.JoinsPerArrival, 1.1, crowd},  // 1,210 ÷ (1,000 + 100)
		{"CDN fetches (no report)", c.CDNFetches, 1, "docs/CDN.md, Measured (TestSnapshotWatchCollapses, TestSnapshotLoadsCollapse)"},
	} {
		if tc.fig.Value < tc.want-1e-9 || tc.fig.Value > tc.want+1e-9 || tc.fig.Source != tc.source {
			t.Errorf("%s = %v from %q, want %v from %q", tc.name, tc.fig.Value, tc.fig.Source, tc.want, tc.source)
		}
		if tc.source != tc.fig.Source || (strings.HasPrefix(tc.source, data) && tc.fig.Date != date) {
			t.Errorf("%s dated %q, want %q", tc.name, tc.fig.Date, date)
		}
	}
	p := in.PrimaryCheck()
	if p.Source != scaling || p.AddedRequests != 150_000 || p.AddedJoins != 80_000 || p.AddedEdgeCPUS != 6 {
		t.Errorf("primary edge check = %+v, want the scaling report's: 150,000 requests, 80,000 joins, 6 CPU-s", p)
	}
	if n := len(in.EdgeChecks); n != 5 {
		t.Errorf("edge checks: %d, want the report's and the 4 recorded ones", n)
	}
	if cc := in.CheckoutCheck; cc.Source != scaling || cc.MeasuredCPUS != 30 || cc.Stock != 5_000 {
		t.Errorf("checkout check = %+v, want the 20,000 run's 30 CPU-s for 5,000 units", cc)
	}
	// The document now holds the reports' figures, and -check agrees.
	if err := run([]string{"-check", "-inputs", inputs, "-doc", doc}, io.Discard, io.Discard); err != nil {
		t.Errorf("run -check after run with reports: %v", err)
	}
	if b, _ := os.ReadFile(doc); !strings.Contains(string(b), edge) {
		t.Errorf("the document does not name the edge report %s as a source", edge)
	}
	// A second run with the same reports changes nothing.
	before, _ := os.ReadFile(inputs)
	if err := run([]string{"-inputs", inputs, "-doc", doc, "-data", data}, io.Discard, io.Discard); err != nil {
		t.Fatalf("run again: %v", err)
	}
	if after, _ := os.ReadFile(inputs); !bytes.Equal(before, after) {
		t.Errorf("a second run with the same reports rewrote the inputs (first difference at line %d)", firstDiffLine(string(before), string(after)))
	}
}

func TestOlderReportKeepsRecordedFigures(t *testing.T) {
	dir, inputs, doc := copyCheckedIn(t)
	data := filepath.Join(dir, "data")
	// Before every recorded figure's date.
	writeReport(t, data, "edgebench", "20261101-000000", "report.json", jsonOf(edgeperf.Report{
		Paths: []*edgeperf.Path{{Name: "join", Rounds: rounds([]float64{99}, []float64{99}, nil)}},
	}))
	before, _ := os.ReadFile(inputs)
	var out bytes.Buffer
	if err := run([]string{"-inputs", inputs, "-doc", doc, "-data", data}, &out, io.Discard); err != nil {
		t.Fatalf("run: %v", err)
	}
	if after, _ := os.ReadFile(inputs); !bytes.Equal(before, after) {
		t.Error("an older report changed the inputs")
	}
	if !strings.Contains(out.String(), "nothing newer than the recorded figures") || !strings.Contains(out.String(), "no bench-scaling report") {
		t.Errorf("run's account = %q, want it to say the report was older and which reports were missing", out.String())
	}
}

func TestNewest(t *testing.T) {
	data := t.TempDir()
	for _, d := range []string{"20261201-000000", "20261203-101010", "notatime"} {
		writeReport(t, data, "scaling", d, "scaling.json", func(w io.Writer) error { return nil })
	}
	path, at, ok := newest(filepath.Join(data, "scaling/*/scaling.json"))
	if want := filepath.Join(data, "scaling", "20261203-101010", "scaling.json"); !ok || path != want {
		t.Errorf("newest = %q, %v; want %q", path, ok, want)
	}
	if want := time.Date(2026, 12, 3, 10, 10, 10, 0, time.UTC); !at.Equal(want) {
		t.Errorf("newest time = %v, want %v", at, want)
	}
	if _, _, ok := newest(filepath.Join(data, "edgebench/*/report.json")); ok {
		t.Error("newest of nothing = ok, want not found")
	}
}

func TestLoadConfig(t *testing.T) {
	c, err := loadConfig(nil, io.Discard)
	if err != nil || c.inputs != "docs/capacity-inputs.json" || c.doc != "docs/CAPACITY.md" || c.data != ".data" || c.check {
		t.Errorf("loadConfig(nil) = %+v, %v; want the repository's paths, no -check", c, err)
	}
	if _, err := loadConfig([]string{"extra"}, io.Discard); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("loadConfig(extra) = %v, want unexpected arguments", err)
	}
}
