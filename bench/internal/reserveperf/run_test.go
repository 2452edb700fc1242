package reserveperf

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestRunSmall runs the script and HTTP paths small, end to end: every
// reserve must be created, redis-benchmark must run the Reserver's own
// command, the origin with and without its journal must answer 201, and the
// run must leave no keys behind.
func TestRunSmall(t *testing.T) {
	env := testenv.New(t) // the test database exists; the run makes schemas of its own in it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Config{
		RedisURL: env.RedisURL, PostgresURL: testenv.PostgresURL(), Script: true, HTTP: true,
		ScriptReserves: 500, ScriptWorkers: 8, Reserver: []reservescript.ReserverOptions{{Pipelines: 2, MaxBatch: 16}},
		RedisBenchmark: RedisBenchmarkOptions{Clients: 4, Pipeline: 4, KeySpace: 100_000_000, Binary: "redis-benchmark"},
		HTTPRequests:   300, HTTPConns: 4, HTTPNoJournal: true,
		Warmup: 20, Rounds: 1, Timeout: 2 * time.Minute,
	}
	rep, err := Run(ctx, c)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s := rep.Script; s == nil || len(s.Runs) != 1 || len(s.RedisBenchmark) != 1 {
		t.Fatalf("script report = %+v, want one Reserver run and one redis-benchmark run", s)
	}
	if run := rep.Script.Runs[0]; run.Created != c.ScriptReserves || run.Other != 0 || run.Ratio <= 0 {
		t.Errorf("script run: created %d, other %d (%s), ratio %.2f; want %d, 0, above 0", run.Created, run.Other, run.FirstError, run.Ratio, c.ScriptReserves)
	}
	// redis-benchmark draws its shoppers at random: one may come twice.
	if rb := rep.Script.RedisBenchmark[0]; rb.Created < c.ScriptReserves-5 || rb.PerSecond <= 0 {
		t.Errorf("redis-benchmark: created %d at %.0f/s; want about %d units taken", rb.Created, rb.PerSecond, c.ScriptReserves)
	}
	if h := rep.HTTP; h == nil || len(h.Rounds) != 1 || h.Rounds[0].OriginNoJournal == nil {
		t.Fatalf("http report = %+v, want one round with the origin without its journal", h)
	}
	round := rep.HTTP.Rounds[0]
	for name, run := range map[string]HTTPRun{"origin": round.Origin, "origin without journal": *round.OriginNoJournal, "bare": round.Bare} {
		if run.Created != c.HTTPRequests || run.Other != 0 {
			t.Errorf("%s: %d answered 201, other %d (%v, first error %q); want %d", name, run.Created, run.Other, run.Answers, run.FirstError, c.HTTPRequests)
		}
	}
	if rep.HTTP.Ratio <= 0 || rep.HTTP.JournalRatio <= 0 {
		t.Errorf("http ratios %.2f and journal %.2f, want both above 0", rep.HTTP.Ratio, rep.HTTP.JournalRatio)
	}
	if n, err := testenv.DeleteKeys(ctx, env.Redis, rep.Prefix); err != nil || n != 0 {
		t.Errorf("keys under %s after the run: %d, %v; want none", rep.Prefix, n, err)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Script path", "HTTP path", "origin / bare"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
