// The Go heap of this process, for the memory benchmarks: settled after
// collections, sampled for its peak, and waited on until released.

package procstat

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Heap is the Go heap of this process, read with runtime.ReadMemStats once
// collections stop shrinking it.
type Heap struct {
	InuseBytes uint64 `json:"heap_inuse_bytes"`
	AllocBytes uint64 `json:"heap_alloc_bytes"`
	SysBytes   uint64 `json:"heap_sys_bytes"`
	Objects    uint64 `json:"heap_objects"`
	Goroutines int    `json:"goroutines"`
}

// ReadHeap collects until the heap stops shrinking, then reads it: a stopped
// edge node's limiter stores are released only once finalizers
// (ulule/limiter stops its cleaner goroutine from one) have run after a
// collection.
func ReadHeap() Heap {
	var m runtime.MemStats
	for i := range 6 {
		last := m.HeapInuse
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		runtime.ReadMemStats(&m)
		if i > 1 && m.HeapInuse >= last {
			break
		}
	}
	return Heap{InuseBytes: m.HeapInuse, AllocBytes: m.HeapAlloc, SysBytes: m.HeapSys, Objects: m.HeapObjects, Goroutines: runtime.NumGoroutine()}
}

// SampleHeapPeak reads HeapInuse ten times a second, without forcing a GC,
// until the function it returns is called; that returns the largest value.
func SampleHeapPeak() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// SettleHeap collects garbage until the heap in use is back to at most target,
// for up to wait or until ctx ends. A stopped edge node lingers: fasthttp's
// worker-pool cleaner holds its server (and through the handler the whole
// App) until its next wake-up, up to 10 s later, and ulule/limiter stops
// its cleaners only from finalizers, which run after a collection finds the
// store unreachable.
func SettleHeap(ctx context.Context, target uint64, wait time.Duration) {
	deadline := time.Now().Add(wait)
	var m runtime.MemStats
	for time.Now().Before(deadline) {
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapInuse <= target {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}
