package payment

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// A burst of calls keeps its connections open for the next: the second
// burst dials nothing, and no burst opens more than MaxConns.
func TestClientKeepsItsConnections(t *testing.T) {
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"pi_1","status":"requires_payment","pay_url":"http://gw/pay/pi_1"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	const maxConns = 16
	c := NewClient(srv.URL, "sk_test", ClientOptions{MaxConns: maxConns})
	burst := func() {
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.CreateIntent(context.Background(), NewIntent{AmountMinor: 100, Currency: "INR"}, "k"); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	burst()
	first := dials.Load()
	if first > maxConns {
		t.Fatalf("200 concurrent calls opened %d connections, want at most MaxConns = %d", first, maxConns)
	}
	burst()
	if again := dials.Load() - first; again != 0 {
		t.Fatalf("a second burst opened %d new connections, want 0 (the first burst's stay open)", again)
	}
}
