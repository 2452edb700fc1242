package edgetest

// This file puts a sale's line into a test's Redis as the edge's line
// keeper would, for the tests that run the line's scripts without a keeper
// (line, admission).

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

// LineSeed is the draw seed ReadyLine gives every line.
var LineSeed = []byte("0123456789abcdef0123456789abcdef")

// OpenCeiling is a ceiling no test reaches.
const OpenCeiling = 1 << 40

// ReadyLine puts sale's line into Redis as a restore from the origin would, at
// rate, with ceilings no test reaches and an empty pre-queue sealed, so the
// scripts run as they do in a sale whose line is kept.
func ReadyLine(t testing.TB, r *testenv.Redis, sale string, rate float64) {
	t.Helper()
	RestoreLine(t, r, sale, line.Durable{RatePerSecond: rate, PreCeiling: OpenCeiling, PostCeiling: OpenCeiling, ServingCeiling: OpenCeiling, Drawn: true})
}

// RestoreLine puts sale's line back from d (with LineSeed when d has none), as a
// restore after a loss would, and reports whether it restored.
func RestoreLine(t testing.TB, r *testenv.Redis, sale string, d line.Durable) bool {
	t.Helper()
	if d.Seed == nil {
		d.Seed = LineSeed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := line.NewLines(r.Client, line.NewKeys(r.Prefix), nil).Restore(ctx, sale, "e-"+testenv.RandomHex(4), d)
	if err != nil {
		t.Fatalf("Restore(%s) = %v", sale, err)
	}
	return got != line.Whole
}

// FillLine sets a sale's line to length shoppers, all after the start.
func FillLine(t testing.TB, r *testenv.Redis, sale string, length int64) {
	t.Helper()
	if err := r.Client.Set(context.Background(), line.NewKeys(r.Prefix).Post(sale), length, 0).Err(); err != nil {
		t.Fatalf("SET post = %v", err)
	}
}

// settingsVersion numbers the settings changes tests make, as the origin does.
var settingsVersion atomic.Int64

// SetLineSettings changes sale's rate and/or pause switch as an admin PUT
// does once the origin took it (nil keeps the current value). It leaves
// the serving ceiling where it is (a block of OpenCeiling), so the cursor's tests
// see the settings alone.
func SetLineSettings(t testing.TB, r *testenv.Redis, sale string, rate *float64, paused *bool) line.Applied {
	t.Helper()
	return SetLineSettingsAt(t, r, nil, sale, rate, paused)
}

// SetLineSettingsAt is SetLineSettings on c's time (nil: Redis's), for
// tests whose cursor runs on a fake clock.
func SetLineSettingsAt(t testing.TB, r *testenv.Redis, c clock.Clock, sale string, rate *float64, paused *bool) line.Applied {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lines := line.NewLines(r.Client, line.NewKeys(r.Prefix), c)
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
	st, err := lines.Settings(ctx, sale, line.Settings{RatePerSecond: nr, Paused: np, Version: settingsVersion.Add(1) + time.Now().UnixNano()},
		OpenCeiling, line.Seen{})
	if err != nil {
		t.Fatalf("Settings(%s) = %v", sale, err)
	}
	return st
}
