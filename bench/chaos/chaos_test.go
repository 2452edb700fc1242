package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/faults"
)

// The short scenarios of make chaos (origin killed -9, Redis emptied by
// FLUSHALL, Redis restarted from an older snapshot, the gateway's webhooks
// lost with the origin on Stripe, the sandbox playing it), end to end: the
// real binaries on their own Redis and Postgres, a sale played through
// them, the fault, and every check; they play two at a time, each on its
// own stack (make chaos plays them one after another). Each must pass;
// a failure names the promise that broke (an unreported lost 201, a place
// handed out twice, a paused line admitting, ...).
func TestShortScenarios(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Two at a time: four stacks at once beside the lab's other tests
	// starved the box (an origin took 4 s to restart, shoppers went
	// unanswered), and the lab's longest test takes longer anyway. Setting
	// up took up to 9 s here before a sale started (3 s is make chaos's).
	results, err := faults.Run(ctx, faults.Options{Short: true, Parallel: 2, SetUp: 10 * time.Second, Log: t.Logf})
	if err != nil {
		t.Fatalf("faults.Run = %v", err)
	}
	want, _ := faults.Select(nil, nil, true)
	if len(results) != len(want) {
		t.Fatalf("faults.Run played %d scenarios, want the %d short ones", len(results), len(want))
	}
	for _, r := range results {
		// The harness itself must have seen a sale happen, or its checks prove nothing.
		if r.Accepted == 0 || r.Sold == 0 {
			t.Errorf("%s: %d reservations accepted, %d units sold; want a sale that happened", r.Scenario, r.Accepted, r.Sold)
		}
		if !r.Pass() {
			t.Errorf("%s: FAIL\n  %s\nnotes:\n  %s\n%s", r.Scenario, strings.Join(r.Failures, "\n  "), strings.Join(r.Notes, "\n  "), r.Logs)
		}
	}
	out := filepath.Join(t.TempDir(), "RELIABILITY.md")
	if err := writeReport(out, faults.Report{Command: "go test ./bench/chaos", When: time.Now(), Machine: benchreport.MachineLine(), Load: faults.DefaultLoad(), Results: results}); err != nil {
		t.Fatalf("writeReport = %v", err)
	}
	md, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(md), "| origin-kill9 | 200 |") {
		t.Errorf("report: %v\n%s", err, md)
	}
	t.Log("\n" + faults.Summary(results))
}
