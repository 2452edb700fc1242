// Package queuetest puts a sale's line into a test's Redis as the edge's
// line keeper would, for the tests of the packages that run the line's
// scripts (queue, admission).
package queuetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/queue"
	"github.com/flashgate/flashgate/internal/testenv"
)

// Seed is the draw seed Ready gives every line.
var Seed = []byte("0123456789abcdef0123456789abcdef")

// Open is a ceiling no test reaches.
const Open = 1 << 40

// Ready puts sale's line into Redis as a restore from the origin would, at
// rate, with ceilings no test reaches and an empty pre-queue sealed, so the
// scripts run as they do in a sale whose line is kept.
func Ready(t testing.TB, r *testenv.Redis, sale string, rate float64) {
	t.Helper()
	Restore(t, r, sale, queue.Durable{RatePerSecond: rate, PreCeiling: Open, PostCeiling: Open, ServingCeiling: Open, Drawn: true})
}

// Restore puts sale's line back from d (with Seed when d has none), as a
// restore after a loss would, and reports whether it restored.
func Restore(t testing.TB, r *testenv.Redis, sale string, d queue.Durable) bool {
	t.Helper()
	if d.Seed == nil {
		d.Seed = Seed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := queue.NewLines(r.Client, queue.NewKeys(r.Prefix)).Restore(ctx, sale, "e-"+testenv.RandomHex(4), d)
	if err != nil {
		t.Fatalf("Restore(%s) = %v", sale, err)
	}
	return got != queue.Whole
}

// Fill sets a sale's line to length shoppers, all after the start.
func Fill(t testing.TB, r *testenv.Redis, sale string, length int64) {
	t.Helper()
	if err := r.Client.Set(context.Background(), queue.NewKeys(r.Prefix).Post(sale), length, 0).Err(); err != nil {
		t.Fatalf("SET post = %v", err)
	}
}

// settingsVersion numbers the settings changes tests make, as the origin does.
var settingsVersion atomic.Int64

// SetSettings changes sale's rate and/or pause switch as an admin PUT
// does once the origin took it (nil keeps the current value). It leaves
// the serving ceiling where it is (a block of Open), so the cursor's tests
// see the settings alone.
func SetSettings(t testing.TB, r *testenv.Redis, sale string, rate *float64, paused *bool) queue.Applied {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lines := queue.NewLines(r.Client, queue.NewKeys(r.Prefix))
	cur, err := lines.Current(ctx, sale)
	if err != nil {
		t.Fatalf("Current(%s) = %v", sale, err)
	}
	nr, np := cur.RatePerSecond, cur.Paused
	if rate != nil {
		nr = *rate
	}
	if paused != nil {
		np = *paused
	}
	st, err := lines.Settings(ctx, sale, queue.Settings{RatePerSecond: nr, Paused: np, Version: settingsVersion.Add(1) + time.Now().UnixNano()},
		Open, queue.Seen{})
	if err != nil {
		t.Fatalf("Settings(%s) = %v", sale, err)
	}
	return st
}
