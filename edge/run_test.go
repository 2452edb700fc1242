package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
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
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &logs, io.Discard) }()
	httpreadtest.WaitStatus(t, "http://"+admin+"/healthz", http.StatusOK, 10*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v", err)
	}
	for _, want := range []string{`"level":"WARN","msg":"DEV MODE: POST /v1/dev/login`, `"level":"WARN","msg":"DEV MODE LISTENS BEYOND LOOPBACK`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up log lacks %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "NOT CHECKED") {
		t.Errorf("start-up log in dev mode warns of unchecked user tokens:\n%s", logs.String())
	}
}

// Outside dev mode, user tokens whose iss or aud is not checked are a WARN
// when the node starts, naming the settings; checked, there is none.
func TestRunWarnsOfUncheckedUserTokens(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	const warning = `"level":"WARN","msg":"USER TOKENS' `
	for _, tc := range []struct {
		name, issuer, audience string
		want                   string // "" = no such warning
	}{
		{name: "neither", want: warning + `ISSUER AND AUDIENCE ARE NOT CHECKED: FLASHGATE_USER_TOKEN_ISSUER and FLASHGATE_USER_TOKEN_AUDIENCE are unset, ` +
			`so any token the shop signs with the user-token key passes as a shopper's sign-in`},
		{name: "no audience", issuer: "https://id.shop.example", want: warning + `AUDIENCE IS NOT CHECKED: FLASHGATE_USER_TOKEN_AUDIENCE is unset`},
		{name: "both", issuer: "https://id.shop.example", audience: "flashgate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
				"FLASHGATE_USER_TOKEN_ISSUER":   tc.issuer,
				"FLASHGATE_USER_TOKEN_AUDIENCE": tc.audience,
			}
			var logs syncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &logs, io.Discard) }()
			httpreadtest.WaitStatus(t, "http://"+admin+"/healthz", http.StatusOK, 10*time.Second)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run = %v", err)
			}
			if got := strings.Contains(logs.String(), warning); tc.want == "" && got {
				t.Errorf("start-up log warns of unchecked user tokens with issuer and audience set:\n%s", logs.String())
			}
			if tc.want != "" && !strings.Contains(logs.String(), tc.want) {
				t.Errorf("start-up log lacks %s:\n%s", tc.want, logs.String())
			}
		})
	}
}

// syncBuffer is a strings.Builder safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
