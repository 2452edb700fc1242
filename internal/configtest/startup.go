package configtest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
)

// RunFunc is a binary's run.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// StartupLog runs run with env until its admin listener at admin answers
// GET /healthz (within 30 s), stops it, and returns what it logged.
func StartupLog(t *testing.T, run RunFunc, env map[string]string, admin string) string {
	t.Helper()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &logs, io.Discard) }()
	httpreadtest.WaitStatus(t, "http://"+admin+"/healthz", http.StatusOK, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v", err)
	}
	return logs.String()
}

// UncheckedUserTokens: outside dev mode, user tokens whose iss or aud is
// not checked are a WARN when the binary starts, naming the settings;
// with both set there is none. startLog starts the binary outside dev mode
// with the given FLASHGATE_USER_TOKEN_ISSUER and _AUDIENCE and returns its
// start-up log (StartupLog).
func UncheckedUserTokens(t *testing.T, startLog func(t *testing.T, issuer, audience string) string) {
	const warning = `"level":"WARN","msg":"USER TOKENS' `
	for _, tc := range []struct {
		name, issuer, audience string
		want                   string // "" = no such warning
	}{
		{name: "neither", want: warning + `ISSUER AND AUDIENCE ARE NOT CHECKED: FLASHGATE_USER_TOKEN_ISSUER and FLASHGATE_USER_TOKEN_AUDIENCE are unset, ` +
			`so any token the shop signs with the user-token key passes as a shopper's sign-in`},
		{name: "no issuer", audience: "flashgate", want: warning + `ISSUER IS NOT CHECKED: FLASHGATE_USER_TOKEN_ISSUER is unset`},
		{name: "no audience", issuer: "https://id.shop.example", want: warning + `AUDIENCE IS NOT CHECKED: FLASHGATE_USER_TOKEN_AUDIENCE is unset`},
		{name: "both", issuer: "https://id.shop.example", audience: "flashgate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := startLog(t, tc.issuer, tc.audience)
			if got := strings.Contains(logs, warning); tc.want == "" && got {
				t.Errorf("start-up log warns of unchecked user tokens with issuer and audience set:\n%s", logs)
			}
			if tc.want != "" && !strings.Contains(logs, tc.want) {
				t.Errorf("start-up log lacks %s:\n%s", tc.want, logs)
			}
		})
	}
}

// syncBuffer is a strings.Builder safe for a server's goroutines.
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
