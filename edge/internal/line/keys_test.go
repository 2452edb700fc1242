package line_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestScriptsWriteTheNamedFields: the cursor and line hashes hold exactly
// the fields keys.go names after each script that writes them has run
// (restore, advance, raise, seal, settings, join), and what the scripts
// wrote reads back through the Go readers, so the Lua and Go spellings of
// the fields cannot drift apart.
func TestScriptsWriteTheNamedFields(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	lines := line.NewLines(r.Client, keys, nil)
	c := admission.NewCursor(r.Client, keys, nil)
	j := line.NewJoiner(r.Client, keys, line.JoinerOptions{})
	t.Cleanup(j.Close)
	past := time.Now().Add(-time.Minute)
	tick := func() line.State {
		t.Helper()
		if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 10}}); err != nil {
			t.Fatalf("Tick = %v", err)
		}
		st, _ := c.State("s")
		return st
	}
	fields := func(key string) []string {
		t.Helper()
		m, err := r.Client.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(m))
		for f := range m {
			out = append(out, f)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(names ...string) []string { slices.Sort(names); return names }
	cursor := sorted(line.CursorNowServing, line.CursorLastMs, line.CursorRate, line.CursorPaused, line.CursorChallengeBits, line.CursorSettingsVersion)
	lineFields := sorted(line.LineEpoch, line.LinePreCeiling, line.LinePostCeiling, line.LineServingCeiling, line.LineReplID)
	sealed := sorted(append(slices.Clone(lineFields), line.LineDrawSize)...)
	// The advance adds the checkout's answer rate.
	advanced := sorted(append(slices.Clone(cursor), line.CursorAnswered, line.CursorAnsweredMs, line.CursorAnsweredThen, line.CursorAnswerRate)...)
	ramped := sorted(append(slices.Clone(advanced), line.CursorRampMs, line.CursorRampFrom)...)
	for _, step := range []struct {
		name         string
		run          func()
		cursor, line []string
	}{
		{"restore", func() {
			if _, err := lines.Restore(ctx, "s", "e1", line.Durable{Seed: testSeed, RatePerSecond: 1, SettingsVersion: 1,
				PreCeiling: 10, PostCeiling: 10, ServingCeiling: 10}); err != nil {
				t.Fatalf("Restore = %v", err)
			}
		}, cursor, lineFields},
		// A line restored where INFO was not allowed has no replid: the
		// cursor's advance writes it.
		{"advance", func() {
			if err := r.Client.HDel(ctx, keys.Line("s"), line.LineReplID).Err(); err != nil {
				t.Fatal(err)
			}
			if st := tick(); st.Lost {
				t.Fatalf("State after a tick = %+v, want the line whole", st)
			}
		}, advanced, lineFields},
		{"raise", func() {
			if _, err := lines.Raise(ctx, "s", line.Ceilings{Pre: 20, Post: 30, Serving: 40, SettingsVersion: 1}); err != nil {
				t.Fatalf("Raise = %v", err)
			}
		}, advanced, lineFields},
		{"seal", func() {
			if n, err := lines.Seal(ctx, "s", 3); n != 3 || err != nil {
				t.Fatalf("Seal(3) = %d, %v; want 3", n, err)
			}
		}, advanced, sealed},
		{"settings", func() {
			if _, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 7, Paused: true, Version: 2}, edgetest.OpenCeiling, line.Seen{}); err != nil {
				t.Fatalf("Settings = %v", err)
			}
		}, advanced, sealed},
		// A resume starts a ramp.
		{"resume", func() {
			if _, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 7, Paused: false, Version: 3}, edgetest.OpenCeiling, line.Seen{}); err != nil {
				t.Fatalf("Settings = %v", err)
			}
		}, ramped, sealed},
		{"pause again", func() {
			if _, err := lines.Settings(ctx, "s", line.Settings{RatePerSecond: 7, Paused: true, Version: 4}, edgetest.OpenCeiling, line.Seen{}); err != nil {
				t.Fatalf("Settings = %v", err)
			}
		}, ramped, sealed},
		{"join", func() {
			if p, _, err := j.Join(ctx, "s", past, "a"); err != nil || p.Position != 4 {
				t.Fatalf("Join = %+v, %v; want position 4, after the draw of 3", p, err)
			}
		}, ramped, sealed},
	} {
		step.run()
		if got := fields(keys.Cursor("s")); !slices.Equal(got, step.cursor) {
			t.Errorf("cursor hash fields after %s = %v, want %v", step.name, got, step.cursor)
		}
		if got := fields(keys.Line("s")); !slices.Equal(got, step.line) {
			t.Errorf("line hash fields after %s = %v, want %v", step.name, got, step.line)
		}
	}

	// The answer rate's sample, a second or more after the last one, reads
	// and writes the named fields: 5 answers over the 2 s since, 2.5/s.
	ago := strconv.FormatInt(time.Now().Add(-2*time.Second).UnixMilli(), 10)
	if err := r.Client.HSet(ctx, keys.Cursor("s"), line.CursorAnsweredMs, ago, line.CursorAnsweredThen, 0, line.CursorAnswered, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Tick(ctx, []line.Tick{{Sale: "s", StartsAt: past, Available: 10, Answered: 5}}); err != nil {
		t.Fatalf("Tick = %v", err)
	}
	got, err := r.Client.HMGet(ctx, keys.Cursor("s"), line.CursorAnswered, line.CursorAnsweredThen, line.CursorAnswerRate).Result()
	if err != nil {
		t.Fatal(err)
	}
	if rate, _ := strconv.ParseFloat(fmt.Sprint(got[2]), 64); got[0] != "5" || got[1] != "5" || rate < 2.2 || rate > 2.5 {
		t.Errorf("cursor answered, answered_then, answer_rate after 5 answers in 2 s = %v, want 5, 5, about 2.5", got)
	}
	if st, _ := c.State("s"); st.AnswerRate < 2.2 || st.AnswerRate > 2.5 {
		t.Errorf("State().AnswerRate after 5 answers in 2 s = %v, want about 2.5 (the script's reply)", st.AnswerRate)
	}

	st := tick()
	if st.Lost || st.PreQueue != 3 || st.Post != 1 || st.PreCeiling != 20 || st.PostCeiling != 30 || st.ServingCeiling != 40 ||
		!st.Drawn || st.DrawSize != 3 || st.RatePerSecond != 7 || !st.Paused || st.SettingsVersion != 4 {
		t.Errorf("State read by advance.lua = %+v, want pre 3, post 1, ceilings 20/30/40, draw 3, paused at 7 (version 4)", st)
	}
	cur, err := lines.Current(ctx, "s")
	if err != nil || cur.Pre != 3 || cur.Post != 1 || cur.NowServing != st.NowServing || !cur.HasRate || cur.RatePerSecond != 7 || !cur.Paused {
		t.Errorf("Current = %+v, %v; want pre 3, post 1, now_serving %d, paused at 7", cur, err, st.NowServing)
	}
}
