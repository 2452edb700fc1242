package testenv

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// LogWriter sends a server's log to t.Log until Close; after that (a
// goroutine that outlived the server) lines are dropped, since t.Log after
// the test has ended panics.
type LogWriter struct {
	t      testing.TB
	mu     sync.Mutex // guards closed
	closed bool
}

var _ io.Writer = (*LogWriter)(nil)

// NewLogWriter returns a LogWriter for t.
func NewLogWriter(t testing.TB) *LogWriter { return &LogWriter{t: t} }

func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Close drops every later line.
func (w *LogWriter) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
