package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/tokens"
)

var errSoldOut = errors.New("sold out")

func TestClassify(t *testing.T) {
	soldOut := New(fasthttp.StatusConflict, "sold_out", "Sold out.")
	table := NewTable(PleaseWait).Map(errSoldOut, soldOut)
	tests := []struct {
		name     string
		err      error
		code     string
		status   int
		expected bool
	}{
		{"an Error as it is", New(418, "teapot", "short and stout"), "teapot", 418, true},
		{"a wrapped Error", fmt.Errorf("reserve: %w", soldOut), "sold_out", 409, true},
		{"a wrapped sentinel", fmt.Errorf("checkout: %w", errSoldOut), "sold_out", 409, true},
		{"a missing token", tokens.ErrMissing, "missing_token", 401, true},
		{"an expired token", fmt.Errorf("verify: %w", tokens.ErrExpired), "token_expired", 401, true},
		{"a token for another sale", tokens.ErrWrongSale, "wrong_sale", 401, true},
		{"a malformed token", tokens.ErrMalformed, "invalid_token", 401, true},
		{"a replayed signed request", fmt.Errorf("verify: %w", fmt.Errorf("%w: %w", tokens.ErrReplayed, tokens.ErrInvalid)), "replayed_request", 401, true},
		{"a dependency down", errors.New("dial tcp: connection refused"), "please_wait", 503, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, expected := table.Classify(tt.err)
			if e.Code != tt.code || e.Status != tt.status || expected != tt.expected {
				t.Fatalf("Classify = %d %s expected=%v, want %d %s expected=%v", e.Status, e.Code, expected, tt.status, tt.code, tt.expected)
			}
		})
	}
}

func newCtx(requestID string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/v1/sales/s1/join")
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	ctx.Init(&req, nil, nil)
	return &ctx
}

func TestWriteErrorCarriesTheRequestID(t *testing.T) {
	for _, in := range []string{"", "cdn-7f3a.1", `bad"id`, strings.Repeat("x", 65)} {
		ctx := newCtx(in)
		WriteError(ctx, PleaseWait)
		var body struct {
			Error     string `json:"error"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
			t.Fatalf("body %q: %v", ctx.Response.Body(), err)
		}
		header := string(ctx.Response.Header.Peek("X-Request-Id"))
		switch {
		case body.Error != "please_wait" || body.Message != PleaseWait.Message:
			t.Errorf("body %+v", body)
		case ctx.Response.StatusCode() != 503 || string(ctx.Response.Header.Peek("Retry-After")) != "2":
			t.Errorf("status %d, Retry-After %q", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Retry-After"))
		case string(ctx.Response.Header.Peek("Cache-Control")) != "no-store" || string(ctx.Response.Header.Peek("X-Content-Type-Options")) != "nosniff":
			t.Errorf("Cache-Control %q, X-Content-Type-Options %q", ctx.Response.Header.Peek("Cache-Control"), ctx.Response.Header.Peek("X-Content-Type-Options"))
		case header == "" || header != body.RequestID:
			t.Errorf("request id: header %q, body %q", header, body.RequestID)
		case in == "cdn-7f3a.1" && header != in:
			t.Errorf("a well-formed incoming id %q was replaced by %q", in, header)
		case in != "cdn-7f3a.1" && (header == in || !strings.HasPrefix(header, processPrefix+"-")):
			t.Errorf("incoming id %q: answered %q, want one of this process's", in, header)
		}
		if got := RequestID(ctx); got != header {
			t.Errorf("RequestID = %q, the answer said %q", got, header)
		}
	}
}

func TestWriteErrorDoesNotAllocate(t *testing.T) {
	ctx := newCtx("")
	WriteError(ctx, PleaseWait) // fasthttp sizes its buffers on first use
	if n := testing.AllocsPerRun(100, func() { WriteError(ctx, PleaseWait) }); n != 0 {
		t.Fatalf("WriteError allocates %.0f times per answer", n)
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "<html> & co", "tab\there", "naïve"} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"s1": true, "sale_2026-12-01": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a b": false, "a/b": false, "a:b": false, "ü": false,
	} {
		if got := ValidID(s); got != want {
			t.Errorf("ValidID(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{"user@example.com": true, "k:1/2": true, "": false, "a b": false, strings.Repeat("k", 129): false} {
		if got := ValidOpaque(s); got != want {
			t.Errorf("ValidOpaque(%q) = %v", s, got)
		}
	}
}

func TestBearer(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "": ""} {
		ctx := newCtx("")
		if header != "" {
			ctx.Request.Header.Set("Authorization", header)
		}
		if got := Bearer(ctx); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", header, got, want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	type body struct {
		SKU string `json:"sku"`
	}
	tests := []struct {
		contentType, body string
		code              string
	}{
		{"application/json", `{"sku":"tee"}`, ""},
		{"application/json; charset=utf-8", `{"sku":"tee"}`, ""},
		{"text/plain", `{"sku":"tee"}`, CodeUnsupportedMedia},
		{"application/json", ``, CodeInvalidJSON},
		{"application/json", `{"sku":1}`, CodeInvalidField},
		{"application/json", `{"sku":"tee","qty":2}`, CodeUnknownField},
		{"application/json", `{"sku":"tee"} {}`, CodeInvalidJSON},
		{"application/json", `{"sku":"` + strings.Repeat("x", 100) + `"}`, CodeBodyTooLarge},
	}
	for _, tt := range tests {
		ctx := newCtx("")
		ctx.Request.Header.SetContentType(tt.contentType)
		ctx.Request.SetBodyString(tt.body)
		var v body
		err := DecodeJSON(ctx, 64, &v)
		var e *Error
		switch {
		case tt.code == "" && (err != nil || v.SKU != "tee"):
			t.Errorf("%s %q: err %v, decoded %+v", tt.contentType, tt.body, err, v)
		case tt.code != "" && (!errors.As(err, &e) || e.Code != tt.code):
			t.Errorf("%s %q: err %v, want code %s", tt.contentType, tt.body, err, tt.code)
		}
	}
}

func TestAddressKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":          "203.0.113.7",
		"::ffff:203.0.113.7":   "203.0.113.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
	} {
		if got := AddressKey(net.ParseIP(in)); got != want {
			t.Errorf("AddressKey(%s) = %s, want %s", in, got, want)
		}
	}
}
