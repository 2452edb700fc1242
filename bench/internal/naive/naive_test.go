package naive

import (
	"context"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/testenv"
)

// The baseline is correct, only slow: 60 concurrent buys of 10 units sell
// exactly 10, and the rest hear sold out.
func TestNaiveSellsExactlyTheStock(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	srv, err := Start(ctx, env.PostgresURL, 10, Options{Schema: "naive_" + testenv.RandomHex(4), PoolSize: 8})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetMethod("POST")
			req.SetRequestURI(srv.URL + "/naive/buy?account=a" + string(rune('a'+i%26)))
			if err := fasthttp.Do(req, resp); err != nil {
				t.Errorf("buy: %v", err)
				return
			}
			mu.Lock()
			codes[resp.StatusCode()]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[201] != 10 || codes[409] != 50 {
		t.Errorf("answers = %v, want 10×201 and 50×409", codes)
	}
	orders, left, err := srv.Sold(ctx)
	if err != nil || orders != 10 || left != 0 {
		t.Errorf("Sold = %d orders, %d left, %v; want 10 and 0", orders, left, err)
	}
}

// A server of another process is driven through its admin routes: a reset
// puts a new sale on (the old orders gone), and the state reads the books.
func TestClientResetsAndReads(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	srv, err := Start(ctx, env.PostgresURL, 3, Options{Schema: "naive_" + testenv.RandomHex(4), PoolSize: 4})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	buy := func() int {
		t.Helper()
		code, _, err := fasthttp.Post(nil, srv.URL+"/naive/buy?account=a", nil)
		if err != nil {
			t.Fatalf("buy: %v", err)
		}
		return code
	}
	c := NewClient(srv.URL)
	for round, stock := range []int{3, 2} {
		if round > 0 {
			if err := c.Reset(ctx, stock); err != nil {
				t.Fatalf("Reset(%d) = %v", stock, err)
			}
		}
		if code := buy(); code != 201 {
			t.Fatalf("round %d: buy = %d, want 201", round, code)
		}
		st, err := c.State(ctx)
		if want := (State{Orders: 1, StockLeft: stock - 1, PoolSize: 4}); err != nil || st != want {
			t.Errorf("round %d: State = %+v, %v; want %+v", round, st, err, want)
		}
	}
	for range 2 {
		buy()
	}
	if code := buy(); code != 409 {
		t.Errorf("buy after the stock = %d, want 409", code)
	}
	for _, bad := range []string{"/naive/admin/reset?stock=-1", "/naive/admin/reset?stock=x"} {
		if code, _, _ := fasthttp.Post(nil, srv.URL+bad, nil); code != 400 {
			t.Errorf("POST %s = %d, want 400", bad, code)
		}
	}
	if code, _, _ := fasthttp.Get(nil, srv.URL+"/healthz"); code != 200 {
		t.Errorf("GET /healthz = %d, want 200", code)
	}
}

// The admin routes reset the sale without a token: the server listens on
// loopback only.
func TestStartListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9400", ":9400", "10.0.0.5:9400", "example.com:9400", "nonsense"} {
		if err := (Options{Addr: addr}).Validate(); err == nil {
			t.Errorf("Options{Addr: %q}.Validate() = nil, want a refusal", addr)
		}
	}
	for _, addr := range []string{"", "127.0.0.1:9400", "[::1]:0", "localhost:9400"} {
		if err := (Options{Addr: addr}).Validate(); err != nil {
			t.Errorf("Options{Addr: %q}.Validate() = %v, want nil", addr, err)
		}
	}
	if _, err := Start(context.Background(), "postgres://127.0.0.1/db", 1, Options{Addr: "0.0.0.0:0"}); err == nil {
		t.Error("Start on 0.0.0.0 succeeded, want a refusal")
	}
}
