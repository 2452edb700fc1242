// Package delayproxy is a TCP proxy that adds latency: what stands for a slow
// Redis under make chaos and for the distance between two regions under
// make run-cluster's regions (command bench/delayproxy).
package delayproxy

import (
	"context"
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

// Proxy is a TCP proxy that adds latency, per direction, changeable while
// connections are open (the new delay applies to the next chunk). Bytes keep
// their order: a chunk is never delivered before the one read ahead of it.
// When either side closes or fails, both are closed, so a target that dies
// takes its clients' connections with it, as it would without the proxy. It
// is what Toxiproxy's latency toxic does, in a page.
type Proxy struct {
	resolve Resolver // the target for each new client
	ln      net.Listener
	delay   atomic.Pointer[delays]

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every pipe
}

// Resolver names the host:port a new client's connection is forwarded to.
// It is asked once per connection, so a target that moves (a Redis primary
// Sentinel replaced) is followed by the connections opened after the move.
type Resolver func(ctx context.Context) (string, error)

// To is the Resolver of a target that stays where it is.
func To(target string) Resolver {
	return func(context.Context) (string, error) { return target, nil }
}

// New listens on a free 127.0.0.1 port and forwards every connection to
// target.
func New(target string) (*Proxy, error) { return Listen("127.0.0.1:0", To(target)) }

// Listen listens on addr and forwards every connection to where resolve
// says, with no delay until SetDelay.
func Listen(addr string, resolve Resolver) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{resolve: resolve, ln: ln, conns: map[net.Conn]struct{}{}}
	p.delay.Store(&delays{})
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets both directions' latency; Delay{} for none.
func (p *Proxy) SetDelay(up, down Delay) { p.delay.Store(&delays{up: up, down: down}) }

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
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

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
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
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	target, err := p.resolve(ctx)
	var server net.Conn
	if err == nil {
		var d net.Dialer
		server, err = d.DialContext(ctx, "tcp", target)
	}
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
func (p *Proxy) pipe(src, dst net.Conn, which func(*delays) Delay, closeBoth func()) {
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
