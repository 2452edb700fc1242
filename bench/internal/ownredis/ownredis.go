// Package ownredis runs redis-server processes that belong to one benchmark
// run: each on a free 127.0.0.1 port with a folder of its own, started with
// the settings the run compares (persistence, replication) and killed at the
// end. Being the run's own, they may be flushed freely.
package ownredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options are one server's settings.
type Options struct {
	Binary string // redis-server executable; "" means redis-server from PATH
	Dir    string // its working folder (AOF and RDB files); must exist
	// Args are settings beyond the ones every server gets (port, bind,
	// dir, no RDB snapshots, no AOF, no wait before a replica's first
	// sync), as redis-server flags that override them: "--appendonly",
	// "yes", ...
	Args []string
	// ReplicaOf makes the server a replica of that server; Start returns
	// once the replica has finished its first sync.
	ReplicaOf *Server
}

// Server is a running redis-server.
type Server struct {
	Addr string // 127.0.0.1:port
	URL  string // redis://127.0.0.1:port/0
	Args []string
	cmd  *exec.Cmd
}

// startBudget bounds how long a server may take to answer, and a replica
// to finish its first sync.
const startBudget = 15 * time.Second

// Start starts a server and waits until it answers PING (and, for a
// replica, until its link to the primary is up).
func Start(ctx context.Context, o Options) (*Server, error) {
	bin := o.Binary
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", o.Dir,
		"--save", "", "--appendonly", "no", "--loglevel", "warning", "--logfile", "redis.log",
		// A primary otherwise waits 5 s for more replicas before its
		// first sync; it changes nothing once the replica is in sync.
		"--repl-diskless-sync-delay", "0"}
	if o.ReplicaOf != nil {
		host, p, _ := net.SplitHostPort(o.ReplicaOf.Addr)
		args = append(args, "--replicaof", host, p)
	}
	args = append(args, o.Args...)
	cmd := exec.Command(path, args...)
	cmd.Dir = o.Dir
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Addr: addr, URL: "redis://" + addr + "/0", Args: args, cmd: cmd}
	if err := s.waitReady(ctx, o.ReplicaOf != nil); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redis-server %s (log in %s): %w", strings.Join(args, " "), o.Dir, err)
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, replica bool) error {
	ctx, cancel := context.WithTimeout(ctx, startBudget)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = c.Ping(ctx).Err()
		if last == nil && replica {
			last = linkUp(ctx, c)
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w", startBudget, errors.Join(last, ctx.Err()))
		case <-tick.C:
		}
	}
}

// linkUp says whether a replica is connected to its primary and done with
// its first sync.
func linkUp(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	up, syncing := false, true
	for line := range strings.SplitSeq(info, "\n") {
		switch strings.TrimSpace(line) {
		case "master_link_status:up":
			up = true
		case "master_sync_in_progress:0":
			syncing = false
		}
	}
	if !up || syncing {
		return errors.New("replica link not up yet")
	}
	return nil
}

// Stop kills the server and waits for it to exit. It may be called more
// than once.
func (s *Server) Stop() {
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// TempDir makes a folder for a run's servers under the system's temporary
// folder, which must be a real disk for AOF figures to mean anything.
func TempDir(name string) (string, error) {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return "", fmt.Errorf("redis-server folder: %w", err)
	}
	return dir, nil
}

// freePort asks the kernel for a free port. Another process may take it
// before redis-server binds it; Start then fails and says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
