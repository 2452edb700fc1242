package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// node is one edge node as command edge runs it: app.New's App with its
// loops started (App.Start) and its public handler served by App.Server on
// a 127.0.0.1 port of its own.
type node struct {
	app    *edgeinternals.App
	cfg    edgeinternals.Config
	addr   string
	srv    *fasthttp.Server
	served chan error
	keys   edgeinternals.Keys
}

func startNode(cfg edgeinternals.Config, log *slog.Logger) (*node, error) {
	a, err := edgeinternals.NewApp(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Stop(context.Background())
		return nil, fmt.Errorf("edge: listen: %w", err)
	}
	n := &node{app: a, cfg: cfg, addr: ln.Addr().String(), srv: a.Server(a.API.Public()), served: make(chan error, 1),
		keys: edgeinternals.NewKeys(cfg.RedisPrefix)}
	go func() { n.served <- n.srv.Serve(ln) }()
	a.Start()
	return n, nil
}

// stop is the edge's shutdown order: stop accepting and drain, then stop
// the joins and loops and close Redis.
func (n *node) stop(ctx context.Context) error {
	errs := []error{n.srv.ShutdownWithContext(ctx)}
	if err := <-n.served; err != nil {
		errs = append(errs, fmt.Errorf("edge: serve: %w", err))
	}
	return errors.Join(append(errs, n.app.Stop(ctx))...)
}

// waitSales waits until the node has each sale's snapshot and cursor and
// serves its snapshot: then joins, polls and reserves are answered from a
// fresh view.
func (n *node) waitSales(ctx context.Context, sales ...string) error {
	hc := &fasthttp.HostClient{Addr: n.addr}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(15 * time.Second)
	for _, sale := range sales {
		for {
			_, snap := n.app.Snapshots.Get(sale)
			_, state := n.app.Cursor.State(sale)
			if snap && state {
				status, _, err := hc.GetTimeout(nil, "http://"+n.addr+"/v1/sales/"+sale, 5*time.Second)
				if err == nil && status == fasthttp.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("edge: sale %s not served after 15 s (snapshot %v, cursor %v)", sale, snap, state)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// startsAt is a sale's start as the origin told the node.
func (n *node) startsAt(sale string) time.Time {
	s, _ := n.app.Snapshots.Get(sale)
	return s.StartsAt
}

// counters reads the node's own Prometheus counters that say what its
// answers were: polls by state, rejections by code, joins, admission
// tokens issued, proxied requests by outcome.
func (n *node) counters() map[string]float64 {
	out := map[string]float64{}
	mfs, err := n.app.API.Registry.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "flashgate_edge_polls_total":
				out["poll "+labels["state"]] += m.GetCounter().GetValue()
			case "flashgate_edge_rejections_total":
				out["rejected "+labels["code"]] += m.GetCounter().GetValue()
			case "flashgate_edge_joins_total":
				out["joined"] += m.GetCounter().GetValue()
			case "flashgate_edge_admission_tokens_total":
				out["admission tokens"] += m.GetCounter().GetValue()
			case "flashgate_edge_upstream_seconds":
				out["upstream "+labels["upstream"]+" "+labels["outcome"]] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// countersBetween is what changed from a to b, as whole counts.
func countersBetween(a, b map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range b {
		if d := int(v - a[k]); d != 0 {
			out[k] = d
		}
	}
	return out
}

// bareBody is what the bare handler answers: a small fixed JSON body, the
// size and shape of a status-poll answer.
var bareBody = []byte(`{"state":"waiting","position":12345,"now_serving":2345,"estimated_wait_s":100,"poll_after_ms":25000}`)

// bare is the ceiling every path is set beside: a fasthttp handler that
// answers bareBody, on a server built by the node's own App.Server (same
// timeouts, limits and error handler as the edge's listener).
type bare struct {
	addr   string
	srv    *fasthttp.Server
	served chan error
}

func startBare(n *node) (*bare, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bare server: listen: %w", err)
	}
	b := &bare{addr: ln.Addr().String(), served: make(chan error, 1), srv: n.app.Server(func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(bareBody)
	})}
	go func() { b.served <- b.srv.Serve(ln) }()
	return b, nil
}

func (b *bare) stop(ctx context.Context) error {
	err := b.srv.ShutdownWithContext(ctx)
	return errors.Join(err, <-b.served)
}

// Heap is the Go heap of this process, which runs the edge node: read
// with runtime.ReadMemStats right after a forced GC.
type Heap struct {
	InuseBytes uint64 `json:"heap_inuse_bytes"`
	AllocBytes uint64 `json:"heap_alloc_bytes"`
	SysBytes   uint64 `json:"heap_sys_bytes"`
	Objects    uint64 `json:"heap_objects"`
	Goroutines int    `json:"goroutines"`
}

func readHeap() Heap {
	// Collect until the heap stops shrinking: a stopped node's limiter
	// stores are released only once finalizers (ulule/limiter stops its
	// cleaner goroutine from one) have run after a collection.
	var m runtime.MemStats
	for i := range 6 {
		last := m.HeapInuse
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		runtime.ReadMemStats(&m)
		if i > 1 && m.HeapInuse >= last {
			break
		}
	}
	return Heap{InuseBytes: m.HeapInuse, AllocBytes: m.HeapAlloc, SysBytes: m.HeapSys, Objects: m.HeapObjects, Goroutines: runtime.NumGoroutine()}
}
