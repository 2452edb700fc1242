package crowdsim

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// coreLoopRounds is the fixed work coreLoop times: about 70 ms on a quick
// core of this machine.
const coreLoopRounds = 40_000_000

// coreSink keeps the compiler from dropping the loop (atomic: two runs may
// time their cores at once).
var coreSink atomic.Uint64

// CoreSpeeds times a fixed loop on each CPU the machine has online (not
// only those this process may use: the simulator is pinned away from the
// stack's): on a shared VM a core may run at half its speed for minutes
// (another tenant's load on the host, which the guest cannot see), and the
// stack's core being slow is not the system being slow. A CPU that cannot
// be reached (a cpuset) is left out; off Linux it returns nothing.
func CoreSpeeds() map[string]float64 {
	out := map[string]float64{}
	for _, cpu := range onlineCPUs() {
		if ms, ok := coreLoop(cpu); ok {
			out[strconv.Itoa(cpu)] = ms
		}
	}
	return out
}

// onlineCPUs reads the kernel's list of online CPUs ("0-3,6"); nil when it
// cannot.
func onlineCPUs() []int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList parses a kernel CPU list ("0-3,6"); a malformed part is
// skipped.
func parseCPUList(list string) []int {
	var out []int
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				continue
			}
		}
		for cpu := first; cpu <= last; cpu++ {
			out = append(out, cpu)
		}
	}
	return out
}

// coreLoop runs the loop on one CPU, on a thread of its own, and returns
// how many milliseconds it took.
func coreLoop(cpu int) (float64, bool) {
	done := make(chan float64, 1)
	go func() {
		// The thread ends with the goroutine (still locked), so its
		// changed affinity never runs anyone else.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- -1
			return
		}
		start := time.Now()
		x := uint64(88172645463325252)
		for range coreLoopRounds {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		coreSink.Add(x)
		done <- float64(time.Since(start).Microseconds()) / 1000
	}()
	ms := <-done
	return ms, ms >= 0
}
