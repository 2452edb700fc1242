package crowdsim

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuGroups are the processes whose CPU a run accounts for, by the name
// the kernel gives them (comm), and the label the report uses.
var cpuGroups = map[string]string{
	"crowd":          "crowd (the simulator)",
	"edge":           "edge",
	"origin":         "origin",
	"sandboxgateway": "sandbox gateway",
	"naiveserver":    "naive server",
	"redis-server":   "redis",
	"postgres":       "postgres",
}

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat times; it
// is 100 on every Linux this runs on.
const clockTick = 100

// groupPIDs lists the running processes of each group, by label, from
// /proc; off Linux it returns nothing.
func groupPIDs() map[string][]string {
	out := map[string][]string{}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range comms {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if label, ok := cpuGroups[strings.TrimSpace(string(b))]; ok {
			out[label] = append(out[label], filepath.Base(filepath.Dir(path)))
		}
	}
	return out
}

// cpuAffinity is the CPUs each group's processes may run on (the kernel's
// Cpus_allowed_list, as taskset sets it), and their nice values: one of
// each, or several joined with " | " when the group's processes differ.
// It is how the report states the run's pinning and priorities.
func cpuAffinity() (cpus, nice map[string]string) {
	cpus, nice = map[string]string{}, map[string]string{}
	for label, pids := range groupPIDs() {
		var lists, nices []string
		for _, pid := range pids {
			if b, err := os.ReadFile("/proc/" + pid + "/status"); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
						lists = append(lists, strings.TrimSpace(v))
					}
				}
			}
			if n, ok := niceOf(pid); ok {
				nices = append(nices, n)
			}
		}
		if l := distinct(lists); l != "" {
			cpus[label] = l
		}
		if n := distinct(nices); n != "" {
			nice[label] = n
		}
	}
	return cpus, nice
}

// niceOf reads a process's nice value (its main thread's: /proc/<pid>/stat
// field 19).
func niceOf(pid string) (string, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", false
	}
	s := string(b)
	close := strings.LastIndexByte(s, ')')
	if close < 0 {
		return "", false
	}
	// Fields after the comm start at field 3 (state).
	fields := strings.Fields(s[close+1:])
	if len(fields) < 17 {
		return "", false
	}
	return fields[16], true
}

// distinct joins the different values of vs, sorted, with " | ".
func distinct(vs []string) string {
	slices.Sort(vs)
	return strings.Join(slices.Compact(vs), " | ")
}

// cpuTimes reads the CPU time each group's processes have used so far,
// from /proc. Off Linux (no /proc) it returns nothing.
func cpuTimes() map[string]time.Duration {
	out := map[string]time.Duration{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15), counting from 1.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		label, ok := cpuGroups[s[open+1:close]]
		if !ok {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		out[label] += time.Duration(utime+stime) * time.Second / clockTick
	}
	return out
}

// cpuSince is the CPU seconds each group used between two readings
// (processes that ended meanwhile are not counted).
func cpuSince(before, after map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for label, t := range after {
		if d := t - before[label]; d > 0 {
			out[label] = d.Seconds()
		}
	}
	return out
}
