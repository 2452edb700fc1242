// Package redisserver runs redis-server processes of the caller's own: each
// on a free 127.0.0.1 port with a folder of its own for its config file, log
// and data, keeping nothing on disk unless asked. A server can be killed
// (SIGKILL, as a crash) and started again on the same port; Failover runs a
// primary, one replica and three Sentinels that can promote the replica.
//
// Tests reach it through thin wrappers (internal/redisconn/redistest,
// edge/internal/edgetest) and the bench tools directly, so it reports errors
// and never imports testing. Each server is a childproc.Proc: on Linux it is
// killed when the process that started it dies, so an interrupted test
// binary or benchmark leaves none behind.
package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/childproc"
	"github.com/flashgate/flashgate/internal/freeport"
)

// Budgets of a start: how long a server may take to answer PING, and a
// replica to finish its first sync.
const (
	pingBudget = 10 * time.Second
	syncBudget = 15 * time.Second
)

// baseConfig are the settings every server gets, before Options.Config:
// nothing on disk (no RDB snapshots, no AOF), and no 5 s wait before a
// primary's first full sync (the default repl-diskless-sync-delay), so a
// replica is ready at once.
var baseConfig = []string{`save ""`, "appendonly no", "repl-diskless-sync-delay 0"}

// Options shape one server.
type Options struct {
	// Binary is the redis-server executable; "" means redis-server from PATH.
	Binary string
	// Dir is the folder the server keeps its files in, created when
	// missing: Name.conf, Name.log and the data folder Name/.
	Dir string
	// Name names the server in its files and errors; "" means "redis".
	Name string
	// Port is the port to listen on; 0 means a free one.
	Port int
	// Config are redis.conf lines beyond the ones every server gets (port,
	// bind, dir, logfile and baseConfig), which they override:
	// "appendonly yes", "sentinel monitor ...".
	Config []string
	// ReplicaOf makes the server a replica of that one; Start returns once
	// the replica has finished its first sync.
	ReplicaOf *Server
	// ReplicaOfAddr makes the server a replica of whatever listens at that
	// host:port — a proxy in front of a primary, so that the replication
	// link can be slowed or cut — as ReplicaOf does; it is ignored when
	// ReplicaOf is set.
	ReplicaOfAddr string
	// Sentinel runs the server as a Sentinel (redis-server --sentinel).
	Sentinel bool
}

// Server is one redis-server process, which may be killed and started again
// on the same port. Its config file is writable: Sentinels and CONFIG
// REWRITE change it, and a restart reads what they wrote.
type Server struct {
	Name string
	Port int
	Addr string // 127.0.0.1:Port
	URL  string // redis://Addr/0

	settings []string
	proc     *childproc.Proc // its log is the server's, stderr included
}

// Start prepares a server as o says, starts it and waits until it answers
// PING (and, for a replica, until its first sync is done).
func Start(ctx context.Context, o Options) (*Server, error) {
	s, err := newServer(o)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	if o.ReplicaOf != nil || o.ReplicaOfAddr != "" {
		if err := s.waitSynced(ctx); err != nil {
			s.Kill()
			return nil, err
		}
	}
	return s, nil
}

// newServer finds the server a port, makes its folders and writes its
// config file, without starting it.
func newServer(o Options) (*Server, error) {
	bin := o.Binary
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	if o.Name == "" {
		o.Name = "redis"
	}
	if o.Port == 0 {
		ports, err := freeport.Ports(1)
		if err != nil {
			return nil, err
		}
		o.Port = ports[0]
	}
	data := filepath.Join(o.Dir, o.Name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("redis-server %s: %w", o.Name, err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port))
	conf, log := filepath.Join(o.Dir, o.Name+".conf"), filepath.Join(o.Dir, o.Name+".log")
	s := &Server{Name: o.Name, Port: o.Port, Addr: addr, URL: "redis://" + addr + "/0",
		proc: &childproc.Proc{Name: "redis-server " + o.Name, Path: path, Args: []string{conf}, Log: log}}
	if !o.Sentinel {
		s.settings = append(s.settings, baseConfig...)
	}
	switch {
	case o.ReplicaOf != nil:
		s.settings = append(s.settings, fmt.Sprintf("replicaof 127.0.0.1 %d", o.ReplicaOf.Port))
	case o.ReplicaOfAddr != "":
		host, port, err := net.SplitHostPort(o.ReplicaOfAddr)
		if err != nil {
			return nil, fmt.Errorf("redis-server %s: replica of %q: %w", o.Name, o.ReplicaOfAddr, err)
		}
		s.settings = append(s.settings, fmt.Sprintf("replicaof %s %s", host, port))
	}
	s.settings = append(s.settings, o.Config...)
	if o.Sentinel {
		s.proc.Args = append(s.proc.Args, "--sentinel")
	}
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n%s\n", o.Port, data, log, strings.Join(s.settings, "\n"))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("redis-server %s: %w", o.Name, err)
	}
	return s, nil
}

// Settings are the server's redis.conf lines beyond port, bind, dir and
// logfile, as it was first started with them.
func (s *Server) Settings() []string { return append([]string(nil), s.settings...) }

// Start starts the server (again) from its config file and waits until it
// answers PING. A running server is left as it is.
func (s *Server) Start(ctx context.Context) error {
	if s.proc.Running() {
		return nil
	}
	// Before the config file names the log, redis-server writes to
	// stderr, which goes to the same file: a config it refuses is
	// explained there.
	if err := s.proc.Start(); err != nil {
		return err
	}
	if err := s.waitPing(ctx, s.proc.Exited()); err != nil {
		s.Kill()
		return fmt.Errorf("redis-server %s on port %d: %w\n%s", s.Name, s.Port, err, s.LogTail(15))
	}
	return nil
}

func (s *Server) waitPing(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, pingBudget)
	defer cancel()
	c := s.Client()
	defer c.Close()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before it answered PING")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v: %w", pingBudget, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitSynced waits until the replica's link to its primary is up and its
// first sync is done.
func (s *Server) waitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncBudget)
	defer cancel()
	c := s.Client()
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s not in sync within %v (%v)\n%s", s.Name, syncBudget, err, s.LogTail(15))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill sends the server SIGKILL, so nothing in its buffers reaches anyone,
// and waits for it to exit. A stopped server stays stopped.
func (s *Server) Kill() { s.proc.Kill() }

// Running reports whether the server's process is alive.
func (s *Server) Running() bool { return s.proc.Running() }

// Client returns a client of this server alone, without retries, for
// checks and faults; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
}

// LogTail is the last n lines of the server's log.
func (s *Server) LogTail(n int) string { return s.proc.Tail(n) }
