package admission_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// steps reads a sale's steps list.
func steps(t *testing.T, r *edgetest.Redis, sale string) []string {
	t.Helper()
	got, err := r.Client.LRange(context.Background(), line.NewKeys(r.Prefix).Steps(sale), 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE steps = %v", err)
	}
	return got
}

// TestCursorRecordsItsSteps: each tick that moves the cursor appends one
// "<Redis ms>:<now_serving>" to the steps list, and a tick that does not
// move it (held for the checkout, paused) appends nothing.
func TestCursorRecordsItsSteps(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	edgetest.ReadyLine(t, r, "s", 1000)
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
	tk := line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	tick(t, c, tk) // an empty line: nothing to admit
	edgetest.FillLine(t, r, "s", 100_000)
	if got := steps(t, r, "s"); len(got) != 0 {
		t.Fatalf("steps before the cursor moved = %v, want none", got)
	}
	var want []string
	var last int64
	for range 5 {
		f.Advance(20 * time.Millisecond)
		before := f.Now().UnixMilli()
		st := tick(t, c, tk)
		after := f.Now().UnixMilli()
		if st.NowServing == last {
			t.Fatalf("the cursor stood at %d after 20 ms at 1000/s", last)
		}
		last = st.NowServing
		got := steps(t, r, "s")
		if len(got) != len(want)+1 {
			t.Fatalf("steps after %d moves = %v, want %d", len(want)+1, got, len(want)+1)
		}
		ms, serving, ok := strings.Cut(got[len(got)-1], ":")
		at, _ := strconv.ParseInt(ms, 10, 64)
		if !ok || serving != strconv.FormatInt(st.NowServing, 10) || at < before || at > after {
			t.Errorf("step recorded = %q, want <ms in %d..%d>:%d", got[len(got)-1], before, after, st.NowServing)
		}
		want = got
	}
	held := tk
	held.Hold = true
	f.Advance(20 * time.Millisecond)
	tick(t, c, held)
	yes := true
	edgetest.SetLineSettingsAt(t, r, f, "s", nil, &yes)
	f.Advance(20 * time.Millisecond)
	tick(t, c, tk)
	if got := steps(t, r, "s"); !slices.Equal(got, want) {
		t.Errorf("steps after a held and a paused tick = %v, want %v (no move, no step)", got, want)
	}
}

// TestCursorStepsCapped: the steps list keeps its first moves up to the
// cap; later moves still move the cursor but go unrecorded.
func TestCursorStepsCapped(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	edgetest.ReadyLine(t, r, "s", 1000)
	f := fakeClock(t, r)
	c := admission.NewCursor(r.Client, line.NewKeys(r.Prefix), f)
	c.SetMaxSteps(3)
	tk := line.Tick{Sale: "s", StartsAt: f.Now().Add(-time.Minute), Available: 1_000_000}
	tick(t, c, tk)
	edgetest.FillLine(t, r, "s", 100_000)
	var first []string
	var st line.State
	for i := range 6 {
		f.Advance(20 * time.Millisecond)
		st = tick(t, c, tk)
		if i == 2 {
			first = steps(t, r, "s")
		}
	}
	got := steps(t, r, "s")
	if len(first) != 3 || !slices.Equal(got, first) {
		t.Errorf("steps after 6 moves at a cap of 3 = %v, want the first 3 %v", got, first)
	}
	a, err := c.Reached(context.Background(), "s", time.Now().Add(time.Hour))
	if err != nil || !a.Capped || a.Steps != 3 || a.Through() >= st.NowServing {
		t.Errorf("Reached at the cap = %d steps through %d (capped %v), %v; want capped, 3 steps, through below the cursor's %d",
			a.Steps, a.Through(), a.Capped, err, st.NowServing)
	}
}

// TestReachedAt: a place is reached by the first step that took
// now_serving to it or past it; steps at or after the moment (the sale's
// end) do not count.
func TestReachedAt(t *testing.T) {
	t.Parallel()
	ms := func(s int) string {
		return strconv.FormatInt(time.Date(2030, 1, 1, 12, 0, s, 0, time.UTC).UnixMilli(), 10)
	}
	at := func(s int) time.Time { return time.Date(2030, 1, 1, 12, 0, s, 0, time.UTC) }
	list := []string{ms(1) + ":3", ms(2) + ":3", ms(3) + ":7", ms(4) + ":10", ms(10) + ":20"}
	a, err := admission.NewReached(list, at(10), false)
	if err != nil {
		t.Fatalf("NewReached = %v", err)
	}
	if a.Steps != 4 || a.Through() != 10 || a.Capped {
		t.Errorf("Reached before 12:00:10 = %d steps through %d (capped %v), want 4 through 10", a.Steps, a.Through(), a.Capped)
	}
	for _, tc := range []struct {
		place int64
		want  time.Time // zero: never reached
	}{{0, time.Time{}}, {1, at(1)}, {3, at(1)}, {4, at(3)}, {7, at(3)}, {8, at(4)}, {10, at(4)}, {11, time.Time{}}, {20, time.Time{}}} {
		got, ok := a.At(tc.place)
		if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
			t.Errorf("At(%d) = %v, %v; want %v", tc.place, got, ok, tc.want)
		}
	}
	if _, err := admission.NewReached([]string{"12:x"}, at(10), false); err == nil {
		t.Errorf("NewReached of a malformed step = nil error, want one")
	}
	full, _ := admission.NewReached(list[:4], at(10), true)
	cut, _ := admission.NewReached(list, at(10), true)
	if !full.Capped || cut.Capped {
		t.Errorf("Capped of a full list before the end = %v, of one that went on past the end = %v; want true, false", full.Capped, cut.Capped)
	}
}

// TestCursorScanPlaces: a scan of the places hash gives every account its
// place as the joins handed it out, over as many batches as it takes.
func TestCursorScanPlaces(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	want := map[string]line.Place{}
	kv := []any{}
	for i := range 2500 {
		p := line.Place{Position: int64(i + 1)}
		v := strconv.Itoa(i + 1)
		if i%3 == 0 {
			p, v = line.Place{Pre: true, Index: int64(i + 1)}, "p"+strconv.Itoa(i+1)
		}
		a := fmt.Sprintf("acct-%d", i)
		want[a] = p
		kv = append(kv, a, v)
	}
	if err := r.Client.HSet(ctx, keys.Places("s"), kv...).Err(); err != nil {
		t.Fatal(err)
	}
	c := admission.NewCursor(r.Client, keys, nil)
	got := map[string]line.Place{}
	var cursor uint64
	batches := 0
	for {
		next, err := c.ScanPlaces(ctx, "s", cursor, func(a string, p line.Place) { got[a] = p })
		if err != nil {
			t.Fatalf("ScanPlaces = %v", err)
		}
		batches++
		if next == 0 {
			break
		}
		cursor = next
	}
	if len(got) != len(want) || batches < 2 {
		t.Fatalf("ScanPlaces read %d accounts in %d batches, want %d in several", len(got), batches, len(want))
	}
	for a, p := range want {
		if got[a] != p {
			t.Errorf("ScanPlaces gave %s place %+v, want %+v", a, got[a], p)
		}
	}
	if err := r.Client.HSet(ctx, keys.Places("s"), "bad", "p-x").Err(); err != nil {
		t.Fatal(err)
	}
	failed := false
	for cursor = 0; ; {
		next, err := c.ScanPlaces(ctx, "s", cursor, func(string, line.Place) {})
		if err != nil {
			failed = true
			break
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if !failed {
		t.Errorf("ScanPlaces over a malformed place = no error, want one")
	}
}
