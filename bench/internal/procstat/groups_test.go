package procstat

import (
	"context"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// testGroups are groups as the crowd names them.
var testGroups = Groups{"edge": "edge", "postgres": "postgres", "redis-server": "redis"}

// The CPU accounting finds the process listening on a port (this test's),
// and scopes a service's group to the listener's tree: another server of
// the same name, and its children, are left out.
func TestCPUScopesServicesToTheirListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if got, want := listenerPID(port), strconv.Itoa(os.Getpid()); got != want {
		t.Fatalf("listenerPID(%d) = %q, want this process, %s", port, got, want)
	}
	// A child that holds the listening socket too (as a Postgres backend
	// does for a moment after its fork) is not taken for the listener.
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "10")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	f.Close()
	for range 20 {
		if got, want := listenerPID(port), strconv.Itoa(os.Getpid()); got != want {
			t.Fatalf("listenerPID(%d) with a child holding the socket = %q, want this process, %s", port, got, want)
		}
	}

	// Of the holders, the one whose parent holds it not: a backend with a
	// lower pid than its postmaster (pids wrap) or listed first is not it.
	for _, tt := range []struct {
		holders []proc
		want    string
	}{
		{[]proc{{pid: "300", ppid: "1"}, {pid: "120", ppid: "300"}}, "300"},
		{[]proc{{pid: "120", ppid: "300"}, {pid: "300", ppid: "1"}, {pid: "301", ppid: "300"}}, "300"},
		{[]proc{{pid: "300", ppid: "1"}, {pid: "250", ppid: "1"}}, "250"}, // two roots: the lowest
	} {
		if got := rootHolder(tt.holders); got != tt.want {
			t.Errorf("rootHolder(%v) = %q, want %q", tt.holders, got, tt.want)
		}
	}

	all := []proc{
		{pid: "10", ppid: "1", comm: "postgres", cpu: time.Second},            // the run's postmaster
		{pid: "11", ppid: "10", comm: "postgres", cpu: 2 * time.Second},       // its backend
		{pid: "20", ppid: "1", comm: "postgres", cpu: 40 * time.Second},       // another cluster
		{pid: "21", ppid: "20", comm: "postgres", cpu: 50 * time.Second},      // and its backend
		{pid: "30", ppid: "1", comm: "edge", cpu: 3 * time.Second, nice: "0"}, // not scoped
	}
	if tree := treeOf(all, "10"); len(tree) != 2 || !tree["10"] || !tree["11"] {
		t.Errorf("treeOf(10) = %v, want 10 and its backend 11", tree)
	}
	// A port nothing listens on scopes the group to nothing rather than to everything.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	g := testGroups.grouped(all, Services{PostgresPort: freePort}.listeners())
	if len(g["postgres"]) != 0 || len(g["edge"]) != 1 {
		t.Errorf("grouped with an unheard port = %v, want no postgres and the edge", g)
	}
	g = testGroups.grouped(all, Services{}.listeners())
	if len(g["postgres"]) != 4 {
		t.Errorf("grouped unscoped = %d postgres processes, want all 4", len(g["postgres"]))
	}
}

// A child that ended and was waited for stays in its parent's CPU time:
// how a Postgres backend that exits mid-run (a client dropped its
// connection) is still counted, in its postmaster's.
func TestCPUCountsEndedChildren(t *testing.T) {
	self := func() proc {
		for _, p := range procs() {
			if p.pid == strconv.Itoa(os.Getpid()) {
				return p
			}
		}
		t.Fatal("this process is not in /proc")
		return proc{}
	}
	before := self().children
	// A fixed amount of work in a child (about half a second of CPU here,
	// however loaded the box), then waited for.
	busy := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := busy.Run(); err != nil {
		t.Fatal(err)
	}
	if got := self().children - before; got < 100*time.Millisecond {
		t.Errorf("children's CPU grew by %v after a child's ~0.5 s of work, want ≥ 0.1 s", got)
	}
}

// The CPU meter turns readings a second apart into cores per second of
// the timeline, by the second that holds each interval's middle: a group
// that used 1.5 s of CPU in one second used 1.5 cores then.
func TestCPUMeterPerSecond(t *testing.T) {
	var m Meter
	for _, r := range []struct {
		at             time.Duration
		edge, postgres time.Duration
	}{
		{-1200 * time.Millisecond, 0, 0},
		{-200 * time.Millisecond, 500 * time.Millisecond, 0},
		{800 * time.Millisecond, 2 * time.Second, 250 * time.Millisecond},
		{800 * time.Millisecond, 3 * time.Second, 250 * time.Millisecond}, // no wall time: no second
		{2800 * time.Millisecond, 4 * time.Second, 250 * time.Millisecond},
	} {
		m.readings = append(m.readings, cpuReading{at: r.at, times: map[string]time.Duration{"edge": r.edge, "postgres": r.postgres}})
	}
	got := m.PerSecond()
	want := map[int]map[string]float64{
		-1: {"edge": 0.5},
		0:  {"edge": 1.5, "postgres": 0.25},
		1:  {"edge": 0.5}, // 1 s over 2 s
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PerSecond = %v, want %v", got, want)
	}

	// A running meter reads at once and then each second until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var live Meter
	start := time.Now()
	live.Run(ctx, testGroups, Services{}, func() time.Duration { return time.Since(start) })
	if n := len(live.readings); n < 2 || n > 3 {
		t.Errorf("a meter run for 1.5 s took %d readings, want 2 (at 0 and 1 s; 3 if the end raced the tick)", n)
	}
}
