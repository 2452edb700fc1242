package benchreport

import (
	"errors"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestNewTiming(t *testing.T) {
	r := loadgen.Result{Calls: 10, Elapsed: 2 * time.Second, Labels: map[int]int{200: 7, 409: 2}, Errors: 1, Err: errors.New("boom"),
		P50: 1500 * time.Microsecond, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond}
	got := NewTiming(r, func(l int) string { return map[int]string{200: "ok", 409: "conflict"}[l] }, procstat.Usage{Process: 0.5})
	if got.PerSecond != 5 || got.P50Millis != 1.5 || got.Answers["ok"] != 7 || got.Answers["conflict"] != 2 ||
		got.Errors != 1 || got.FirstError != "boom" || got.CPU.Process != 0.5 {
		t.Errorf("NewTiming = %+v", got)
	}
	if c := Counts(got.Answers); c != "conflict 2, ok 7" {
		t.Errorf("Counts = %q, want \"conflict 2, ok 7\"", c)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
