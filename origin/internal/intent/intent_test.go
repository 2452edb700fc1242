package intent

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	entry := func(change func(map[string]any)) map[string]any {
		v := map[string]any{
			FieldKind: "reserve", FieldReservation: "r1", FieldAccount: "u1", FieldSKU: "a",
			FieldIdempotency: "k1", FieldExpiresMs: "60000", FieldAtMs: "1000",
		}
		if change != nil {
			change(v)
		}
		return v
	}
	want := Intent{ID: "1-0", Kind: Reserve, ReservationID: "r1", Account: "u1", SKU: "a", IdempotencyKey: "k1",
		ExpiresAt: time.UnixMilli(60000).UTC(), At: time.UnixMilli(1000).UTC()}
	if got, err := Parse("1-0", entry(nil)); err != nil || got != want {
		t.Errorf("Parse(reserve) = %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []struct {
		name   string
		change func(map[string]any)
	}{
		{"unknown kind", func(v map[string]any) { v[FieldKind] = "steal" }},
		{"no reservation", func(v map[string]any) { delete(v, FieldReservation) }},
		{"no account", func(v map[string]any) { delete(v, FieldAccount) }},
		{"no sku", func(v map[string]any) { delete(v, FieldSKU) }},
		{"bad expiry", func(v map[string]any) { v[FieldExpiresMs] = "soon" }},
		{"no time", func(v map[string]any) { delete(v, FieldAtMs) }},
	} {
		if got, err := Parse("1-0", entry(c.change)); err == nil {
			t.Errorf("Parse(%s) = %+v, nil; want an error", c.name, got)
		}
	}
}
