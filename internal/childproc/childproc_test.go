package childproc

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

func sleeper(t *testing.T) *Proc {
	t.Helper()
	p := &Proc{Name: "sleeper", Path: "/bin/sh", Args: []string{"-c", "echo hello; exec sleep 30"}, Log: filepath.Join(t.TempDir(), "sleeper.log")}
	t.Cleanup(func() {
		p.Stop(syscall.SIGKILL, 0)
		if t.Failed() {
			t.Logf("log:\n%s", p.Tail(10))
		}
	})
	return p
}

// waitLog waits until the log holds n hellos.
func waitLog(t *testing.T, p *Proc, n int) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%d hellos in the log", n), func() bool {
		return strings.Count(p.Tail(10), "hello") >= n
	})
}

// TestKillAndStartAgain: a killed program is not running, starts again,
// and its log keeps both runs' output.
func TestKillAndStartAgain(t *testing.T) {
	p := sleeper(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err == nil {
		t.Error("Start while running = nil, want an error")
	}
	waitLog(t, p, 1)
	p.Kill()
	if p.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if err := p.Start(); err != nil {
		t.Fatalf("Start after Kill = %v", err)
	}
	if !p.Running() {
		t.Fatal("Running() = false after the second Start")
	}
	waitLog(t, p, 2)
	if got := p.Tail(10); strings.Count(got, "hello") != 2 || strings.Count(got, "==== sleeper starts at") != 2 {
		t.Errorf("log after two runs:\n%s\nwant two start markers and two hellos", got)
	}
}

// TestStopEndsAFrozenProgram: Stop thaws a frozen program so the signal
// reaches it, and kills it when it outlives the grace period.
func TestStopEndsAFrozenProgram(t *testing.T) {
	p := sleeper(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	if !p.Running() {
		t.Fatal("Running() = false for a frozen program, want true")
	}
	p.Stop(syscall.SIGTERM, 5*time.Second)
	if p.Running() {
		t.Fatal("Running() = true after Stop")
	}
	select {
	case <-p.Exited():
	default:
		t.Error("Exited() not closed after Stop")
	}
}
