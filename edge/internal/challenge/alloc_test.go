//go:build !race

// The race detector makes sync.Pool drop items, so Verify's pooled MAC
// state is made again now and then and allocation counts say nothing:
// make test runs this file in a run of its own without -race
// (deploy/local/test.sh).

package challenge_test

import (
	"testing"

	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// TestVerifyAllocates: a verification allocates nothing, so a flood of joins
// costs the edge no garbage (refusals allocate their error).
func TestVerifyAllocates(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	ch := issue(t, c, account, sale, 8, now).Value
	sol := solve(t, ch)
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.Verify(account, sale, ch, sol, 8, now); err != nil {
			t.Fatalf("Verify = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("Verify allocates %v times, want 0", allocs)
	}
}

// TestVerifyPublicAllocates: nor does a published challenge's.
func TestVerifyPublicAllocates(t *testing.T) {
	now := tokenstest.Start()
	c := newChallenger(t, tokenstest.KeySet(), challenge.Options{})
	ch, err := c.Publish(sale, 8, now)
	if err != nil {
		t.Fatal(err)
	}
	sol, _ := challenge.Solve(ch.Value, account, 1<<20)
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.Verify(account, sale, ch.Value, sol, 8, now); err != nil {
			t.Fatalf("Verify = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("Verify of a published challenge allocates %v times, want 0", allocs)
	}
}
