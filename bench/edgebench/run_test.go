package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/edgeperf"
)

// TestReportJSONFile writes a report with the figures bench/model reads
// (each path's edge and origin runs, the memory phase's sizes) through
// -report-json, into a folder not yet made, and decodes it back. A real
// report needs a run against Redis and Postgres; edgeperf's TestRunSmall
// does that.
func TestReportJSONFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgebench", "20261209-101500", "report.json")
	_, out, err := loadConfig([]string{"-report-json", path}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	run := func(server string, process, redis float64) edgeperf.ServerRun {
		return edgeperf.ServerRun{Server: server, Timing: benchreport.Timing{Calls: 1_000, Answers: map[string]int{"200": 1_000}},
			ProcessMicros: process, RedisMicros: redis}
	}
	rep := edgeperf.Report{
		Prefix:   "bench:test",
		Settings: edgeperf.Settings{Conns: 64, Rounds: 1, Limits: edgeperf.LimitsProduction},
		Paths: []*edgeperf.Path{
			{Name: "join", Expect: 200, Rounds: []edgeperf.Round{{Round: 1, Runs: []edgeperf.ServerRun{run("bare", 10, 0), run("edge", 31.4, 6.05)}}}, Ratio: 0.3},
			{Name: "proxied reserve", Expect: 201, Rounds: []edgeperf.Round{{Round: 1, Runs: []edgeperf.ServerRun{run("edge", 180, 70), run("origin", 150, 69)}}}},
		},
		Memory: &edgeperf.Memory{Polls: 100, Sizes: []edgeperf.MemSize{
			{Shoppers: 10_000, FillPerSecond: 100_000, Redis: edgeperf.RedisLine{PerShopper: 61, Keys: map[string]int64{"places": 610_000}}},
			{Shoppers: 1_000_000, FillPerSecond: 300_000, Redis: edgeperf.RedisLine{PerShopper: 57}},
		}},
	}
	rep.Cleanup.RedisKeys = 12
	if err := benchreport.Finish(io.Discard, rep, out, nil); err != nil {
		t.Fatalf("Finish(-report-json %s) = %v", path, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("-report-json wrote no file: %v", err)
	}
	var back edgeperf.Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("%s does not decode into edgeperf.Report: %v", path, err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("%s decodes to %+v, want %+v", path, back, rep)
	}
}
