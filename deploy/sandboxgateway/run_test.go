package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// required are the variables without which the gateway will not start.
var required = map[string]string{
	"FLASHGATE_GATEWAY_API_KEY":        "sk_env",
	"FLASHGATE_GATEWAY_CONTROL_TOKEN":  "ctl_env_0123456789abcdef",
	"FLASHGATE_GATEWAY_WEBHOOK_SECRET": "whsec_env",
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(nil, env(required), io.Discard)
	if err != nil {
		t.Fatalf("loadConfig with the required variables: %v", err)
	}
	g := c.Gateway
	if c.Addr != "127.0.0.1:9300" || g.PublicURL != "http://127.0.0.1:9300" || g.WebhookURL != "http://127.0.0.1:8080/v1/payments/webhook" {
		t.Errorf("addresses = %q %q %q, want the defaults", c.Addr, g.PublicURL, g.WebhookURL)
	}
	if g.APIKey != "sk_env" || g.ControlToken != "ctl_env_0123456789abcdef" || !slices.Equal(g.WebhookSecrets, []string{"whsec_env"}) {
		t.Errorf("APIKey, ControlToken, WebhookSecrets = %q, %q, %q, want sk_env, ctl_env_0123456789abcdef, [whsec_env]",
			g.APIKey, g.ControlToken, g.WebhookSecrets)
	}
	if g.Latency != 0 || g.FailureRate != 0 || g.DuplicateRate != 0.1 || g.MaxAttempts != 8 || g.RetryBase != 500*time.Millisecond {
		t.Errorf("gateway config = %+v, want latency 0, failure 0, duplicate 0.1, 8 attempts, retry base 500ms", g)
	}
	if g.Personality != sandboxgateway.PersonalityFlashgate {
		t.Errorf("personality = %q, want %q", g.Personality, sandboxgateway.PersonalityFlashgate)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name  string
		vars  map[string]string
		args  []string
		check func(t *testing.T, c config)
	}{
		{
			name: "environment",
			vars: map[string]string{
				"FLASHGATE_GATEWAY_ADDR":           "127.0.0.1:9400",
				"FLASHGATE_GATEWAY_PUBLIC_URL":     "https://pay.example",
				"FLASHGATE_GATEWAY_WEBHOOK_URL":    "http://origin:9090/v1/payments/webhook",
				"FLASHGATE_GATEWAY_WEBHOOK_SECRET": "new, old ,",
				"FLASHGATE_GATEWAY_API_KEY":        "sk_1",
				"FLASHGATE_GATEWAY_CONTROL_TOKEN":  "ctl_1_0123456789abcdef",
				"FLASHGATE_GATEWAY_LATENCY":        "150ms",
				"FLASHGATE_GATEWAY_FAILURE_RATE":   "0.25",
				"FLASHGATE_GATEWAY_DUPLICATE_RATE": "0",
				"FLASHGATE_GATEWAY_MAX_ATTEMPTS":   "3",
				"FLASHGATE_GATEWAY_RETRY_BASE":     "2s",
				"FLASHGATE_GATEWAY_PERSONALITY":    "stripe",
			},
			check: func(t *testing.T, c config) {
				g := c.Gateway
				if c.Addr != "127.0.0.1:9400" || g.PublicURL != "https://pay.example" || g.WebhookURL != "http://origin:9090/v1/payments/webhook" {
					t.Errorf("addresses = %q %q %q", c.Addr, g.PublicURL, g.WebhookURL)
				}
				if !slices.Equal(g.WebhookSecrets, []string{"new", "old"}) || g.APIKey != "sk_1" || g.ControlToken != "ctl_1_0123456789abcdef" {
					t.Errorf("secrets, key, control token = %q, %q, %q, want [new old], sk_1, ctl_1_0123456789abcdef",
						g.WebhookSecrets, g.APIKey, g.ControlToken)
				}
				if g.Latency != 150*time.Millisecond || g.FailureRate != 0.25 || g.DuplicateRate != 0 || g.MaxAttempts != 3 || g.RetryBase != 2*time.Second ||
					g.Personality != sandboxgateway.PersonalityStripe {
					t.Errorf("gateway config = %+v", g)
				}
			},
		},
		{
			name: "flags win",
			vars: map[string]string{
				"FLASHGATE_GATEWAY_API_KEY":        "sk_env",
				"FLASHGATE_GATEWAY_CONTROL_TOKEN":  "ctl_env_0123456789abcdef",
				"FLASHGATE_GATEWAY_WEBHOOK_SECRET": "whsec_env",
				"FLASHGATE_GATEWAY_LATENCY":        "1s",
				"FLASHGATE_GATEWAY_ADDR":           ":1",
			},
			args: []string{"-api-key", "sk_flag", "-control-token", "ctl_flag_0123456789abcdef", "-webhook-secret", "a,b",
				"-latency", "5ms", "-addr", ":2", "-seed", "9"},
			check: func(t *testing.T, c config) {
				if c.Gateway.APIKey != "sk_flag" || c.Gateway.ControlToken != "ctl_flag_0123456789abcdef" ||
					!slices.Equal(c.Gateway.WebhookSecrets, []string{"a", "b"}) ||
					c.Gateway.Latency != 5*time.Millisecond || c.Addr != ":2" || c.Gateway.Seed != 9 {
					t.Errorf("config = %+v, want the flags' values", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.args, env(tt.vars), io.Discard)
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for rk, rv := range required {
			if rk != k {
				m[rk] = rv
			}
		}
		return m
	}
	tests := []struct {
		name string
		vars map[string]string
		args []string
		want string // in the error
	}{
		{"no API key", map[string]string{"FLASHGATE_GATEWAY_WEBHOOK_SECRET": "s"}, nil, "-api-key"},
		{"no control token", map[string]string{"FLASHGATE_GATEWAY_API_KEY": "k", "FLASHGATE_GATEWAY_WEBHOOK_SECRET": "s"}, nil, "-control-token"},
		{"short control token", with("FLASHGATE_GATEWAY_CONTROL_TOKEN", "ctl_short"), nil, "at least 16 bytes"},
		{"control token is the API key", required, []string{"-api-key", "sk_same_0123456789abcdef", "-control-token", "sk_same_0123456789abcdef"}, "differ from -api-key"},
		{"no secret", map[string]string{"FLASHGATE_GATEWAY_API_KEY": "k", "FLASHGATE_GATEWAY_CONTROL_TOKEN": "ctl_env_0123456789abcdef"}, nil, "-webhook-secret"},
		{"blank secrets", with("FLASHGATE_GATEWAY_WEBHOOK_SECRET", " , "), nil, "-webhook-secret"},
		{"bad latency variable", with("FLASHGATE_GATEWAY_LATENCY", "soon"), nil, "FLASHGATE_GATEWAY_LATENCY"},
		{"bad attempts variable", with("FLASHGATE_GATEWAY_MAX_ATTEMPTS", "many"), nil, "FLASHGATE_GATEWAY_MAX_ATTEMPTS"},
		{"rate over 1", with("FLASHGATE_GATEWAY_FAILURE_RATE", "1.5"), nil, "FailureRate"},
		{"negative duplicate rate", required, []string{"-duplicate-rate", "-0.1"}, "DuplicateRate"},
		{"relative webhook URL", required, []string{"-webhook-url", "/hooks"}, "WebhookURL"},
		{"bad public URL", required, []string{"-public-url", "pay.example"}, "PublicURL"},
		{"unknown personality", required, []string{"-personality", "paypal"}, "-personality"},
		{"unknown flag", required, []string{"-nope"}, "nope"},
		{"stray argument", required, []string{"extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(tt.args, env(tt.vars), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env(nil), io.Discard, &out); err != nil {
		t.Fatalf("run -h = %v, want nil", err)
	}
	for _, want := range []string{
		"FLASHGATE_GATEWAY_ADDR", "FLASHGATE_GATEWAY_PUBLIC_URL", "FLASHGATE_GATEWAY_WEBHOOK_URL",
		"FLASHGATE_GATEWAY_WEBHOOK_SECRET", "FLASHGATE_GATEWAY_API_KEY", "FLASHGATE_GATEWAY_LATENCY",
		"FLASHGATE_GATEWAY_FAILURE_RATE", "FLASHGATE_GATEWAY_DUPLICATE_RATE", "FLASHGATE_GATEWAY_MAX_ATTEMPTS",
		"FLASHGATE_GATEWAY_RETRY_BASE", "FLASHGATE_GATEWAY_CONTROL_TOKEN", "FLASHGATE_GATEWAY_CONTROL_TOKEN_FILE",
		`(default "127.0.0.1:9300")`, "(default 500ms)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h output lacks %s:\n%s", want, out.String())
		}
	}
}

// TestRun starts the binary on a free port, creates and pays an intent, and
// stops it by cancelling its context.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logR, logW := io.Pipe()
	lines := make(chan map[string]any, 100)
	go func() { // drains the log until run returns and the pipe closes
		defer close(lines)
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case lines <- m:
				default:
				}
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-webhook-url", ""}, env(required), logW, io.Discard)
		logW.Close()
	}()

	var addr string
	for addr == "" {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("run ended before it was ready: %v", <-done)
			}
			if m["msg"] == "gateway ready" {
				addr, _ = m["addr"].(string)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no \"gateway ready\" log within 10s")
		}
	}
	base := "http://" + addr

	req, _ := http.NewRequest("POST", base+"/v1/intents", strings.NewReader(`{"amount_minor": 100, "currency": "INR"}`))
	req.Header.Set("Authorization", "Bearer sk_env")
	req.Header.Set("Idempotency-Key", "run-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		ID     string `json:"intent_id"`
		PayURL string `json:"pay_url"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&in)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(in.PayURL, "http://127.0.0.1:9300/pay/pi_") {
		t.Fatalf("create = %d %+v, want 201 with the default public URL", resp.StatusCode, in)
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"without the control token", "", http.StatusUnauthorized},
		{"with the control token", "Bearer " + required["FLASHGATE_GATEWAY_CONTROL_TOKEN"], http.StatusOK},
	} {
		req, _ := http.NewRequest("POST", base+"/sandbox/intents/"+in.ID+"/pay", nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("pay %s = %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel = %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15s of cancel")
	}
	for range lines { // let the reader finish
	}
}

// -personality razorpay builds a gateway that answers Razorpay's API with
// basic auth of sandboxgateway.RazorpayKeyID and the API key, which -h names.
func TestRazorpayPersonality(t *testing.T) {
	c, err := loadConfig([]string{"-personality", "razorpay"}, env(required), io.Discard)
	if err != nil || c.Gateway.Personality != sandboxgateway.PersonalityRazorpay {
		t.Fatalf("loadConfig(-personality razorpay) = %+v, %v", c.Gateway, err)
	}
	g, err := sandboxgateway.New(c.Gateway)
	if err != nil {
		t.Fatalf("sandboxgateway.New = %v", err)
	}
	defer g.Close(context.Background())
	req := httptest.NewRequest("GET", "/v1/payments", nil)
	req.SetBasicAuth(sandboxgateway.RazorpayKeyID, "sk_env")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"entity":"collection"`) {
		t.Errorf("GET /v1/payments = %d %s, want 200 and a collection", rec.Code, rec.Body)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env(nil), io.Discard, &out); err != nil || !strings.Contains(out.String(), sandboxgateway.RazorpayKeyID) {
		t.Errorf("-h output lacks the Razorpay key id %s:\n%s", sandboxgateway.RazorpayKeyID, out.String())
	}
}
