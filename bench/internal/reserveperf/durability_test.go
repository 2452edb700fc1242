package reserveperf

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestDurabilityPhaseRunsEveryOption runs the durability phase small: every
// option must be measured on its own server, every reserve created, the
// journal must hold one row per created reserve, and ratios be to none.
func TestDurabilityPhaseRunsEveryOption(t *testing.T) {
	env := testenv.New(t) // the test database exists; the phase makes a schema of its own in it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Config{
		PostgresURL: env.PostgresURL, Durability: []string{DurJournal, DurAOF, DurJournalAOF, DurReplica, DurWait},
		DurabilityReserves: 300, ScriptWorkers: 16, Warmup: 20, Rounds: 1, WaitTimeout: time.Second,
		Reserver:       []reservescript.ReserverOptions{{Pipelines: 2, MaxBatch: 32}},
		RedisBenchmark: RedisBenchmarkOptions{KeySpace: 1000},
	}
	prefix := testenv.Name("reservebenchtest") + ":"
	rep, err := runDurability(ctx, c, prefix, 12)
	if err != nil {
		t.Fatalf("runDurability: %v", err)
	}
	var got []string
	for _, run := range rep.Runs {
		got = append(got, run.Option+"@"+run.Server)
		if run.Created != c.DurabilityReserves || run.Other != 0 || run.Errors != 0 {
			t.Errorf("%s: created %d, other %d, errors %d (%s); want %d, 0, 0", run.Option, run.Created, run.Other, run.Errors, run.FirstError, c.DurabilityReserves)
		}
		wantRows := 0
		if durabilities[run.Option].journal {
			wantRows = c.Warmup + c.DurabilityReserves
		}
		if run.Journaled != wantRows {
			t.Errorf("%s: journaled %d, want %d", run.Option, run.Journaled, wantRows)
		}
		if run.Ratio <= 0 || (run.Option == DurNone && run.Ratio != 1) {
			t.Errorf("%s: ratio %.2f, want 1 for none and above 0 for the rest", run.Option, run.Ratio)
		}
	}
	want := []string{"none@plain", "journal@plain", "aof@aof", "journal+aof@aof", "replica@primary", "wait@primary"}
	if !slices.Equal(got, want) {
		t.Errorf("runs = %v, want %v (none added first as the baseline)", got, want)
	}
	if len(rep.Options) != len(want) || rep.Options[0].Option != DurNone || rep.Options[0].Ratio != 1 {
		t.Errorf("options = %+v, want one per run, none first with ratio 1", rep.Options)
	}
	if _, err := os.Stat(rep.Dir); !os.IsNotExist(err) {
		t.Errorf("servers' folder %s after the run: %v, want it removed", rep.Dir, err)
	}
	var b strings.Builder
	if err := (Report{Durability: rep}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Durability (issue 9)", "journal+aof", "ratio 1.00"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
}

func TestValidateDurabilityOptions(t *testing.T) {
	base := Config{
		RedisURL: testenv.DefaultRedisURL, PostgresURL: testenv.DefaultPostgresURL,
		ScriptReserves: 1, ScriptWorkers: 1, HTTPRequests: 1, HTTPConns: 1, Rounds: 1, Timeout: time.Minute,
		Reserver:           []reservescript.ReserverOptions{{}},
		RedisBenchmark:     RedisBenchmarkOptions{Clients: 1, Pipeline: 1, KeySpace: 1},
		DurabilityReserves: 1, WaitTimeout: time.Millisecond,
	}
	for _, tc := range []struct {
		name    string
		options []string
		n       int
		wantErr bool
	}{
		{"every option", DurabilityOptions, 1, false},
		{"one option", []string{DurWait}, 1, false},
		{"unknown option", []string{"fsync"}, 1, true},
		{"no reserves", []string{DurAOF}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.Durability, c.DurabilityReserves = tc.options, tc.n
			if err := c.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
