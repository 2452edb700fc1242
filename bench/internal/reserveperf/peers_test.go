package reserveperf

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/testenv"
)

// TestPeersPhaseSmall runs the peers phase alone through Run, small and
// one round: flashgate and the seckill must sell exactly the units and tell
// everyone else sold out, pgserializable may sell fewer but never more,
// every design's answers must add up to its attempts, the ratios must be
// flashgate's rate over each peer's, and the phase must leave neither keys
// nor schemas behind.
func TestPeersPhaseSmall(t *testing.T) {
	env := testenv.New(t) // the test database exists; each design makes a schema of its own in it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Config{
		RedisURL: env.RedisURL, PostgresURL: testenv.PostgresURL(), Peers: true,
		PeerUnits: 50, PeerAccounts: 1000, PeerConns: 10, Rounds: 1, Timeout: time.Minute,
		Reserver: []reservescript.ReserverOptions{{Pipelines: 2, MaxBatch: 16}},
		// Validate asks for these whatever runs; the other phases do not.
		ScriptReserves: 1, ScriptWorkers: 1, HTTPRequests: 1, HTTPConns: 1,
		RedisBenchmark: RedisBenchmarkOptions{Clients: 1, Pipeline: 1, KeySpace: 1},
	}
	all, err := Run(ctx, c)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	rep := all.Peers
	if all.Script != nil || all.HTTP != nil || all.Durability != nil || rep == nil || len(rep.Rounds) != 1 {
		t.Fatalf("report = %+v, want the peers phase alone, one round", all)
	}
	round := rep.Rounds[0]
	for _, run := range []PeerRun{round.Flashgate, round.Seckill, round.Serializable} {
		sum := run.Errors
		for _, n := range run.Answers {
			sum += n
		}
		if run.Calls != c.PeerAccounts || sum != c.PeerAccounts || run.Created+run.SoldOut+run.Failed+run.Other != c.PeerAccounts {
			t.Errorf("%s: %d calls, answers %v and %d errors, 201+409+5xx+other %d; want each %d",
				run.Design, run.Calls, run.Answers, run.Errors, run.Created+run.SoldOut+run.Failed+run.Other, c.PeerAccounts)
		}
		if run.PerSecond <= 0 || run.P99Millis <= 0 {
			t.Errorf("%s: %.0f attempts/s, p99 %.2f ms; want both above 0", run.Design, run.PerSecond, run.P99Millis)
		}
	}
	for _, run := range []PeerRun{round.Flashgate, round.Seckill} {
		if run.Created != c.PeerUnits || run.SoldOut != c.PeerAccounts-c.PeerUnits || run.Sold != c.PeerUnits {
			t.Errorf("%s: 201 %d, 409 %d, sold %d (answers %v, first error %q); want %d, %d, %d",
				run.Design, run.Created, run.SoldOut, run.Sold, run.Answers, run.FirstError, c.PeerUnits, c.PeerAccounts-c.PeerUnits, c.PeerUnits)
		}
	}
	if fg := round.Flashgate; fg.Journaled != c.PeerUnits || len(fg.Broken) > 0 || !rep.GuaranteesKept {
		t.Errorf("flashgate: journaled %d, broken %q, guarantees kept %v; want %d, none, true", fg.Journaled, fg.Broken, rep.GuaranteesKept, c.PeerUnits)
	}
	if pg := round.Serializable; pg.Sold > c.PeerUnits || pg.Sold != pg.Created || pg.Other != 0 {
		t.Errorf("pgserializable: sold %d, 201 %d, other %d (%v); want at most %d sold, one per 201, nothing but 201, 409 and 5xx",
			pg.Sold, pg.Created, pg.Other, pg.Answers, c.PeerUnits)
	}
	wantSeckill := round.Flashgate.PerSecond / round.Seckill.PerSecond
	wantSerializable := round.Flashgate.PerSecond / round.Serializable.PerSecond
	if round.SeckillRatio != wantSeckill || rep.SeckillRatio != wantSeckill ||
		round.SerializableRatio != wantSerializable || rep.SerializableRatio != wantSerializable {
		t.Errorf("ratios: seckill %.3f (median %.3f), pgserializable %.3f (median %.3f); want %.3f and %.3f",
			round.SeckillRatio, rep.SeckillRatio, round.SerializableRatio, rep.SerializableRatio, wantSeckill, wantSerializable)
	}
	if all.Cleanup.RedisKeys != 0 {
		t.Errorf("Run's cleanup found %d keys under %s; want none, each design's server removing its own", all.Cleanup.RedisKeys, all.Prefix)
	}
	var schemas int
	if err := env.DB.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)",
		strings.TrimSuffix(all.Prefix, ":")+"_peers").Scan(&schemas); err != nil || schemas != 0 {
		t.Errorf("schemas of the phase after it: %d, %v; want none", schemas, err)
	}
	var b strings.Builder
	if err := all.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Peers (issue 31)", "seckill (Redis Lua, no checks)", "kept in every round", "flashgate / seckill", "flashgate / pgserializable"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	t.Logf("\n%s", b.String())
}

// TestFlashgateBroken: each guarantee, broken alone, is named, and a
// report with one broken says no goal is met however high its ratios.
func TestFlashgateBroken(t *testing.T) {
	const units = 10
	kept := PeerRun{Design: PeerFlashgate, Created: units, SoldOut: 90, Sold: units, Journaled: units,
		Timing: benchreport.Timing{Calls: 100, Answers: map[string]int{"201": units, "409": 90}}}
	for _, tc := range []struct {
		name   string
		change func(*PeerRun)
		want   string // in the one guarantee broken; "" for none
	}{
		{"all kept", func(*PeerRun) {}, ""},
		{"a unit unsold", func(r *PeerRun) { r.Created, r.Sold, r.Journaled, r.SoldOut = units-1, units-1, units-1, 91 }, "answered 201"},
		{"books disagree", func(r *PeerRun) { r.Sold = units - 1 }, "gone from the stock"},
		{"a 201 not journaled", func(r *PeerRun) { r.Journaled = units - 1 }, "journal rows"},
		{"a 503", func(r *PeerRun) { r.SoldOut, r.Failed = 89, 1 }, "5xx"},
		{"a 401", func(r *PeerRun) { r.SoldOut, r.Other = 89, 1 }, "neither taken nor told sold out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := kept
			tc.change(&run)
			got := flashgateBroken(run, units)
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("flashgateBroken = %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("flashgateBroken = %q, want one containing %q", got, tc.want)
			}
		})
	}
	if got := flashgateBroken(PeerRun{Created: units + 1, Sold: units + 1, Journaled: units + 1}, units); len(got) != 2 {
		t.Errorf("flashgateBroken(oversold) = %q, want the 201s and the stock named", got)
	}
	if got := peerBroken(PeerRun{Created: 3, Sold: units + 1}, units); len(got) != 1 || !strings.Contains(got[0], "sold 11 of a stock of 10") {
		t.Errorf("peerBroken(oversold) = %q, want the stock named", got)
	}

	rep := Report{Peers: &PeersReport{Units: units, Accounts: 100, Conns: 4, SeckillRatio: 5, SerializableRatio: 50,
		SeckillGoal: PeerSeckillGoal, SerializableGoal: PeerSerializableGoal,
		Rounds: []PeerRound{{Round: 1, Flashgate: kept, Seckill: PeerRun{Design: PeerSeckill}, Serializable: PeerRun{Design: PeerSerializable}}}}}
	for _, tc := range []struct {
		kept bool
		want string
	}{{true, "goal >= 2.00 with every guarantee kept: met"}, {false, "goal >= 2.00 with every guarantee kept: NOT met"}} {
		rep.Peers.GuaranteesKept = tc.kept
		var b strings.Builder
		if err := rep.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("guarantees kept %v: table lacks %q:\n%s", tc.kept, tc.want, b.String())
		}
	}
}

func TestValidatePeers(t *testing.T) {
	base := Config{
		RedisURL: testenv.DefaultRedisURL, PostgresURL: testenv.DefaultPostgresURL,
		ScriptReserves: 1, ScriptWorkers: 1, HTTPRequests: 1, HTTPConns: 1, Rounds: 1, Timeout: time.Minute,
		Reserver:       []reservescript.ReserverOptions{{}},
		RedisBenchmark: RedisBenchmarkOptions{Clients: 1, Pipeline: 1, KeySpace: 1},
		Peers:          true, PeerUnits: 1000, PeerAccounts: 20_000, PeerConns: 200,
	}
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		wantErr bool
	}{
		{"the issue's figures", func(*Config) {}, false},
		{"as many accounts as units", func(c *Config) { c.PeerAccounts = c.PeerUnits }, false},
		{"fewer accounts than units", func(c *Config) { c.PeerAccounts = c.PeerUnits - 1 }, true},
		{"no units", func(c *Config) { c.PeerUnits = 0 }, true},
		{"no connections", func(c *Config) { c.PeerConns = 0 }, true},
		{"peers off, nothing else", func(c *Config) { c.Peers = false }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.change(&c)
			if err := c.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
