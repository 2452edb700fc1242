package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one long-running program the harness owns: started, killed,
// frozen and started again, its output appended to one log file across
// restarts. Every signal goes to the process's own id (it runs in its own
// process group, which the final cleanup also signals: Postgres's
// backends).
type proc struct {
	name string
	path string
	args []string
	env  []string // added to the harness's environment
	log  string   // output file
	cred *syscall.Credential

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd  // nil while not started
	done chan struct{}
}

// Start starts the program (again); the process dies with the harness.
func (p *proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.name)
		}
	}
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n==== chaos: %s starts at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(cleanEnv(os.Environ()), p.env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// running reports whether the process is alive (frozen counts).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process; false when it is not running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	return p.cmd.Process.Signal(sig) == nil
}

// wait waits up to d for the process to exit; it reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill9 kills the process at once, as a crash would, and waits for it.
func (p *proc) Kill9() {
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// Freeze stops the process (SIGSTOP) without killing it: its sockets stay
// open and nothing answers. Thaw lets it go on.
func (p *proc) Freeze() { p.signal(syscall.SIGSTOP) }

// Thaw continues a frozen process.
func (p *proc) Thaw() { p.signal(syscall.SIGCONT) }

// Stop asks the process to stop with sig, waits up to grace, then kills
// its whole process group.
func (p *proc) Stop(sig syscall.Signal, grace time.Duration) {
	p.signal(syscall.SIGCONT) // a frozen process cannot stop
	if p.signal(sig) && p.wait(grace) {
		p.killGroup()
		return
	}
	p.killGroup()
	p.wait(10 * time.Second)
}

// killGroup sends SIGKILL to the process group the harness made for the
// process (its id), so no child outlives the run.
func (p *proc) killGroup() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP polls url until it answers 200, the process exits, or d passes.
func waitHTTP(ctx context.Context, p *proc, url string, d time.Duration) error {
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p != nil && !p.running() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail(15))
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

// cleanEnv drops the caller's FLASHGATE_ settings (make run's or a shell's
// FLASHGATE_REDIS_URL, say): a program the harness starts gets only the
// ones the harness gives it.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FLASHGATE_") {
			out = append(out, kv)
		}
	}
	return out
}
