package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/configtest"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// On shutdown the public listener drains first, while the admin listener
// still answers (metrics); then the admin listener. A request still
// arriving on the public listener holds its drain open. The order was once
// a map's, which put the admin listener first about one time in eight, so
// the test stops the origin `stops` times.
func TestRunDrainsPublicBeforeAdmin(t *testing.T) {
	t.Parallel()
	e := origintest.NewEnv(t)
	const stops = 16
	for range stops {
		public, admin := httpreadtest.FreeAddr(t), httpreadtest.FreeAddr(t)
		env := map[string]string{
			"FLASHGATE_ORIGIN_ADDR":        public,
			"FLASHGATE_ORIGIN_ADMIN_ADDR":  admin,
			"FLASHGATE_REDIS_URL":          e.RedisURL,
			"FLASHGATE_REDIS_PREFIX":       e.Prefix,
			"FLASHGATE_POSTGRES_URL":       e.PostgresURL,
			"FLASHGATE_POSTGRES_MAX_CONNS": "4",
			"FLASHGATE_ORIGIN_ADMIN_TOKEN": origintest.AdminToken,
			"FLASHGATE_TOKEN_KEYS":         tokenstest.KeySet().String(),
			"FLASHGATE_USER_TOKEN_SECRET":  string(tokenstest.UserSecret()),
			"FLASHGATE_INSTANCE":           "origin-drain-test",
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, io.Discard) }()
		httpreadtest.WaitStatus(t, "http://"+public+"/healthz", http.StatusOK, 30*time.Second)
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
		case <-time.After(20 * time.Second):
			t.Fatal("run did not return within 20 s of the held request's end")
		}
		if got := httpreadtest.Status("http://" + admin + "/healthz"); got != 0 {
			t.Errorf("GET admin /healthz after run returned = %d, want no answer", got)
		}
	}
}

// baseEnv is an origin's configuration on e, outside dev mode, with its
// listeners on free loopback ports (admin is the admin listener's).
func baseEnv(t *testing.T, e *origintest.Env, instance string) (env map[string]string, admin string) {
	t.Helper()
	admin = httpreadtest.FreeAddr(t)
	return map[string]string{
		"FLASHGATE_ORIGIN_ADDR":        httpreadtest.FreeAddr(t),
		"FLASHGATE_ORIGIN_ADMIN_ADDR":  admin,
		"FLASHGATE_REDIS_URL":          e.RedisURL,
		"FLASHGATE_REDIS_PREFIX":       e.Prefix,
		"FLASHGATE_POSTGRES_URL":       e.PostgresURL,
		"FLASHGATE_POSTGRES_MAX_CONNS": "4",
		"FLASHGATE_ORIGIN_ADMIN_TOKEN": origintest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":         tokenstest.KeySet().String(),
		"FLASHGATE_USER_TOKEN_SECRET":  string(tokenstest.UserSecret()),
		"FLASHGATE_INSTANCE":           instance,
	}, admin
}

// Dev mode says so at WARN when the origin starts, and so does the
// override that lets it listen beyond loopback; user tokens checked with
// dev mode's secret are no reason to warn of their issuer and audience.
func TestRunWarnsOfDevMode(t *testing.T) {
	t.Parallel()
	env, admin := baseEnv(t, origintest.NewEnv(t), "origin-dev-warn-test")
	env["FLASHGATE_ORIGIN_ADDR"] = strings.Replace(env["FLASHGATE_ORIGIN_ADDR"], "127.0.0.1", "0.0.0.0", 1)
	env["FLASHGATE_LINE_AUDIENCE"] = "flashgate-dev" // 0.0.0.0 names no host of its own
	env["FLASHGATE_USER_TOKEN_SECRET"] = ""
	env["FLASHGATE_DEV"] = "1"
	env["FLASHGATE_DEV_USER_TOKEN_SECRET"] = "dev-user-token-secret-0123456789abcdef"
	env["FLASHGATE_DEV_ALLOW_NON_LOOPBACK"] = "1"
	logs := configtest.StartupLog(t, run, env, admin)
	for _, want := range []string{`"level":"WARN","msg":"DEV MODE: POST /admin/dev/admission-token`, `"level":"WARN","msg":"DEV MODE LISTENS BEYOND LOOPBACK`} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "NOT CHECKED") {
		t.Errorf("start-up log in dev mode warns of unchecked user tokens:\n%s", logs)
	}
}

// Outside dev mode, user tokens whose iss or aud is not checked are a WARN
// when the origin starts (the shared suite's cases).
func TestRunWarnsOfUncheckedUserTokens(t *testing.T) {
	t.Parallel()
	e := origintest.NewEnv(t)
	configtest.UncheckedUserTokens(t, func(t *testing.T, issuer, audience string) string {
		env, admin := baseEnv(t, e, "origin-user-token-warn-test")
		env["FLASHGATE_USER_TOKEN_ISSUER"], env["FLASHGATE_USER_TOKEN_AUDIENCE"] = issuer, audience
		return configtest.StartupLog(t, run, env, admin)
	})
}
