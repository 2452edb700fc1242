package admission_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
)

// oneSale is an origin that lists one sale and answers its snapshot.
type oneSale snapshot.Sale

func (o oneSale) Get(path string, dst []byte) (int, []byte, error) {
	if path == "/v1/sales" {
		b, err := json.Marshal(map[string]any{"sales": []map[string]string{{"sale_id": o.SaleID}}})
		return 200, b, err
	}
	if path != "/v1/sales/"+o.SaleID {
		return 404, dst, nil
	}
	b, err := json.Marshal(snapshot.Sale(o))
	return 200, b, err
}

// seededLines is a line keeper that starts nothing and knows every sale's
// seed: edgetest.ReadyLine puts the line into Redis instead.
type seededLines struct{}

func (seededLines) Maintain([]line.Tick)       {}
func (seededLines) Seed(string) ([]byte, bool) { return edgetest.LineSeed, true }

var _ admission.Lines = seededLines{}

// gauge reads the named gauge's value for a sale from reg; false when the
// sale has none.
func gauge(t *testing.T, reg *prometheus.Registry, name, sale string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sale" && l.GetValue() == sale {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestAdmissionSettingGauges: each tick sets flashgate_edge_admission_paused
// and flashgate_edge_admission_rate to the sale's settings as the tick read
// them from Redis: 1 after a pause and 0 after the resume, and the rate set
// (admissions a second) through a change.
func TestAdmissionSettingGauges(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	sale := "gauges-" + edgetest.RandomID(t, 3)
	edgetest.ReadyLine(t, r, sale, 50)
	edgetest.FillLine(t, r, sale, 1000)
	origin := oneSale{SaleID: sale, Status: "open", StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
		SKUs: []snapshot.SKU{{SKU: "a", AvailableHint: 100}}}
	snapshots := snapshot.New(origin, slog.New(slog.DiscardHandler), snapshot.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := snapshots.Refresh(ctx); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	reg := prometheus.NewRegistry()
	c := admission.New(admission.NewCursor(r.Client, line.NewKeys(r.Prefix), nil), snapshots, seededLines{},
		admission.Options{StaleAfter: time.Second, SnapshotStaleAfter: time.Minute}, reg)

	yes, no, slower := true, false, 20.0
	steps := []struct {
		name       string
		rate       *float64
		paused     *bool
		wantPaused float64
		wantRate   float64
	}{
		{"running at the rate restored", nil, nil, 0, 50},
		{"paused", nil, &yes, 1, 50},
		{"rate lowered while paused", &slower, nil, 1, 20},
		{"resumed", nil, &no, 0, 20},
	}
	for _, s := range steps {
		if s.rate != nil || s.paused != nil {
			edgetest.SetLineSettings(t, r, sale, s.rate, s.paused)
		}
		if err := c.Tick(ctx); err != nil {
			t.Fatalf("%s: Tick = %v", s.name, err)
		}
		if got, ok := gauge(t, reg, "flashgate_edge_admission_paused", sale); !ok || got != s.wantPaused {
			t.Errorf("%s: flashgate_edge_admission_paused{sale=%q} = %v (present %v), want %v", s.name, sale, got, ok, s.wantPaused)
		}
		if got, ok := gauge(t, reg, "flashgate_edge_admission_rate", sale); !ok || got != s.wantRate {
			t.Errorf("%s: flashgate_edge_admission_rate{sale=%q} = %v (present %v), want %v", s.name, sale, got, ok, s.wantRate)
		}
	}
}
