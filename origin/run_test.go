package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

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
