// Package inproc runs the product's servers in this process as their
// commands run them: an edge node and the origin, each on a 127.0.0.1 port,
// reached through edge/edgeinternals and origin/origininternals.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// Edge is one running edge node.
type Edge struct {
	App    *edgeinternals.App
	Config edgeinternals.Config
	Addr   string             // host:port of the public listener
	Keys   edgeinternals.Keys // the node's queue keys

	srv    *fasthttp.Server
	served chan error
}

// StartEdge builds a node from cfg with app.New, serves its public handler on
// 127.0.0.1 and starts its loops. A nil log discards the node's log.
func StartEdge(cfg edgeinternals.Config, log *slog.Logger) (*Edge, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := edgeinternals.NewApp(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Stop(context.Background())
		return nil, fmt.Errorf("edge: listen: %w", err)
	}
	n := &Edge{App: a, Config: cfg, Addr: ln.Addr().String(), Keys: edgeinternals.NewKeys(cfg.RedisPrefix),
		srv: a.Server(a.API.Public()), served: make(chan error, 1)}
	go func() { n.served <- n.srv.Serve(ln) }()
	a.Start()
	return n, nil
}

// Stop is the edge's shutdown order: stop accepting and drain, then stop
// the joins and loops and close Redis.
func (n *Edge) Stop(ctx context.Context) error {
	errs := []error{n.srv.ShutdownWithContext(ctx)}
	if err := <-n.served; err != nil {
		errs = append(errs, fmt.Errorf("edge: serve: %w", err))
	}
	return errors.Join(append(errs, n.App.Stop(ctx))...)
}

// WaitSales waits until the node has each sale's snapshot and cursor and
// serves its snapshot: then joins, polls and reserves are answered from a
// fresh view. It gives up after 15 s.
func (n *Edge) WaitSales(ctx context.Context, sales ...string) error {
	hc := &fasthttp.HostClient{Addr: n.Addr}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(15 * time.Second)
	for _, sale := range sales {
		for {
			_, snap := n.App.Snapshots.Get(sale)
			_, state := n.App.Cursor.State(sale)
			if snap && state {
				status, _, err := hc.GetTimeout(nil, "http://"+n.Addr+"/v1/sales/"+sale, 5*time.Second)
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

// WaitServing waits until the node's view has the sale's cursor at least
// at serving; it gives up after 5 s.
func (n *Edge) WaitServing(ctx context.Context, sale string, serving int64) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := n.App.Cursor.State(sale); ok && st.NowServing >= serving {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node never read sale %s's cursor at %d", sale, serving)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StartsAt is a sale's start as the origin told the node.
func (n *Edge) StartsAt(sale string) time.Time {
	s, _ := n.App.Snapshots.Get(sale)
	return s.StartsAt
}

// Counters reads the node's own Prometheus counters that say what its
// answers were: polls by state, rejections by code, joins, admission
// tokens issued, proxied requests by outcome.
func (n *Edge) Counters() map[string]float64 {
	out := map[string]float64{}
	mfs, err := n.App.API.Registry.Gather()
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

// CountersBetween is what changed from a to b, as whole counts.
func CountersBetween(a, b map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range b {
		if d := int(v - a[k]); d != 0 {
			out[k] = d
		}
	}
	return out
}
