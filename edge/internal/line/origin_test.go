package line

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// More line calls at once than the store has connections wait for one
// instead of failing: a node's syncs of every sale it knows must not make
// the active sale's ceiling raise fail behind them.
func TestOriginStoreCallsWaitForAConnection(t *testing.T) {
	var inFlight, most atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond) // a busy origin
		_, _ = fmt.Fprintf(w, `{"sale_id":%q,"post_ceiling":1000}`, r.URL.Path[len("/v1/lines/"):])
	}))
	defer origin.Close()
	store, err := NewOriginStore(origin.URL, tokenstest.KeySet(), "", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	const calls = 3 * originConns
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sale := fmt.Sprintf("s%d", i)
			row, err := store.Line(context.Background(), sale)
			if err == nil && (row.SaleID != sale || row.PostCeiling != 1000) {
				err = fmt.Errorf("Line(%s) = %+v", sale, row)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call with every connection busy: %v; want it to wait for one", err)
		}
	}
	if m := most.Load(); m > originConns {
		t.Errorf("%d calls reached the origin at once, want at most %d", m, originConns)
	}
}
