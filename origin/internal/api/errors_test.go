package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/sales"
	"github.com/flashgate/flashgate/tokens"
)

// What the services return, wrapped as they wrap it, answers with the
// contract's code; what no rule knows is please_wait and the only thing
// logged.
func TestErrorTable(t *testing.T) {
	tests := []struct {
		err      error
		status   int
		code     string
		expected bool
	}{
		{fmt.Errorf("sale s1: %w", catalog.ErrUnknownSale), 404, codeUnknownSale, true},
		{fmt.Errorf("line of sale s1: %w", ledger.ErrUnknownLine), 404, codeUnknownSale, true},
		{fmt.Errorf("create sale s1: %w", ledger.ErrSaleExists), 409, codeSaleExists, true},
		{fmt.Errorf("load: %w", checkout.ErrStockMismatch), 409, codeStockMismatch, true},
		{sales.ErrUnknownReservation, 404, codeUnknownReservation, true},
		{fmt.Errorf("reservation r: %w", sales.ErrRestoring), 503, "please_wait", true},
		{fmt.Errorf("sale s1: %w", sales.ErrRebuildRunning), 409, codeRebuildInProgress, true},
		{fmt.Errorf("rebuild sale s1: %w", sales.ErrDrainTimeout), 409, codeDrainTimeout, true},
		{fmt.Errorf("pay: %w", checkout.ErrRebuildInProgress), 503, "please_wait", true},
		{orders.ErrUnknownOrder, 404, codeUnknownOrder, true},
		{orders.ErrHoldExpired, 409, codeHoldExpired, true},
		{fmt.Errorf("verify: %w", tokens.ErrExpired), 401, "token_expired", true},
		{errInvalidSKU, 400, codeInvalidSKU, true},
		{errors.New("dial tcp: connection refused"), 503, "please_wait", false},
	}
	for _, tt := range tests {
		answer, expected := errorTable.Classify(tt.err)
		if answer.Status != tt.status || answer.Code != tt.code || expected != tt.expected {
			t.Errorf("Classify(%v) = %d %s expected=%v, want %d %s expected=%v",
				tt.err, answer.Status, answer.Code, expected, tt.status, tt.code, tt.expected)
		}
	}
}

// An error answer, its log line (when it is logged) and the metrics agree:
// the same request id in the body, the header and the log, and the code the
// answer carried counted.
func TestFailAnswersLogsAndCountsAlike(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	s := New(Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil)), Registry: reg}, Options{})

	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/v1/orders")
	req.Header.Set("X-Request-Id", "edge-42.a")
	ctx.Init(&req, nil, nil)
	s.fail(&ctx, fmt.Errorf("create order: %w", errors.New("postgres: connection refused")))

	var body struct {
		Error     string `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.Bytes(), err)
	}
	header := string(ctx.Response.Header.Peek("X-Request-Id"))
	if body.Error != "please_wait" || ctx.Response.StatusCode() != 503 {
		t.Errorf("answer %d %s, want 503 please_wait", ctx.Response.StatusCode(), body.Error)
	}
	if header != "edge-42.a" || body.RequestID != header || line.RequestID != header {
		t.Errorf("request id: header %q, body %q, log %q; want the incoming edge-42.a in all three", header, body.RequestID, line.RequestID)
	}

	logs.Reset()
	ctx.Init(&req, nil, nil)
	s.fail(&ctx, fmt.Errorf("create order: %w", orders.ErrHoldExpired))
	if logs.Len() != 0 || ctx.Response.StatusCode() != 409 {
		t.Errorf("an expected error answered %d and logged %q; want 409 and no log", ctx.Response.StatusCode(), logs.Bytes())
	}

	counts := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "flashgate_origin_rejections_total" {
			for _, m := range f.GetMetric() {
				counts[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if counts["please_wait"] != 1 || counts[codeHoldExpired] != 1 || len(counts) != 2 {
		t.Errorf("flashgate_origin_rejections_total = %v, want please_wait 1, hold_expired 1", counts)
	}
}

// An admin request without the token is refused through the error table:
// counted under its code.
func TestAdminRefusalsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Deps{Log: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)), Registry: reg, AdminToken: "not-this-one"}, Options{})
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/admin/sales")
	ctx.Init(&req, nil, nil)
	s.Admin()(&ctx)
	if ctx.Response.StatusCode() != 401 {
		t.Errorf("admin request without a token = %d, want 401", ctx.Response.StatusCode())
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var unauthorized float64
	for _, f := range families {
		if f.GetName() == "flashgate_origin_rejections_total" {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "unauthorized" {
					unauthorized = m.GetCounter().GetValue()
				}
			}
		}
	}
	if unauthorized != 1 {
		t.Errorf(`flashgate_origin_rejections_total{code="unauthorized"} = %v, want 1`, unauthorized)
	}
}
