package crowdsim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A set-up that overruns its lead (the edge learns of the sale late) sets
// up a new sale with twice the lead, and the run plays that one.
func TestSetUpAgainWhenTheEdgeLearnsLate(t *testing.T) {
	var mu sync.Mutex
	created := map[string]time.Time{} // sale -> when the origin took it
	var order []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sale struct {
			SaleID string `json:"sale_id"`
		}
		if r.Method != "POST" || r.URL.Path != "/admin/sales" || json.NewDecoder(r.Body).Decode(&sale) != nil {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		mu.Lock()
		created[sale.SaleID] = time.Now()
		order = append(order, sale.SaleID)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer origin.Close()
	// The edge learns of the first sale 1.5 s after it was made (past any
	// lead of 100 ms, which the start's rounding stretches by up to a
	// second), of the later ones at once.
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sale, isSale := strings.CutPrefix(r.URL.Path, "/v1/sales/")
		switch {
		case r.Method == "GET" && isSale:
			mu.Lock()
			at, ok := created[sale]
			late := sale == "setup" && time.Since(at) < 1500*time.Millisecond
			mu.Unlock()
			if !ok || late {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(`{}`))
		case r.Method == "PUT" && strings.HasSuffix(r.URL.Path, "/admission"):
			w.Write([]byte(`{}`))
		default:
			http.Error(w, "unexpected", http.StatusTeapot)
		}
	}))
	defer edge.Close()

	var logged []string
	s := &sim{cfg: Config{SaleID: "setup", SetUp: 100 * time.Millisecond, OriginAdminURL: origin.URL,
		EdgeURL: edge.URL, EdgeAdminURL: edge.URL, Progress: func(f string, a ...any) { logged = append(logged, f) }}}
	if err := s.setUpWithin(context.Background()); err != nil {
		t.Fatalf("setUpWithin = %v, want the second sale set up", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if s.sale != "setup-2" || len(order) != 2 || order[0] != "setup" || order[1] != "setup-2" {
		t.Errorf("sale played %q, sales made %v; want setup-2 after setup", s.sale, order)
	}
	if len(logged) != 1 {
		t.Errorf("progress lines %q, want one saying the set-up is tried again", logged)
	}
}
