package reservepeers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/internal/testenv"
)

const (
	testSale = "peers"
	testSKU  = "unit"
)

// reserves returns n reserve requests for sale and sku, each with the body
// body(i).
func reserves(n int, body func(i int) string) []loadgen.HTTPRequest {
	reqs := make([]loadgen.HTTPRequest, n)
	for i := range reqs {
		reqs[i] = loadgen.HTTPRequest{Method: fasthttp.MethodPost, Path: "/v1/sales/" + testSale + "/reserve",
			ContentType: "application/json", Body: []byte(body(i))}
	}
	return reqs
}

// drive sends reqs to addr from conns connections.
func drive(t *testing.T, addr string, conns int, reqs []loadgen.HTTPRequest) loadgen.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := loadgen.NewHTTP(loadgen.HTTPOptions{Addr: addr, Conns: conns})
	defer c.Close()
	res := c.Run(ctx, reqs, 0, len(reqs))
	if res.Errors > 0 || res.Cut {
		t.Fatalf("%d of %d requests failed (cut %v), first: %v", res.Errors, len(reqs), res.Cut, res.Err)
	}
	return res
}

func startSeckill(t *testing.T, stock int) (*Seckill, *testenv.Redis) {
	t.Helper()
	r := testenv.NewRedis(t, testenv.RedisURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := StartSeckill(ctx, SeckillConfig{RedisURL: r.URL, Prefix: r.Prefix, Sale: testSale, SKU: testSKU, Stock: stock, PoolSize: 8})
	if err != nil {
		t.Fatalf("StartSeckill: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s, r
}

// TestSeckillSellsExactlyTheStock: many connections at once, every request
// the same (one idempotency key, no account, no token, which the seckill
// never reads): exactly the stock is taken, the rest are told sold out,
// and the counter ends at zero with the sold-out flag set.
func TestSeckillSellsExactlyTheStock(t *testing.T) {
	const stock, n = 50, 600
	s, r := startSeckill(t, stock)
	res := drive(t, s.Addr, 20, reserves(n, func(int) string { return `{"sku":"unit","idempotency_key":"same"}` }))
	if got := res.Labels[fasthttp.StatusCreated]; got != stock {
		t.Errorf("201 answers = %d, want %d (all answers %v)", got, stock, res.Labels)
	}
	if got := res.Labels[fasthttp.StatusConflict]; got != n-stock {
		t.Errorf("409 answers = %d, want %d (all answers %v)", got, n-stock, res.Labels)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sold, err := s.Sold(ctx); err != nil || sold != stock {
		t.Errorf("Sold() = %d, %v; want %d", sold, err, stock)
	}
	if left, err := r.Client.Get(ctx, stockKey(r.Prefix, testSale, testSKU)).Int(); err != nil || left != 0 {
		t.Errorf("counter = %d, %v; want 0", left, err)
	}
	if !s.soldOut.Load() {
		t.Error("sold-out flag not set after the stock ran out")
	}
}

// TestSeckillAnswers: what the seckill answers besides taking a unit.
func TestSeckillAnswers(t *testing.T) {
	s, _ := startSeckill(t, 1)
	hc := &fasthttp.Client{}
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"another route", fasthttp.MethodPost, "/v1/sales/peers/buy", `{"sku":"unit"}`, fasthttp.StatusNotFound},
		{"GET", fasthttp.MethodGet, "/v1/sales/peers/reserve", "", fasthttp.StatusNotFound},
		{"no sku", fasthttp.MethodPost, "/v1/sales/peers/reserve", `{"idempotency_key":"k"}`, fasthttp.StatusBadRequest},
		{"not JSON", fasthttp.MethodPost, "/v1/sales/peers/reserve", `sku=unit`, fasthttp.StatusBadRequest},
		{"another sale", fasthttp.MethodPost, "/v1/sales/other/reserve", `{"sku":"unit"}`, fasthttp.StatusNotFound},
		{"another sku", fasthttp.MethodPost, "/v1/sales/peers/reserve", `{"sku":"other"}`, fasthttp.StatusNotFound},
		{"the one unit", fasthttp.MethodPost, "/v1/sales/peers/reserve", `{"sku":"unit"}`, fasthttp.StatusCreated},
		{"sold out", fasthttp.MethodPost, "/v1/sales/peers/reserve", `{"sku":"unit"}`, fasthttp.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := send(t, hc, s.URL, tc.method, tc.path, tc.body); got != tc.want {
				t.Errorf("%s %s %s = %d, want %d", tc.method, tc.path, tc.body, got, tc.want)
			}
		})
	}
}

// send makes one request and returns its status.
func send(t *testing.T, hc *fasthttp.Client, url, method, path, body string) int {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url + path)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	if err := hc.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode()
}

func startSerializable(t *testing.T, stock int) *Serializable {
	t.Helper()
	env := testenv.New(t) // the test database exists; the server makes a schema of its own beside env's
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := StartSerializable(ctx, SerializableConfig{PostgresURL: testenv.PostgresURL(), Schema: env.Schema + "_pg",
		Sale: testSale, SKU: testSKU, Stock: stock, PoolSize: 8})
	if err != nil {
		t.Fatalf("StartSerializable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// TestSerializableNeverOversells: under many connections at once some
// transactions fail to serialize and are answered 503, but no unit is sold
// twice, every 201 has its order, and nothing else is answered.
func TestSerializableNeverOversells(t *testing.T) {
	const stock, n = 20, 300
	s := startSerializable(t, stock)
	res := drive(t, s.Addr, 16, reserves(n, func(i int) string {
		return fmt.Sprintf(`{"sku":"unit","idempotency_key":"k%d","account":"a%d"}`, i, i)
	}))
	created, soldOut, failed := res.Labels[fasthttp.StatusCreated], res.Labels[fasthttp.StatusConflict], res.Labels[fasthttp.StatusServiceUnavailable]
	if created > stock || created < 1 || created+soldOut+failed != n {
		t.Errorf("answers %v: 201 %d, 409 %d, 503 %d; want 1 to %d answered 201 and every answer one of the three", res.Labels, created, soldOut, failed, stock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sold, err := s.Sold(ctx); err != nil || sold != created {
		t.Errorf("Sold() = %d, %v; want %d, one order per 201", sold, err, created)
	}
	t.Logf("stock %d: 201 %d, 409 %d, 503 %d", stock, created, soldOut, failed)
}

// TestSerializableAnswers: one request at a time nothing conflicts, so the
// stock sells exactly; bodies without an account or for another SKU are
// refused.
func TestSerializableAnswers(t *testing.T) {
	s := startSerializable(t, 2)
	hc := &fasthttp.Client{}
	const path = "/v1/sales/peers/reserve"
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"no account", path, `{"sku":"unit","idempotency_key":"k"}`, fasthttp.StatusBadRequest},
		{"another sku", path, `{"sku":"other","account":"a"}`, fasthttp.StatusNotFound},
		{"another sale", "/v1/sales/other/reserve", `{"sku":"unit","account":"a"}`, fasthttp.StatusNotFound},
		{"first unit", path, `{"sku":"unit","idempotency_key":"k1","account":"a1"}`, fasthttp.StatusCreated},
		{"second unit, same shopper and key", path, `{"sku":"unit","idempotency_key":"k1","account":"a1"}`, fasthttp.StatusCreated},
		{"sold out", path, `{"sku":"unit","idempotency_key":"k2","account":"a2"}`, fasthttp.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := send(t, hc, s.URL, fasthttp.MethodPost, tc.path, tc.body); got != tc.want {
				t.Errorf("POST %s %s = %d, want %d", tc.path, tc.body, got, tc.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sold, err := s.Sold(ctx); err != nil || sold != 2 {
		t.Errorf("Sold() = %d, %v; want 2", sold, err)
	}
}
