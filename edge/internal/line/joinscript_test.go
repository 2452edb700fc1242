package line_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestJoinScriptBatches calls join.lua with batches that mix new accounts,
// known ones and accounts that appear twice in the same batch, before and
// after the start: each account keeps one place, new ones are numbered in the
// order they come, and the last value is the queue length.
func TestJoinScriptBatches(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ready(t, r, "s", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(starts time.Time, accounts ...string) []string {
		t.Helper()
		args := []any{starts.UnixMilli()}
		for _, a := range accounts {
			args = append(args, a)
		}
		got, err := line.JoinScript.Run(ctx, r.Client, []string{keys.Pre("s"), keys.Post("s"), keys.Places("s"), keys.Line("s")}, args...).StringSlice()
		if err != nil {
			t.Fatalf("join.lua %v: %v", accounts, err)
		}
		return got[:len(got)-6] // the places and the length; the counters, ceilings and epoch are other tests'

	}
	later := time.Now().Add(time.Hour)
	earlier := time.Now().Add(-time.Hour)
	steps := []struct {
		starts   time.Time
		accounts []string
		want     []string
	}{
		{later, []string{"x", "y", "x"}, []string{"p1", "p2", "p1", "2"}},
		{later, []string{"y", "z", "z", "w"}, []string{"p2", "p3", "p3", "p4", "4"}},
		{earlier, []string{"a", "b", "a", "y", "c", "b"}, []string{"5", "6", "5", "p2", "7", "6", "7"}},
		{earlier, []string{"c", "d", "d", "x"}, []string{"7", "8", "8", "p1", "8"}},
		{earlier, []string{"a"}, []string{"5", "8"}},
		{later, []string{"e"}, []string{"p5", "9"}}, // a late pre-queue join (the script trusts its caller's start)
	}
	for _, s := range steps {
		if got := run(s.starts, s.accounts...); !slices.Equal(got, s.want) {
			t.Errorf("join.lua %v = %v, want %v", s.accounts, got, s.want)
		}
	}
	if n, err := r.Client.HLen(ctx, keys.Places("s")).Result(); err != nil || n != 9 {
		t.Errorf("HLEN places = %d, %v; want 9 (one field per account)", n, err)
	}
}

// BenchmarkJoinScript measures join.lua inside Redis per join (INFO
// commandstats), for batches of new accounts after the start.
func BenchmarkJoinScript(b *testing.B) {
	r := edgetest.NewRedis(b)
	keys := line.NewKeys(r.Prefix)
	ready(b, r, "s", 1)
	ctx := context.Background()
	scriptUsec := func() float64 {
		info, err := r.Client.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
				for _, f := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(f, "usec="); ok {
						n, _ := strconv.ParseFloat(v, 64)
						return n
					}
				}
			}
		}
		return 0
	}
	n := 0
	for _, batch := range []int{1, 10, 50, 200} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			args := make([]any, batch+1)
			args[0] = time.Now().Add(-time.Hour).UnixMilli()
			before := scriptUsec()
			joins := 0
			for b.Loop() {
				for i := 1; i <= batch; i++ {
					n++
					args[i] = fmt.Sprintf("user-%09d", n)
				}
				if err := line.JoinScript.Run(ctx, r.Client, []string{keys.Pre("s"), keys.Post("s"), keys.Places("s"), keys.Line("s")}, args...).Err(); err != nil {
					b.Fatal(err)
				}
				joins += batch
			}
			b.ReportMetric((scriptUsec()-before)/float64(joins), "redis-µs/join")
		})
	}
}
