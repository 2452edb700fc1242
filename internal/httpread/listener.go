package httpread

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Lingering bounds the lingering close of a connection answered before its
// request was read whole: a body over the limit (413), a head over it
// (431), a request too slow (408) or malformed (400). fasthttp closes such
// a connection right after the answer; a client still sending its body
// then gets a reset, and the reset may reach it before it reads the
// answer. Lingering instead half-closes the connection (the answer, then
// FIN), reads and discards what the client still sends, and closes once
// the client closes too or a bound is reached, as nginx's lingering_close
// does. Zero (or negative) fields take the defaults.
type Lingering struct {
	// MaxBytes is how much one connection may discard; 0 means 4 MiB.
	MaxBytes int64
	// MaxTime is how long one connection may linger, from its close;
	// 0 means 5 seconds.
	MaxTime time.Duration
	// MaxConns is how many connections of a listener may linger at once;
	// beyond it one closes at once. 0 means 1024.
	MaxConns int
}

func (o Lingering) withDefaults() Lingering {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 4 << 20
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 5 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 1024
	}
	return o
}

// ServerListener is the listener the edge's and the origin's servers serve
// on: its connections remember whether any byte arrived on them (for
// Classify) and linger when closed after Linger (see Lingering). It owns
// the goroutines of the lingering connections; Shutdown ends them.
type ServerListener struct {
	net.Listener
	o Lingering

	wg sync.WaitGroup // one per lingering connection
	mu sync.Mutex     // guards closed and lingering, and orders wg.Add before Shutdown's wg.Wait
	// closed: Shutdown began, connections close at once from now on.
	closed    bool
	lingering map[net.Conn]struct{}
}

// Listener is NewListener with the default Lingering.
func Listener(ln net.Listener) *ServerListener { return NewListener(ln, Lingering{}) }

// NewListener returns ln for a fasthttp server whose ErrorHandler is this
// package's (or that calls Linger itself), with lingering bounded by o.
func NewListener(ln net.Listener, o Lingering) *ServerListener {
	return &ServerListener{Listener: ln, o: o.withDefaults(), lingering: make(map[net.Conn]struct{})}
}

// Accept waits for the next connection.
func (l *ServerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, l: l}, nil
}

// Shutdown stops lingering: connections closed from now on close at once,
// and those lingering are waited for until ctx ends, then closed. Call it
// after the server's own Shutdown, which does not wait for them. It
// returns an error wrapping ctx's when it had to close any.
func (l *ServerListener) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	n := len(l.lingering)
	for c := range l.lingering {
		_ = c.Close() // its goroutine's read fails and it ends
	}
	l.mu.Unlock()
	<-done
	if n == 0 { // the last ones ended as ctx did
		return nil
	}
	return fmt.Errorf("httpread: %d lingering connections closed early: %w", n, ctx.Err())
}

// linger half-closes c and drains it within the bounds in a goroutine of
// its own, which then closes it. It reports false, having done nothing,
// when c cannot be half-closed, Shutdown has begun or MaxConns are
// lingering already: the caller closes c at once.
func (l *ServerListener) linger(c net.Conn) bool {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return false
	}
	l.mu.Lock()
	if l.closed || len(l.lingering) >= l.o.MaxConns {
		l.mu.Unlock()
		return false
	}
	l.lingering[c] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()

	go func() {
		defer l.wg.Done()
		// The answer is written (fasthttp flushed it before closing); FIN
		// follows it, and the client's reads end with the answer.
		if cw.CloseWrite() == nil && c.SetReadDeadline(time.Now().Add(l.o.MaxTime)) == nil {
			_, _ = io.CopyN(io.Discard, c, l.o.MaxBytes) // to the client's FIN, the deadline or the bound
		}
		l.mu.Lock()
		delete(l.lingering, c)
		l.mu.Unlock()
		_ = c.Close()
	}()
	return true
}

// conn is a connection from a ServerListener. began is only touched by
// the goroutine serving the connection; linger may be set by it and read
// by another that closes the connection (fasthttp's Shutdown).
type conn struct {
	net.Conn
	l      *ServerListener
	began  bool        // a byte has arrived
	linger atomic.Bool // Close lingers (see Linger)
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.began = true
	}
	return n, err
}

// Close closes the connection, lingering first when Linger asked for it.
// A second Close while it lingers cuts the lingering short.
func (c *conn) Close() error {
	if c.linger.Swap(false) && c.l.linger(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

// Linger makes the server's close of ctx's connection a lingering one (see
// Lingering): call it when answering a request whose body, or the rest of
// whose head, has not been read, on a connection the server closes after
// the answer. It does nothing on a connection not from a ServerListener.
func Linger(ctx *fasthttp.RequestCtx) {
	if c, ok := ctx.Conn().(*conn); ok {
		c.linger.Store(true)
	}
}
