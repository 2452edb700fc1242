package crowdsim

import (
	"math"
	"testing"
	"time"
)

// A uniform burst (the capacity sweep's) arrives at a steady rate: every
// shopper within BurstS, each tenth of it holding a tenth of the crowd; and
// the same seed gives the same people as the default burst, only at other
// times.
func TestCrowdUniformBurst(t *testing.T) {
	sc := DefaultScenario()
	sc.Shoppers, sc.Hammering.Accounts, sc.PreQueueShare, sc.BurstShare, sc.BurstS, sc.UniformBurst = 30_000, 0, 0, 1, 3, true
	shoppers := (&sim{cfg: Config{Scenario: sc, Seed: 7}}).crowd()
	var tenths [10]int
	for _, sh := range shoppers {
		if sh.arrival < 0 || sh.arrival >= 3*time.Second {
			t.Fatalf("arrival %v outside the 3 s burst", sh.arrival)
		}
		tenths[int(sh.arrival*10/(3*time.Second))]++
	}
	for i, n := range tenths {
		if share := float64(n) / float64(sc.Shoppers); math.Abs(share-0.1) > 0.01 {
			t.Errorf("tenth %d of the burst holds %.3f of the crowd, want 0.1 ± 0.01 (%v)", i, share, tenths)
		}
	}
	sc.UniformBurst = false
	densest := (&sim{cfg: Config{Scenario: sc, Seed: 7}}).crowd()
	people := map[string]shopper{}
	for _, sh := range densest {
		people[sh.account] = *sh
	}
	for _, sh := range shoppers {
		d := people[sh.account]
		if d.ip != sh.ip || d.impatient != sh.impatient || d.payer != sh.payer || d.payDelay != sh.payDelay {
			t.Fatalf("%s differs between the uniform and the default burst: %+v vs %+v", sh.account, *sh, d)
		}
	}
}
