package crowdsim

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Goroutines kept waiting behind a busy one show in the simulator's
// scheduling wait: with one P and a goroutine that does not yield for
// 20 ms ahead of 200 others, the p99 of the waits is milliseconds.
func TestSchedWaitSeesAStarvedScheduler(t *testing.T) {
	before := schedSnapshot()
	if before == nil {
		t.Fatal("the runtime keeps no " + schedLatencies + " histogram")
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() { // hogs the one P until the scheduler preempts it
			defer wg.Done()
			for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
			}
		}()
		runtime.Gosched() // let the hog run first
		for range 200 {   // these wait behind it
			wg.Add(1)
			go func() { defer wg.Done() }()
		}
		wg.Wait()
	}
	p50, p99 := schedWait(before, schedSnapshot())
	if p99 < 2*time.Millisecond || p50 > p99 {
		t.Errorf("schedWait = p50 %v, p99 %v; want a p99 of milliseconds behind 20 ms hogs", p50, p99)
	}
	if p50, p99 := schedWait(before, before); p50 != 0 || p99 != 0 {
		t.Errorf("schedWait of no change = %v, %v; want 0, 0", p50, p99)
	}
}
