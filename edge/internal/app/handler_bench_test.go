package app_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// BenchmarkStatusHandler runs the public handler on status polls in-process
// (no listener, no client): the CPU and allocations of the poll path alone.
// The limiters run with limits out of reach. Polls of waiting shoppers only,
// then with every shopper admitted (each poll signs an admission token).
func BenchmarkStatusHandler(b *testing.B) {
	origin := edgetest.NewStubOrigin(b)
	const sale = "bench"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(b), origin.URL)
	cfg.StaleAfter = time.Hour
	const unreachable = "1000000000-S"
	cfg.LimitPollIP, cfg.LimitPollAccount = unreachable, unreachable
	n := edgetest.StartNode(b, cfg)
	n.WaitSale(b, sale)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, _ := n.App.Snapshots.Get(sale)
	const shoppers = 1000
	tokens := make([][]byte, shoppers)
	for i := range shoppers {
		account := fmt.Sprintf("user-%09d", i)
		place, err := joinWaiting(ctx, n, sale, snap.StartsAt, account)
		if err != nil {
			b.Fatal(err)
		}
		tok, _, err := issuer.Queue(sale, account, place.Position, false, snap.EndsAt.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = []byte("Bearer " + tok)
	}
	h := n.App.API.Public()
	run := func(b *testing.B, wantState string) {
		var rc fasthttp.RequestCtx
		var req fasthttp.Request
		addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req.Reset()
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI("/v1/sales/" + sale + "/queue/status")
			req.Header.SetBytesV(fasthttp.HeaderAuthorization, tokens[i%shoppers])
			i++
			rc.Init(&req, addr, nil)
			h(&rc)
			if rc.Response.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("poll = %d %s", rc.Response.StatusCode(), rc.Response.Body())
			}
		}
		var probe fasthttp.RequestCtx
		probe.Init(&req, addr, nil)
		h(&probe)
		if body := string(probe.Response.Body()); len(body) < 12 || body[:10] != `{"state":"` || body[10:10+len(wantState)] != wantState {
			b.Fatalf("poll answer %s, want state %s", body, wantState)
		}
	}
	paused := true
	if _, applied, err := n.App.Line.Settings(ctx, sale, nil, &paused); err != nil || !applied {
		b.Fatalf("Settings = %v, in Redis %v; want nil, true", err, applied)
	}
	if err := n.App.API.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("waiting", func(b *testing.B) { run(b, "waiting") })
	paused, rate := false, 1e6
	if _, applied, err := n.App.Line.Settings(ctx, sale, &rate, &paused); err != nil || !applied {
		b.Fatalf("Settings = %v, in Redis %v; want nil, true", err, applied)
	}
	time.Sleep(50 * time.Millisecond)
	for range 3 {
		if err := n.App.API.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Run("admitted", func(b *testing.B) { run(b, "admitted") })
}
