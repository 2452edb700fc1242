// Package childproc runs a long-lived program for the tests and bench
// tools that start servers of their own (redis-server, postgres, the
// flashgate binaries): started, killed, frozen and started again, its output
// appended to one log file across restarts. The program runs in a process
// group of its own, so a Ctrl-C meant for the caller reaches it only through
// the caller's cleanup, and Stop can end its children too; on Linux it is
// killed when the caller dies, so an interrupted run leaves nothing behind.
package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one program. Set its fields before the first Start; Env may be
// changed between a stop and the next Start.
type Proc struct {
	Name string   // for the log and errors
	Path string   // the executable
	Args []string // its arguments
	Env  []string // its whole environment; nil means the caller's
	Log  string   // the file its output is appended to
	// Credential runs it as another user (postgres refuses root); nil
	// runs it as the caller.
	Credential *syscall.Credential

	mu   sync.Mutex    // guards cmd and done
	cmd  *exec.Cmd     // nil while never started
	done chan struct{} // closed when cmd has exited
}

// Start starts the program (again); it fails while the program runs.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("%s is already running", p.Name)
	}
	out, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	fmt.Fprintf(out, "\n==== %s starts at %s\n", p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = p.Credential
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
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

// Exited is closed when the process last started has exited; nil before
// the first Start.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process is alive (a frozen one counts).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !closed(p.done)
}

// Signal sends sig to the process; false when it is not running.
func (p *Proc) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || closed(p.done) {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// Wait waits up to d for the process to exit; it reports whether it did.
func (p *Proc) Wait(d time.Duration) bool {
	done := p.Exited()
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

// Kill kills the process at once, as a crash would, and waits for it.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	p.Wait(10 * time.Second)
}

// Freeze stops the process (SIGSTOP) without killing it: its sockets stay
// open and nothing answers. Thaw lets it go on.
func (p *Proc) Freeze() { p.Signal(syscall.SIGSTOP) }

// Thaw continues a frozen process.
func (p *Proc) Thaw() { p.Signal(syscall.SIGCONT) }

// Stop asks the process to stop with sig, waits up to grace, then kills
// its whole process group (its children too) and waits for it.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	p.Thaw() // a frozen process cannot stop
	if p.Signal(sig) {
		p.Wait(grace)
	}
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	p.Wait(10 * time.Second)
}

// Tail is the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func closed(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
