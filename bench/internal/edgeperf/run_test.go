package edgeperf

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// TestRunSmall runs every part small, end to end: each path's edge answers
// must all be the status it expects, the memory phase must measure every
// line size, and the run must leave no keys behind.
func TestRunSmall(t *testing.T) {
	env := testenv.New(t) // the test database exists; the run makes a schema of its own in it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Config{
		RedisURL: env.RedisURL, PostgresURL: testenv.PostgresURL(), Paths: map[string]bool{},
		Requests: 200, ProxyRequests: 100, Conns: 4, Warmup: 10, Rounds: 1, PollLine: 200, PollAdmitted: 0.2,
		MemSizes: []int{50, 200}, MemPolls: 200, FillWorkers: 8, Limits: LimitsOff, Timeout: 2 * time.Minute,
	}
	for _, p := range AllPaths {
		c.Paths[p] = true
	}
	rep, err := Run(ctx, c)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(rep.Paths) != len(AllPaths)-1 {
		t.Fatalf("Run measured %d paths, want %d", len(rep.Paths), len(AllPaths)-1)
	}
	for _, p := range rep.Paths {
		for _, round := range p.Rounds {
			for _, run := range round.Runs {
				if run.Server != "edge" {
					continue
				}
				if got := run.Answers[strconv.Itoa(p.Expect)]; got != run.Calls || run.Calls == 0 {
					t.Errorf("%s: %d of %d edge answers were %d (%v, first error %q)", p.Name, got, run.Calls, p.Expect, run.Answers, run.FirstError)
				}
			}
		}
		if p.Ratio <= 0 {
			t.Errorf("%s: ratio %.2f, want above 0", p.Name, p.Ratio)
		}
	}
	if m := rep.Memory; m == nil || len(m.Sizes) != 2 || m.HeapRatio <= 0 || m.Sizes[1].Redis.PerShopper <= 0 {
		t.Errorf("memory = %+v, want both sizes measured", m)
	}
	if rep.Cleanup.RedisKeys == 0 {
		t.Error("cleanup removed no keys, want the run's")
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "proxied reserve:") {
		t.Errorf("table lacks the proxied reserve:\n%s", b.String())
	}
}
