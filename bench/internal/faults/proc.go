package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/childproc"
)

// Every program the harness owns (postgres, the binaries) is a
// childproc.Proc: started, killed, frozen and started again, its output
// appended to one log file across restarts, in a process group of its own
// that the final cleanup also signals (Postgres's backends).

// waitHTTP polls url until it answers 200, the process exits, or d passes.
func waitHTTP(ctx context.Context, p *childproc.Proc, url string, d time.Duration) error {
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p != nil && !p.Running() {
			return fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %v", url, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// childEnv is the environment of a program the harness starts: the
// harness's own without its FLASHGATE_ settings (make run's or a shell's
// FLASHGATE_REDIS_URL, say), then vars, so the program gets only the ones
// the harness gives it.
func childEnv(vars ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHGATE_") {
			out = append(out, kv)
		}
	}
	return append(out, vars...)
}
