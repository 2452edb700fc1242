package apidoc

import (
	"strings"
	"testing"
)

// A row's first cell names its routes however the doc words it.
func TestParseRouteCell(t *testing.T) {
	tests := []struct {
		cell       string
		want       []string // spelled, key
		devOnly    bool
		alsoPublic bool
		err        bool
	}{
		{cell: "`POST /v1/orders`, `GET /v1/orders/{id}`, `GET /v1/reservations/{id}`",
			want: []string{"POST /v1/orders", "POST /v1/orders", "GET /v1/orders/{id}", "GET /v1/orders/*", "GET /v1/reservations/{id}", "GET /v1/reservations/*"}},
		{cell: "`GET /` and `GET /static/...`", want: []string{"GET /", "GET /", "GET /static/...", "GET /static/**"}},
		{cell: "`GET`/`HEAD /` and `GET/HEAD /static/...`",
			want: []string{"GET /", "GET /", "HEAD /", "HEAD /", "GET /static/...", "GET /static/**", "HEAD /static/...", "HEAD /static/**"}},
		{cell: "`GET /readyz`, `GET /healthz` (also on the public listener, no auth)",
			want: []string{"GET /readyz", "GET /readyz", "GET /healthz", "GET /healthz"}, alsoPublic: true},
		{cell: "`POST /v1/sales/{sale_id}/reserve` `{sku, idempotency_key}`",
			want: []string{"POST /v1/sales/{sale_id}/reserve", "POST /v1/sales/*/reserve"}},
		{cell: "`GET /v1/lines/{sale_id}`; `PUT /v1/lines/{sale_id}/settings` `{rate_per_s?, paused?}`",
			want: []string{"GET /v1/lines/{sale_id}", "GET /v1/lines/*", "PUT /v1/lines/{sale_id}/settings", "PUT /v1/lines/*/settings"}},
		{cell: "`POST /v1/dev/login` (dev mode only)", want: []string{"POST /v1/dev/login", "POST /v1/dev/login"}, devOnly: true},
		{cell: "a row about `FLASHGATE_DEV`", want: nil},
		{cell: "`FETCH /v1/sales`", err: true},
		{cell: "`GET` and `HEAD /`", err: true},
		{cell: "`GET /v1/sales/{sale_id`", err: true},
		{cell: "`GET /static/.../x`", err: true},
	}
	for _, tt := range tests {
		routes, err := parseRouteCell(tt.cell)
		if tt.err {
			if err == nil {
				t.Errorf("parseRouteCell(%q) = %v, want an error", tt.cell, routes)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseRouteCell(%q): %v", tt.cell, err)
			continue
		}
		var got []string
		for _, r := range routes {
			got = append(got, r.spelled, r.key)
			if r.devOnly != tt.devOnly || r.alsoPublic != tt.alsoPublic {
				t.Errorf("parseRouteCell(%q): %s devOnly=%v alsoPublic=%v, want %v %v", tt.cell, r.spelled, r.devOnly, r.alsoPublic, tt.devOnly, tt.alsoPublic)
			}
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("parseRouteCell(%q) = %q, want %q", tt.cell, got, tt.want)
		}
	}
}
