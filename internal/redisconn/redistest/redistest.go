// Package redistest runs a Redis that can fail over, for tests: a primary,
// one replica and three Sentinels, each its own redis-server process on a
// free 127.0.0.1 port with its config file in a temp folder, none keeping
// anything on disk. A test kills the primary with SIGKILL (KillPrimary),
// waits until the Sentinels have promoted the replica (WaitPromotion), and
// may start the old primary again (Server.Start), which the Sentinels then
// turn into a replica of the new one.
//
// Clients reach it as the binaries do: through the Sentinels, by
// MasterName and SentinelList (FLASHGATE_REDIS_MASTER and
// FLASHGATE_REDIS_SENTINELS), or with Client.
//
// Everything is killed in t.Cleanup; when the test has failed, the tail of
// every server's log is written to the test log first.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisconn"
)

// Options shape a Failover; the zero value is a quick one for tests.
type Options struct {
	// MasterName is the name the Sentinels monitor the primary under;
	// "" means "flashgate".
	MasterName string
	// DownAfter is how long the primary must be silent before a Sentinel
	// thinks it down (down-after-milliseconds); 0 means 1 s.
	DownAfter time.Duration
	// FailoverTimeout is the Sentinels' failover-timeout; 0 means 3 s.
	FailoverTimeout time.Duration
}

// Quorum is how many Sentinels must agree the primary is down.
const Quorum = 2

// Failover is a primary, one replica and three Sentinels.
type Failover struct {
	// MasterName is the name the Sentinels monitor the primary under.
	MasterName string
	// Data are the two data nodes: Data[0] starts as the primary and
	// Data[1] as its replica; a failover swaps their roles.
	Data [2]*Server
	// Sentinels are the three Sentinels.
	Sentinels [3]*Server

	t testing.TB
}

// Server is one redis-server process, data node or Sentinel.
type Server struct {
	Name string // "data-0", "data-1", "sentinel-0", ...
	Port int
	Addr string // 127.0.0.1:Port

	t    testing.TB
	bin  string
	conf string // config file; Sentinels rewrite it
	log  string
	args []string // after the config file: "--sentinel" or nothing

	mu  sync.Mutex // guards cmd
	cmd *exec.Cmd  // nil while stopped
}

// StartFailover starts the five servers and returns once the replica is in
// sync and every Sentinel knows the primary, the replica and the two other
// Sentinels, so a failover can happen. It fails t when redis-server is not
// on PATH or the servers do not come up within 20 s.
func StartFailover(t testing.TB, opts Options) *Failover {
	t.Helper()
	if opts.MasterName == "" {
		opts.MasterName = "flashgate"
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = time.Second
	}
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = 3 * time.Second
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test runs redis-servers of its own and needs one on PATH: %v", err)
	}
	dir := t.TempDir()
	ports := freePorts(t, 5)
	f := &Failover{MasterName: opts.MasterName, t: t}
	newServer := func(name string, port int, conf string, args ...string) *Server {
		s := &Server{Name: name, Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), t: t, bin: bin,
			conf: filepath.Join(dir, name+".conf"), log: filepath.Join(dir, name+".log"), args: args}
		sub := filepath.Join(dir, name)
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		conf = fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n", port, sub, s.log) + conf
		if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// No persistence, and no 5 s pause before a full sync (the default
	// repl-diskless-sync-delay), so the replica is ready at once.
	data := "save \"\"\nappendonly no\nrepl-diskless-sync-delay 0\n"
	f.Data[0] = newServer("data-0", ports[0], data)
	f.Data[1] = newServer("data-1", ports[1], data+fmt.Sprintf("replicaof 127.0.0.1 %d\n", ports[0]))
	for i := range f.Sentinels {
		f.Sentinels[i] = newServer(fmt.Sprintf("sentinel-%d", i), ports[2+i], fmt.Sprintf(
			"sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
				"sentinel down-after-milliseconds %[1]s %[4]d\n"+
				"sentinel failover-timeout %[1]s %[5]d\n"+
				"sentinel parallel-syncs %[1]s 1\n",
			opts.MasterName, ports[0], Quorum, opts.DownAfter.Milliseconds(), opts.FailoverTimeout.Milliseconds()),
			"--sentinel")
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.dumpLogs()
		}
		for _, s := range f.all() {
			s.Kill()
		}
	})
	for _, s := range f.all() {
		s.Start()
	}
	f.waitReady(20 * time.Second)
	return f
}

func (f *Failover) all() []*Server {
	return []*Server{f.Data[0], f.Data[1], f.Sentinels[0], f.Sentinels[1], f.Sentinels[2]}
}

// SentinelAddrs are the Sentinels' host:port addresses.
func (f *Failover) SentinelAddrs() []string {
	out := make([]string, len(f.Sentinels))
	for i, s := range f.Sentinels {
		out[i] = s.Addr
	}
	return out
}

// SentinelList is SentinelAddrs comma-separated, as FLASHGATE_REDIS_SENTINELS
// takes them.
func (f *Failover) SentinelList() string { return strings.Join(f.SentinelAddrs(), ",") }

// URL is a Redis URL to pass along with the Sentinels: with Sentinels only
// its db number (and credentials, none here) count.
func (f *Failover) URL() string { return "redis://127.0.0.1/0" }

// Client returns a failover client through the Sentinels, built as the
// binaries build theirs, closed in t.Cleanup.
func (f *Failover) Client(t testing.TB) *redis.Client {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{URL: f.URL(), Sentinels: f.SentinelAddrs(), MasterName: f.MasterName})
	if err != nil {
		t.Fatalf("redisconn.New(sentinels %s) = %v", f.SentinelList(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Primary returns the data node a running Sentinel names as the primary.
func (f *Failover) Primary(t testing.TB) *Server {
	t.Helper()
	for _, s := range f.Sentinels {
		if !s.Running() {
			continue
		}
		addr, err := f.masterAddr(s)
		if err != nil {
			continue
		}
		if d := f.dataAt(addr); d != nil {
			return d
		}
		t.Fatalf("%s names %s as primary, which is none of the data nodes", s.Name, addr)
	}
	t.Fatalf("no Sentinel of %s answers", f.MasterName)
	return nil
}

// KillPrimary kills the current primary with SIGKILL, so nothing in its
// buffers reaches anyone, and returns it.
func (f *Failover) KillPrimary(t testing.TB) *Server {
	t.Helper()
	p := f.Primary(t)
	p.Kill()
	return p
}

// WaitPromotion waits until every running Sentinel names a data node other
// than old as the primary and that node answers ROLE as a master, and
// returns it; it fails t after within.
func (f *Failover) WaitPromotion(t testing.TB, old *Server, within time.Duration) *Server {
	t.Helper()
	deadline := time.Now().Add(within)
	var why string
	for {
		next, reason := f.promoted(old)
		if next != nil {
			return next
		}
		why = reason
		if time.Now().After(deadline) {
			t.Fatalf("no promotion away from %s (%s) within %v: %s", old.Name, old.Addr, within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *Failover) promoted(old *Server) (*Server, string) {
	var agreed string
	for _, s := range f.Sentinels {
		if !s.Running() {
			continue
		}
		addr, err := f.masterAddr(s)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("%s: %v", s.Name, err)
		case addr == old.Addr:
			return nil, fmt.Sprintf("%s still names %s", s.Name, addr)
		case agreed != "" && addr != agreed:
			return nil, fmt.Sprintf("Sentinels disagree: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	next := f.dataAt(agreed)
	if next == nil {
		return nil, fmt.Sprintf("the Sentinels name %q, none of the data nodes", agreed)
	}
	role, err := role(next.Addr)
	if err != nil || role != "master" {
		return nil, fmt.Sprintf("%s is named primary but its ROLE is %q (%v)", next.Name, role, err)
	}
	return next, ""
}

// WaitReplicated waits until every running replica of the current primary
// has acknowledged everything the primary has written so far, so that
// killing the primary next loses nothing; it fails t after within. It
// increments the key "redistest:replicated" on the primary.
func (f *Failover) WaitReplicated(t testing.TB, within time.Duration) {
	t.Helper()
	p := f.Primary(t)
	c := plainClient(p.Addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	replicas := 0
	for _, d := range f.Data {
		if d != p && d.Running() {
			replicas++
		}
	}
	// WAIT blocks until that many replicas acknowledge the connection's
	// writes; a write of its own first makes "so far" include everyone's.
	if err := c.Incr(ctx, "redistest:replicated").Err(); err != nil {
		t.Fatalf("write to primary %s: %v", p.Name, err)
	}
	n, err := c.Wait(ctx, replicas, within).Result()
	if err != nil || n < int64(replicas) {
		t.Fatalf("WAIT %d on primary %s = %d, %v; replicas did not catch up within %v", replicas, p.Name, n, err, within)
	}
}

// waitReady waits until the replica is in sync and every Sentinel sees the
// primary, one healthy replica and two other Sentinels.
func (f *Failover) waitReady(within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := f.notReady()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			f.dumpLogs()
			f.t.Fatalf("Redis with Sentinels not ready within %v: %s", within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *Failover) notReady() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rc := plainClient(f.Data[1].Addr)
	info, err := rc.Info(ctx, "replication").Result()
	_ = rc.Close()
	if err != nil || !strings.Contains(info, "master_link_status:up") {
		return fmt.Sprintf("replica %s not in sync (%v)", f.Data[1].Name, err)
	}
	for _, s := range f.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		m, err := sc.Master(ctx, f.MasterName).Result()
		replicas, rerr := sc.Replicas(ctx, f.MasterName).Result()
		_ = sc.Close()
		switch {
		case err != nil || rerr != nil:
			return fmt.Sprintf("%s: %v %v", s.Name, err, rerr)
		case m["flags"] != "master" || m["num-other-sentinels"] != "2":
			return fmt.Sprintf("%s sees the primary as %q with %s other Sentinels", s.Name, m["flags"], m["num-other-sentinels"])
		case len(replicas) != 1 || replicas[0]["flags"] != "slave" || replicas[0]["master-link-status"] != "ok":
			return fmt.Sprintf("%s sees replicas %v", s.Name, replicas)
		}
	}
	return ""
}

func (f *Failover) masterAddr(s *Server) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, f.MasterName).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

func (f *Failover) dataAt(addr string) *Server {
	for _, d := range f.Data {
		if d.Addr == addr {
			return d
		}
	}
	return nil
}

func role(addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c := plainClient(addr)
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", fmt.Errorf("empty ROLE reply")
	}
	r, _ := v[0].(string)
	return r, nil
}

func plainClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
}

// dumpLogs writes the last lines of every server's log to the test log.
func (f *Failover) dumpLogs() {
	for _, s := range f.all() {
		b, err := os.ReadFile(s.log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		f.t.Logf("--- %s (%s) log tail:\n%s", s.Name, s.Addr, strings.Join(lines, "\n"))
	}
}

// Start starts the server (again) from its config file and waits until it
// answers PING; it fails the test after 10 s.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, append([]string{s.conf}, s.args...)...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s on port %d: %v", s.Name, s.Port, err)
	}
	s.cmd = cmd
	c := plainClient(s.Addr)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s on port %d does not answer: %v", s.Name, s.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends the server SIGKILL and waits for it to exit; a stopped server
// stays stopped.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Running reports whether the server's process was started and not killed.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// freePorts finds n distinct free ports, holding each until all are found.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}
