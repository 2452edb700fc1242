package app_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/testenv"
)

// BenchmarkStatusHandler runs the public handler on status polls in-process
// (no listener, no client): the CPU and allocations of the poll path alone.
// The limiters run with limits out of reach. Each poll carries the
// shopper's user token too, as the page sends it. Polls of waiting shoppers only,
// then with every shopper admitted (each poll signs an admission token).
func BenchmarkStatusHandler(b *testing.B) {
	origin := edgetest.NewStubOrigin(b)
	const sale = "bench"
	// Stock enough that admission runs at the set rate, not paced to scarce units.
	origin.SetSale(edgetest.OpenSale(sale, 1_000_000))
	cfg := edgetest.Config(edgetest.NewRedis(b), origin.URL)
	cfg.StaleAfter = time.Hour
	const unreachable = "1000000000-S"
	cfg.LimitPollIP, cfg.LimitPollSubnet, cfg.LimitPollAccount = unreachable, unreachable, unreachable
	n := edgetest.StartNode(b, cfg)
	n.WaitSale(b, sale)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Paused while the shoppers join, so that all of them wait.
	paused := true
	if _, applied, err := n.App.Line.Settings(ctx, sale, line.Change{Paused: &paused}); err != nil || !applied {
		b.Fatalf("Settings = %v, in Redis %v; want nil, true", err, applied)
	}
	if err := n.App.Admission.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	snap, _ := n.App.Snapshots.Get(sale)
	const shoppers = 1000
	tokens, users := make([][]byte, shoppers), make([][]byte, shoppers)
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
		tokens[i], users[i] = []byte("Bearer "+tok), []byte(edgetest.UserToken(b, account))
	}
	h := n.App.API.Public()
	run := func(b *testing.B, wantState string) {
		last := serveLoop(b, h, fasthttp.StatusOK, func(req *fasthttp.Request, i int) {
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI("/v1/sales/" + sale + "/queue/status")
			req.Header.SetBytesV(fasthttp.HeaderAuthorization, tokens[i%shoppers])
			req.Header.SetBytesV("X-User-Token", users[i%shoppers])
		})
		if body := string(last); len(body) < 12 || body[:10] != `{"state":"` || body[10:10+len(wantState)] != wantState {
			b.Fatalf("poll answer %s, want state %s", body, wantState)
		}
	}
	b.Run("waiting", func(b *testing.B) { run(b, "waiting") })
	paused, rate := false, 1e6
	if _, applied, err := n.App.Line.Settings(ctx, sale, line.Change{RatePerSecond: &rate, Paused: &paused}); err != nil || !applied {
		b.Fatalf("Settings = %v, in Redis %v; want nil, true", err, applied)
	}
	// The cursor moves as fast as the line keeper raises its serving
	// ceiling: tick until it has passed every shopper.
	testenv.Eventually(b, 10*time.Second, fmt.Sprintf("the cursor passing %d shoppers", shoppers), func() bool {
		if err := n.App.Admission.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		st, _ := n.App.Admission.State(sale)
		return st.NowServing >= shoppers
	})
	b.Run("admitted", func(b *testing.B) { run(b, "admitted") })
}

// benchPeer is the client address of the in-process benchmarks.
var benchPeer = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}

// serveLoop runs h in-process once per benchmark iteration i on the request
// set(req, i) writes (into a request reset each time), reusing the request
// context as fasthttp's server does, and fails b on any answer other than
// want. It returns the last answer's body.
func serveLoop(b *testing.B, h fasthttp.RequestHandler, want int, set func(req *fasthttp.Request, i int)) []byte {
	var rc fasthttp.RequestCtx
	var req fasthttp.Request
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req.Reset()
		set(&req, i)
		i++
		rc.Init(&req, benchPeer, nil)
		h(&rc)
		if status := rc.Response.StatusCode(); status != want {
			b.Fatalf("%s %s = %d %s, want %d", req.Header.Method(), req.RequestURI(), status, rc.Response.Body(), want)
		}
	}
	return append([]byte(nil), rc.Response.Body()...)
}

// BenchmarkJoinHandler runs the public handler on joins in-process, each by
// a new account: the CPU and allocations of the join path, its Redis round
// trip included (the Joiner's linger is the floor of its latency).
func BenchmarkJoinHandler(b *testing.B) {
	origin := edgetest.NewStubOrigin(b)
	const sale = "bench-join"
	origin.SetSale(edgetest.OpenSale(sale, 10))
	cfg := edgetest.Config(edgetest.NewRedis(b), origin.URL)
	cfg.StaleAfter = time.Hour
	n := edgetest.StartNode(b, cfg)
	n.WaitSale(b, sale)
	const accounts = 1 << 14
	users := make([][]byte, accounts)
	for i := range users {
		users[i] = []byte("Bearer " + edgetest.UserToken(b, fmt.Sprintf("joiner-%09d", i)))
	}
	serveLoop(b, n.App.API.Public(), fasthttp.StatusAccepted, func(req *fasthttp.Request, i int) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("/v1/sales/" + sale + "/queue")
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, users[i%accounts])
	})
}

// BenchmarkSoldOutReserve runs the public handler on reserves of a sale the
// snapshot says is sold out: the 409 the stampede after the last unit gets,
// answered before any token work.
func BenchmarkSoldOutReserve(b *testing.B) {
	origin := edgetest.NewStubOrigin(b)
	const sale = "bench-soldout"
	s := edgetest.OpenSale(sale, 0)
	s.Status, s.SoldOut, s.Final = "sold_out", true, true
	origin.SetSale(s)
	cfg := edgetest.Config(edgetest.NewRedis(b), origin.URL)
	n := edgetest.StartNode(b, cfg)
	n.WaitSale(b, sale)
	body := reserveBody("sku-1", "late")
	serveLoop(b, n.App.API.Public(), fasthttp.StatusConflict, func(req *fasthttp.Request, _ int) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("/v1/sales/" + sale + "/reserve")
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	})
}
