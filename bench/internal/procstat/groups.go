// CPU time of groups of processes, read from /proc: the crowd's table of
// where the cores went, per run and per second.

package procstat

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Groups names the processes whose CPU a run accounts for: the name the
// kernel gives them (comm) → the label a report uses.
type Groups map[string]string

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat times; it
// is 100 on every Linux this runs on.
const clockTick = 100

// Services names the ports of the run's Redis and Postgres: their groups
// then count only the process listening there and its children (Postgres's
// backends), not every redis-server or postgres on the machine (tests'
// own servers, other databases' clients stay out). A zero port counts every
// process of that name.
type Services struct {
	RedisPort, PostgresPort int
}

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid, comm string
	cpu             time.Duration // user + system so far
	// children is the user + system time of its children that ended and
	// were waited for: a Postgres backend that exits (a client dropped its
	// connection) stays counted in its postmaster's.
	children time.Duration
	nice     string
}

// procs reads every process's stat line; off Linux it returns nothing.
// It lists /proc once and opens each process's stat file by name: a glob
// of /proc/[0-9]*/stat lists every process's folder as well, which took
// ~12 ms a reading here, each second, on the simulator's own core.
func procs() []proc {
	var out []proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if !isPID(e.Name()) {
			continue
		}
		if p, ok := readProc(e.Name()); ok { // not: it ended since the listing
			out = append(out, p)
		}
	}
	return out
}

// readProc reads one process's stat line; false when it has ended.
func readProc(pid string) (proc, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid ... utime(14) stime(15) cutime(16) cstime(17) ... nice(19), counting from 1.
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return proc{}, false
	}
	fields := strings.Fields(s[close+1:]) // from field 3 on
	if len(fields) < 17 {
		return proc{}, false
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	cutime, _ := strconv.ParseInt(fields[13], 10, 64)
	cstime, _ := strconv.ParseInt(fields[14], 10, 64)
	return proc{
		pid: strings.TrimSpace(s[:open]), ppid: fields[1], comm: s[open+1 : close],
		cpu:      time.Duration(utime+stime) * time.Second / clockTick,
		children: time.Duration(cutime+cstime) * time.Second / clockTick, nice: fields[16],
	}, true
}

// isPID reports whether a /proc entry is a process's folder.
func isPID(name string) bool {
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return name != ""
}

// listeners finds the process listening on each known service port, by
// the service's comm; a port nothing listens on maps to "" (its group then
// counts nothing, rather than every process of that name). Finding them
// reads every process's file descriptors, so a meter finds them once.
func (sv Services) listeners() map[string]string {
	out := map[string]string{}
	for comm, port := range map[string]int{"redis-server": sv.RedisPort, "postgres": sv.PostgresPort} {
		if port > 0 {
			out[comm] = listenerPID(port)
		}
	}
	return out
}

// grouped sorts the processes of the run's groups by label, keeping only
// the listeners' trees for the services whose listeners were looked for.
func (g Groups) grouped(all []proc, listeners map[string]string) map[string][]proc {
	keep := map[string]map[string]bool{} // comm → the pids of its listener's tree
	for comm, pid := range listeners {
		keep[comm] = treeOf(all, pid)
	}
	out := map[string][]proc{}
	for _, p := range all {
		label, ok := g[p.comm]
		if !ok {
			continue
		}
		if tree, scoped := keep[p.comm]; scoped && !tree[p.pid] {
			continue
		}
		out[label] = append(out[label], p)
	}
	return out
}

// treeOf is pid and its children.
func treeOf(all []proc, pid string) map[string]bool {
	tree := map[string]bool{}
	if pid == "" {
		return tree
	}
	tree[pid] = true
	for _, p := range all {
		if p.ppid == pid {
			tree[p.pid] = true
		}
	}
	return tree
}

// listenerPID finds the process listening on a TCP port (IPv4 or IPv6):
// the socket's inode from /proc/net/tcp*, then the process holding it; ""
// when none is found (or this is not Linux).
func listenerPID(port int) string {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if n, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(n) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	var holders []proc
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			if p, ok := readProc(strings.Split(fd, "/")[2]); ok { // not: it ended since the scan
				holders = append(holders, p)
			}
		}
	}
	return rootHolder(holders)
}

// rootHolder picks the listener among the processes holding its socket: a
// process forked by the listener holds the socket too until it closes it
// (a Postgres backend just started), so it is the holder whose parent is
// not one; of several such, the lowest pid, whatever order they came in.
func rootHolder(holders []proc) string {
	held := map[string]bool{}
	for _, p := range holders {
		held[p.pid] = true
	}
	listener, lowest := "", int64(math.MaxInt64)
	for _, p := range holders {
		n, err := strconv.ParseInt(p.pid, 10, 64)
		if err != nil || held[p.ppid] || n >= lowest {
			continue
		}
		listener, lowest = p.pid, n
	}
	return listener
}

// Affinity is the CPUs each group's processes may run on (the kernel's
// Cpus_allowed_list, as taskset sets it), and their nice values: one of
// each, or several joined with " | " when the group's processes differ.
// It is how the report states the run's pinning and priorities.
func (g Groups) Affinity(sv Services) (cpus, nice map[string]string) {
	cpus, nice = map[string]string{}, map[string]string{}
	for label, ps := range g.grouped(procs(), sv.listeners()) {
		var lists, nices []string
		for _, p := range ps {
			if b, err := os.ReadFile("/proc/" + p.pid + "/status"); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
						lists = append(lists, strings.TrimSpace(v))
					}
				}
			}
			nices = append(nices, p.nice)
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

// distinct joins the different values of vs, sorted, with " | ".
func distinct(vs []string) string {
	slices.Sort(vs)
	return strings.Join(slices.Compact(vs), " | ")
}

// Times reads the CPU time each group's processes have used so far,
// their ended children's included.
func (g Groups) Times(sv Services) map[string]time.Duration {
	return g.timesOf(sv.listeners())
}

// timesOf is Times with the services' listeners already found.
func (g Groups) timesOf(listeners map[string]string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for label, ps := range g.grouped(procs(), listeners) {
		for _, p := range ps {
			out[label] += p.cpu + p.children
		}
	}
	return out
}

// CPUSince is the CPU seconds each group used between two readings
// (a process that ended meanwhile counts only if its parent, in the group,
// waited for it: Postgres's backends do; a group's own top process that
// ended does not).
func CPUSince(before, after map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for label, t := range after {
		if d := t - before[label]; d > 0 {
			out[label] = d.Seconds()
		}
	}
	return out
}

// Meter reads each group's CPU time once a second while a run lasts:
// where the cores went, second by second, for the timeline. A run's
// averages hide the second that matters (the opening, the poll echo).
type Meter struct {
	mu       sync.Mutex // guards readings
	readings []cpuReading
}

type cpuReading struct {
	at    time.Duration // since the sale's start
	times map[string]time.Duration
}

// Run reads g until ctx ends; since is the clock of the run's timeline.
func (m *Meter) Run(ctx context.Context, g Groups, sv Services, since func() time.Duration) {
	listeners := sv.listeners()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		times := g.timesOf(listeners)
		m.mu.Lock()
		m.readings = append(m.readings, cpuReading{at: since(), times: times})
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PerSecond is the cores each group used between consecutive readings, by
// the second of the timeline that holds the interval's middle.
func (m *Meter) PerSecond() map[int]map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]map[string]float64{}
	for i := 1; i < len(m.readings); i++ {
		a, b := m.readings[i-1], m.readings[i]
		wall := (b.at - a.at).Seconds()
		if wall <= 0 {
			continue
		}
		cores := map[string]float64{}
		for label, d := range CPUSince(a.times, b.times) {
			cores[label] = d / wall
		}
		out[int(math.Floor((a.at+b.at).Seconds()/2))] = cores
	}
	return out
}
