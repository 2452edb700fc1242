package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/tokens"
)

// TestErrorsAnsweredAndCountedAlike: whatever a handler returns, wrapped or
// not, is answered with the code errorTable gives it and counted in the
// rejections metric under that same code; the answer carries the request
// id, and an error the table does not know is logged with the same id.
func TestErrorsAnsweredAndCountedAlike(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		logged bool
	}{
		{"a wrapped answer", fmt.Errorf("reserve: %w", errSoldOut), 409, codeSoldOut, false},
		{"an answer", errSaleClosed, 409, codeSaleClosed, false},
		{"a wrapped sentinel", fmt.Errorf("view: %w", admission.ErrUnknownSale), 404, codeUnknownSale, false},
		{"the sale not known yet", admission.ErrNotReady, 503, "please_wait", false},
		{"the line at its ceiling", fmt.Errorf("join sale s: %w", line.ErrWait), 503, "please_wait", false},
		{"a wrapped token failure", fmt.Errorf("verify: %w", tokens.ErrExpired), 401, "token_expired", false},
		{"a dependency down", errors.New("dial tcp 10.0.0.1:6379: connection refused"), 503, "please_wait", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			reg := prometheus.NewRegistry()
			s := New(Deps{Registry: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))}, Options{})
			h := s.router([]route{{fasthttp.MethodGet, []string{"fails"}, "fails",
				func(*fasthttp.RequestCtx, []string) error { return tt.err }}}, nil)
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			req.SetRequestURI("/fails")
			ctx.Init(&req, nil, nil)
			h(&ctx)

			var body struct {
				Error     string `json:"error"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
				t.Fatalf("body %q: %v", ctx.Response.Body(), err)
			}
			if ctx.Response.StatusCode() != tt.status || body.Error != tt.code {
				t.Errorf("answer = %d %s, want %d %s", ctx.Response.StatusCode(), body.Error, tt.status, tt.code)
			}
			if got, want := rejections(t, reg), map[string]float64{tt.code: 1}; !maps.Equal(got, want) {
				t.Errorf("rejections by code = %v, want %v", got, want)
			}
			id := string(ctx.Response.Header.Peek("X-Request-Id"))
			if id == "" || body.RequestID != id {
				t.Errorf("request id: header %q, body %q; want the same, not empty", id, body.RequestID)
			}
			if logged := strings.Contains(logs.String(), "request_id="+id); logged != tt.logged {
				t.Errorf("log has request_id=%s: %v, want %v; log: %s", id, logged, tt.logged, logs.String())
			}
		})
	}
}

// rejections reads flashgate_edge_rejections_total from reg by code.
func rejections(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "flashgate_edge_rejections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// An admin request without the token is refused through the same error
// table: counted under its code, with a request id.
func TestAdminRefusalsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Deps{Registry: reg, Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), AdminToken: "not-this-one"}, Options{})
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/admin/sales/s1/admission")
	ctx.Init(&req, nil, nil)
	s.Admin()(&ctx)
	if ctx.Response.StatusCode() != 401 || len(ctx.Response.Header.Peek("X-Request-Id")) == 0 {
		t.Errorf("admin request without a token = %d (X-Request-Id %q), want 401 with a request id",
			ctx.Response.StatusCode(), ctx.Response.Header.Peek("X-Request-Id"))
	}
	if got, want := rejections(t, reg), map[string]float64{"unauthorized": 1}; !maps.Equal(got, want) {
		t.Errorf("rejections by code = %v, want %v", got, want)
	}
}
