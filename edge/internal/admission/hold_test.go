package admission_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/edge/internal/admission"
)

// pool is an upstream's sojourns as a test sets them for the next tick.
type pool struct {
	least    time.Duration
	finished int
	inFlight int
}

// conns is every test pool's connections.
const conns = 128

func (p *pool) TakeLeast() (time.Duration, int) {
	d, n := p.least, p.finished
	p.least, p.finished = 0, 0
	return d, n
}
func (p *pool) InFlight() int { return p.inFlight }
func (p *pool) MaxConns() int { return conns }

// TestCheckoutHoldVerdicts: a tick holds when the quickest of at least
// three requests of a pool took longer than the bound; one or two slow
// ones say nothing; the verdict stands through ticks in which requests are
// in flight but none finished, and clears on a quick one or once the pool
// is idle. A pool with half its connections in flight is behind however
// quick its finished requests were. One pool behind is enough.
func TestCheckoutHoldVerdicts(t *testing.T) {
	reserves, payments := &pool{}, &pool{}
	hold := admission.CheckoutHold(100*time.Millisecond, map[string]admission.Sojourns{"origin": reserves, "origin_payments": payments}, prometheus.NewRegistry())
	steps := []struct {
		name     string
		reserves pool
		payments pool
		want     bool
	}{
		{"idle", pool{}, pool{}, false},
		{"quick answers", pool{least: 5 * time.Millisecond, finished: 9, inFlight: 3}, pool{least: 20 * time.Millisecond, finished: 2, inFlight: 1}, false},
		{"one slow webhook", pool{least: 5 * time.Millisecond, finished: 4}, pool{least: 400 * time.Millisecond, finished: 1, inFlight: 1}, false},
		{"two slow", pool{}, pool{least: 400 * time.Millisecond, finished: 2, inFlight: 1}, false},
		{"the quickest reserve was slow", pool{least: 150 * time.Millisecond, finished: 30, inFlight: 40}, pool{least: 20 * time.Millisecond, finished: 3}, true},
		{"none finished, some in flight", pool{inFlight: 40}, pool{}, true},
		{"one slow: no news", pool{least: 300 * time.Millisecond, finished: 1, inFlight: 40}, pool{}, true},
		{"a quick one again", pool{least: 30 * time.Millisecond, finished: 1, inFlight: 40}, pool{}, false},
		{"payments behind", pool{least: 30 * time.Millisecond, finished: 5}, pool{least: 2 * time.Second, finished: 64, inFlight: conns/2 - 1}, true},
		{"payments idle", pool{}, pool{}, false},
		{"a wave fills the reserve pool, the first answers quick", pool{least: 10 * time.Millisecond, finished: 20, inFlight: conns / 2}, pool{}, true},
		{"still half full", pool{least: 10 * time.Millisecond, finished: 40, inFlight: conns - 1}, pool{}, true},
		{"below half, quick", pool{least: 10 * time.Millisecond, finished: 40, inFlight: conns/2 - 1}, pool{}, false},
	}
	for _, s := range steps {
		*reserves, *payments = s.reserves, s.payments
		if got := hold(); got != s.want {
			t.Errorf("%s: hold = %v, want %v", s.name, got, s.want)
		}
	}
}
