package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// A lock held across tasks says it is held while its session lives; once
// Postgres ends the session (a restart, an admin's pg_terminate_backend)
// it says so, and another holder can take the lock.
func TestHoldUntilTheSessionEnds(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 1, 0)
	l, err := s.Hold(ctx, "autotune")
	if err != nil || l == nil {
		t.Fatalf("Hold = %v, %v; want the lock", l, err)
	}
	if err := l.Held(ctx); err != nil {
		t.Fatalf("Held = %v, want held", err)
	}
	if other, err := s.Hold(ctx, "autotune"); err != nil || other != nil {
		t.Fatalf("Hold while held = %v, %v; want refused", other, err)
	}
	var ended bool
	if err := s.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, l.conn.Conn().PgConn().PID()).Scan(&ended); err != nil || !ended {
		t.Fatalf("pg_terminate_backend = %v, %v", ended, err)
	}
	if err := l.Held(ctx); err == nil {
		t.Fatal("Held after the session ended = nil, want an error")
	}
	l.Unlock()
	// pg_terminate_backend only signals the backend: the lock goes when
	// its process has ended, a moment later.
	testenv.Eventually(t, 10*time.Second, "Hold after the holder's session ended taking the lock", func() bool {
		next, err := s.Hold(ctx, "autotune")
		if err != nil {
			t.Fatalf("Hold after the holder's session ended = %v", err)
		}
		if next == nil {
			return false // still held elsewhere
		}
		next.Unlock()
		return true
	})
}
