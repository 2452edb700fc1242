package faults

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Delay is a latency range: each chunk of bytes is held back a uniformly
// drawn time in [Min, Max]. The zero Delay passes bytes on at once.
type Delay struct {
	Min, Max time.Duration
}

func (d Delay) draw(rng *rand.Rand) time.Duration {
	if d.Max <= d.Min {
		return d.Min
	}
	return d.Min + time.Duration(rng.Int64N(int64(d.Max-d.Min)+1))
}

// delays are the two directions' settings; swapped whole, so a reader
// never sees one direction changed and not the other.
type delays struct {
	up   Delay // client → target
	down Delay // target → client
}

// DelayProxy is a TCP proxy on 127.0.0.1 that adds latency, per direction,
// changeable while connections are open (the new delay applies to the next
// chunk). Bytes keep their order: a chunk is never delivered before the one
// read ahead of it. When either side closes or fails, both are closed, so a
// target that dies takes its clients' connections with it, as it would
// without the proxy. It is what Toxiproxy's latency toxic does, in a page.
type DelayProxy struct {
	target string // host:port dialled for each client
	ln     net.Listener
	delay  atomic.Pointer[delays]

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every pipe
}

// NewDelayProxy listens on a free 127.0.0.1 port and forwards every
// connection to target.
func NewDelayProxy(target string) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &DelayProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.delay.Store(&delays{})
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets both directions' latency; Delay{} for none.
func (p *DelayProxy) SetDelay(up, down Delay) { p.delay.Store(&delays{up: up, down: down}) }

// Close stops listening and closes every connection.
func (p *DelayProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve dials the target for one client and pipes both ways until either
// side ends.
func (p *DelayProxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
			p.untrack(client)
			p.untrack(server)
		})
	}
	p.wg.Add(2)
	go p.pipe(client, server, func(d *delays) Delay { return d.up }, closeBoth)
	go p.pipe(server, client, func(d *delays) Delay { return d.down }, closeBoth)
}

// chunk is bytes read and the time they may be written.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, holding each chunk back by the direction's
// current delay, in order.
func (p *DelayProxy) pipe(src, dst net.Conn, which func(*delays) Delay, closeBoth func()) {
	defer p.wg.Done()
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() { // the writer
		defer close(done)
		for c := range q {
			if wait := time.Until(c.at); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.b); err != nil {
				closeBoth()
				for range q { // let the reader finish
				}
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0xde1a7))
	var last time.Time
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now().Add(which(p.delay.Load()).draw(rng))
			if at.Before(last) {
				at = last // never overtake the chunk ahead
			}
			last = at
			q <- chunk{b: buf[:n], at: at}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	closeBoth()
}
