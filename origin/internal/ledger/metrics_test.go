package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// An observed store times each request-path call once under its op, a call
// that found nothing included; the series are the fixed ops and no others.
func TestNewObservedTimesTheRequestPathsCalls(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := NewObserved(newStore(t, 1, 0).pool, reg)
	ctx := context.Background()
	for range 2 {
		if _, err := s.Order(ctx, "o_missing"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Order(o_missing) = %v, want ErrNotFound", err)
		}
	}
	if _, err := s.Reservation(ctx, "r_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Reservation(r_missing) = %v, want ErrNotFound", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "flashgate_origin_postgres_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	if len(got) != int(opCount) {
		t.Errorf("flashgate_origin_postgres_seconds has %d series (%v), want one per op (%d)", len(got), got, opCount)
	}
	if got["order"] != 2 || got["reservation"] != 1 || got["create_order"] != 0 {
		t.Errorf("flashgate_origin_postgres_seconds counts = %v, want order 2, reservation 1, the rest 0", got)
	}
}
