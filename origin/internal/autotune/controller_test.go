package autotune_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/internal/autotune"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/origintest"
)

// signals is a Signals that answers reading, after running during (nil:
// nothing) as if it happened while the back end was read.
type signals struct {
	reading autotune.Reading
	during  func()
}

func (s *signals) Read(context.Context, string) (autotune.Reading, error) {
	if s.during != nil {
		s.during()
	}
	return s.reading, nil
}

// The controller against a real ledger: it raises the rate of an open sale
// with autotune on while the back end is healthy, lowers it on overload,
// stays within the bounds, records each change with its reason; it never
// overrides a change ops made meanwhile, leaves sales with autotune off
// alone, and does nothing while another origin holds its lock — which the
// tuning origin keeps from period to period.
func TestController(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t), func(c *app.Config) { c.AutotunePeriod = time.Hour })
	ctx := context.Background()
	lines := ledger.New(o.Env.DB)
	sale, other := "tune-"+testenv.RandomHex(3), "manual-"+testenv.RandomHex(3)
	for _, id := range []string{sale, other} {
		o.MustCreateSale(t, origintest.OpenSale(id, 100, 600))
		if _, err := lines.EnsureLine(ctx, id, strings.Repeat("a", 64), 100, false); err != nil {
			t.Fatal(err)
		}
	}
	on, lo, hi := true, 50.0, 250.0
	if _, err := lines.SetLineSettings(ctx, sale, ledger.SettingsChange{Autotune: &on, AutotuneMin: &lo, AutotuneMax: &hi, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	healthy := autotune.Reading{Reserves: 50, ReserveP99: 20 * time.Millisecond, Available: 80}
	sig := &signals{reading: healthy}
	c := autotune.New(lines, sig, autotune.Options{}, slog.New(slog.NewTextHandler(testenv.NewLogWriter(t), nil)), nil)
	rate := func(id string) (float64, bool) {
		t.Helper()
		l, err := lines.Line(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return l.RatePerSecond, l.Autotune
	}
	tune := func() {
		t.Helper()
		if err := c.Tune(ctx); err != nil {
			t.Fatal(err)
		}
	}

	for _, want := range []float64{110, 120, 130} {
		tune()
		if got, _ := rate(sale); got != want {
			t.Fatalf("rate after a healthy period = %v, want %v", got, want)
		}
	}
	if got, _ := rate(other); got != 100 {
		t.Errorf("the sale without autotune = %v, want 100 (untouched)", got)
	}
	sig.reading.ReserveP99 = 900 * time.Millisecond
	for _, want := range []float64{130 * 0.7, 130 * 0.7 * 0.7, 50} { // the last under the floor
		tune()
		if got, _ := rate(sale); got != want {
			t.Fatalf("rate after an overloaded period = %v, want %v", got, want)
		}
	}
	changes, err := lines.AdmissionChanges(ctx, sale, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 7 || !strings.HasPrefix(changes[0].Actor, "autotune: reserve p99 900ms") ||
		changes[0].After.RatePerSecond != 50 || changes[6].Actor != "ops" || changes[3].Actor != "autotune: healthy" {
		t.Errorf("changes = %+v, want ops's switch, three increases and three decreases, each with its reason", changes)
	}

	// Ops set the rate by hand while the controller reads: theirs stands.
	sig.reading = healthy
	sig.during = func() {
		hand, off := 42.0, false
		if _, err := lines.SetLineSettings(ctx, sale, ledger.SettingsChange{RatePerSecond: &hand, Autotune: &off, Actor: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	tune()
	if got, auto := rate(sale); got != 42 || auto {
		t.Errorf("rate after ops set it during a period = %v (autotune %v), want 42 by hand", got, auto)
	}
	sig.during = nil
	tune()
	if got, _ := rate(sale); got != 42 {
		t.Errorf("rate with autotune off = %v, want 42", got)
	}

	// Another origin tuning: nothing here.
	if _, err := lines.SetLineSettings(ctx, sale, ledger.SettingsChange{Autotune: &on, AutotuneMin: &lo, AutotuneMax: &hi, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	c.Resign() // this origin holds the lock from period to period until it lets go
	held, err := lines.Hold(ctx, "autotune")
	if err != nil || held == nil {
		t.Fatalf("Hold = %v, %v", held, err)
	}
	tune()
	held.Unlock()
	if got, _ := rate(sale); got != 42 {
		t.Errorf("rate while another origin holds the lock = %v, want 42", got)
	}
	tune()
	if got, _ := rate(sale); got != 52 {
		t.Errorf("rate once the lock is free = %v, want 52 (a healthy step from 42)", got)
	}
	// Having tuned, this origin stays the tuning one: another origin's
	// periods in between do nothing, so no signal is acted on twice.
	second := autotune.New(lines, sig, autotune.Options{}, slog.New(slog.NewTextHandler(testenv.NewLogWriter(t), nil)), nil)
	defer second.Resign()
	if err := second.Tune(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rate(sale); got != 52 {
		t.Errorf("rate after another origin's period = %v, want 52 (untouched)", got)
	}
	tune()
	if got, _ := rate(sale); got != 62 {
		t.Errorf("rate after this origin's next period = %v, want 62", got)
	}
	c.Resign()
	if err := second.Tune(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rate(sale); got != 72 {
		t.Errorf("rate once this origin let go = %v, want 72 (the other tuning)", got)
	}
}
