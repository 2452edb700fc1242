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
