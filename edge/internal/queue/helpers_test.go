package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/queue"
)

// testSeed is the seed ready gives every line.
var testSeed = []byte("0123456789abcdef0123456789abcdef")

// open is a ceiling no test reaches.
const open = 1 << 40

// ready puts sale's line into Redis as a restore from the origin would, at
// rate, with ceilings no test reaches and an empty pre-queue sealed, so the
// scripts run as they do in a sale whose line is kept.
func ready(t testing.TB, r *edgetest.Redis, sale string, rate float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := queue.NewLines(r.Client, queue.NewKeys(r.Prefix)).Restore(ctx, sale, "test-epoch", queue.Durable{
		Seed: testSeed, RatePerSecond: rate, PreCeiling: open, PostCeiling: open, ServingCeiling: open, Drawn: true,
	})
	if err != nil {
		t.Fatalf("Restore(%s) = %v", sale, err)
	}
}

// settingsVersion numbers the settings changes tests make, as the origin does.
var settingsVersion atomic.Int64

// setSettings changes sale's rate and/or pause switch as an admin PUT
// does once the origin took it (nil keeps the current value).
func setSettings(t testing.TB, r *edgetest.Redis, sale string, rate *float64, paused *bool) queue.State {
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
	st, err := lines.Settings(ctx, sale, nr, np, settingsVersion.Add(1)+time.Now().UnixNano())
	if err != nil {
		t.Fatalf("Settings(%s) = %v", sale, err)
	}
	return st
}
