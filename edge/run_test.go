package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/configtest"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// On shutdown the public listener drains first, while the admin listener
// still answers (metrics, readiness); then the admin listener. A request
// still arriving on the public listener holds its drain open. The order was
// once a map's, which put the admin listener first about one time in
// eight, so the test stops the node `stops` times.
func TestRunDrainsPublicBeforeAdmin(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	const stops = 16
	for range stops {
		public, admin := httpreadtest.FreeAddr(t), httpreadtest.FreeAddr(t)
		env := map[string]string{
			"FLASHGATE_EDGE_ADDR":         public,
			"FLASHGATE_EDGE_ADMIN_ADDR":   admin,
			"FLASHGATE_REDIS_URL":         r.URL,
			"FLASHGATE_REDIS_PREFIX":      r.Prefix,
			"FLASHGATE_ORIGIN_URL":        "http://127.0.0.1:1",
			"FLASHGATE_EDGE_ADMIN_TOKEN":  edgetest.AdminToken,
			"FLASHGATE_TOKEN_KEYS":        tokenstest.KeySet().String(),
			"FLASHGATE_USER_TOKEN_SECRET": string(tokenstest.UserSecret()),
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, io.Discard) }()
		httpreadtest.WaitStatus(t, "http://"+public+"/healthz", http.StatusOK, 10*time.Second)
		httpreadtest.WaitStatus(t, "http://"+admin+"/healthz", http.StatusOK, 10*time.Second)

		release := httpreadtest.HoldRequest(t, public, "/healthz")
		cancel()
		httpreadtest.WaitStatus(t, "http://"+public+"/healthz", 0, 5*time.Second) // the public listener is closed
		if got := httpreadtest.Status("http://" + admin + "/healthz"); got != http.StatusOK {
			t.Errorf("GET admin /healthz while the public listener drains = %d, want 200", got)
		}
		release()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run = %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("run did not return within 10 s of the held request's end")
		}
		if got := httpreadtest.Status("http://" + admin + "/healthz"); got != 0 {
			t.Errorf("GET admin /healthz after run returned = %d, want no answer", got)
		}
	}
}

// Dev mode says so at WARN when the node starts, and so does the override
// that lets it listen beyond loopback; user tokens checked with dev mode's
// secret are no reason to warn of their issuer and audience.
func TestRunWarnsOfDevMode(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	public, admin := httpreadtest.FreeAddr(t), httpreadtest.FreeAddr(t)
	env := map[string]string{
		"FLASHGATE_EDGE_ADDR":              strings.Replace(public, "127.0.0.1", "0.0.0.0", 1),
		"FLASHGATE_EDGE_ADMIN_ADDR":        admin,
		"FLASHGATE_REDIS_URL":              r.URL,
		"FLASHGATE_REDIS_PREFIX":           r.Prefix,
		"FLASHGATE_ORIGIN_URL":             "http://127.0.0.1:1",
		"FLASHGATE_EDGE_ADMIN_TOKEN":       edgetest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":             tokenstest.KeySet().String(),
		"FLASHGATE_DEV":                    "1",
		"FLASHGATE_DEV_USER_TOKEN_SECRET":  string(tokenstest.UserSecret()),
		"FLASHGATE_DEV_ALLOW_NON_LOOPBACK": "1",
	}
	logs := configtest.StartupLog(t, run, env, admin)
	for _, want := range []string{`"level":"WARN","msg":"DEV MODE: POST /v1/dev/login`, `"level":"WARN","msg":"DEV MODE LISTENS BEYOND LOOPBACK`} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "NOT CHECKED") {
		t.Errorf("start-up log in dev mode warns of unchecked user tokens:\n%s", logs)
	}
}

// Outside dev mode, user tokens whose iss or aud is not checked are a WARN
// when the node starts (the shared suite's cases).
func TestRunWarnsOfUncheckedUserTokens(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	configtest.UncheckedUserTokens(t, func(t *testing.T, issuer, audience string) string {
		admin := httpreadtest.FreeAddr(t)
		env := map[string]string{
			"FLASHGATE_EDGE_ADDR":           httpreadtest.FreeAddr(t),
			"FLASHGATE_EDGE_ADMIN_ADDR":     admin,
			"FLASHGATE_REDIS_URL":           r.URL,
			"FLASHGATE_REDIS_PREFIX":        r.Prefix,
			"FLASHGATE_ORIGIN_URL":          "http://127.0.0.1:1",
			"FLASHGATE_EDGE_ADMIN_TOKEN":    edgetest.AdminToken,
			"FLASHGATE_TOKEN_KEYS":          tokenstest.KeySet().String(),
			"FLASHGATE_USER_TOKEN_SECRET":   string(tokenstest.UserSecret()),
			"FLASHGATE_USER_TOKEN_ISSUER":   issuer,
			"FLASHGATE_USER_TOKEN_AUDIENCE": audience,
		}
		return configtest.StartupLog(t, run, env, admin)
	})
}
