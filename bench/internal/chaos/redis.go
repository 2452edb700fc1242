package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server of the harness's own on a free port,
// keeping nothing on disk (as make run starts it), that a fault may kill and
// start again empty on the same port.
type redisServer struct {
	port int
	proc *proc
}

// newRedisServer prepares a server in dir; extra arguments (e.g.
// --replicaof) are added to its command line.
func newRedisServer(bin, dir, name string, extra ...string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", data}, extra...)
	return &redisServer{port: port, proc: &proc{name: name, path: bin, args: args, log: filepath.Join(dir, name+".log")}}, nil
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start starts the server and waits until it answers PING.
func (r *redisServer) start(ctx context.Context) error {
	if err := r.proc.Start(); err != nil {
		return err
	}
	return waitRedis(ctx, r.addr(), 10*time.Second)
}

// kill9 kills the server: everything it held is gone.
func (r *redisServer) kill9() { r.proc.Kill9() }

func (r *redisServer) stop() { r.proc.Stop(syscall.SIGKILL, time.Second) }

// client is a short-lived client of the server, without retries.
func (r *redisServer) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
}

// flushAll empties the server, as an operator's mistake or a failover onto
// an empty replica would.
func (r *redisServer) flushAll(ctx context.Context) error {
	c := r.client()
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

func waitRedis(ctx context.Context, addr string, d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redis at %s does not answer PING: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sentinelSet is a primary, one replica and three Sentinels (redis-server
// in sentinel mode) watching them under one master name.
type sentinelSet struct {
	master    string
	primary   *redisServer
	replica   *redisServer
	sentinels []*proc
	ports     []int
}

// sentinelMaster is the master name the Sentinels watch.
const sentinelMaster = "chaosmaster"

func newSentinelSet(ctx context.Context, bin, dir string) (*sentinelSet, error) {
	s := &sentinelSet{master: sentinelMaster}
	var err error
	if s.primary, err = newRedisServer(bin, dir, "redis-primary"); err != nil {
		return nil, err
	}
	if err := s.primary.start(ctx); err != nil {
		return nil, err
	}
	if s.replica, err = newRedisServer(bin, dir, "redis-replica", "--replicaof", "127.0.0.1", strconv.Itoa(s.primary.port)); err != nil {
		return s, err
	}
	if err := s.replica.start(ctx); err != nil {
		return s, err
	}
	for i := range 3 {
		port, err := freePort()
		if err != nil {
			return s, err
		}
		name := fmt.Sprintf("sentinel-%d", i+1)
		conf := filepath.Join(dir, name+".conf")
		// Down after 1 s and a short failover timeout: a failover within a
		// scenario's few seconds. The config file must be writable: the
		// Sentinels rewrite it as they learn the topology.
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\n"+
			"sentinel parallel-syncs %s 1\n",
			port, dir, s.master, s.primary.port, s.master, s.master, s.master)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return s, err
		}
		p := &proc{name: name, path: bin, args: []string{conf, "--sentinel"}, log: filepath.Join(dir, name+".log")}
		if err := p.Start(); err != nil {
			return s, err
		}
		s.sentinels = append(s.sentinels, p)
		s.ports = append(s.ports, port)
	}
	return s, s.waitReady(ctx, 20*time.Second)
}

// addrs is the Sentinels' addresses, comma-separated.
func (s *sentinelSet) addrs() string {
	out := ""
	for i, p := range s.ports {
		if i > 0 {
			out += ","
		}
		out += "127.0.0.1:" + strconv.Itoa(p)
	}
	return out
}

// waitReady waits until every Sentinel knows the replica and the two other
// Sentinels: before that a failover may not happen.
func (s *sentinelSet) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ready := 0
		for _, port := range s.ports {
			c := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
			m, err := c.Master(ctx, s.master).Result()
			c.Close()
			if err == nil && atoi(m["num-slaves"]) >= 1 && atoi(m["num-other-sentinels"]) >= 2 {
				ready++
			}
		}
		if ready == len(s.ports) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("sentinels not ready within %v (%d of %d know the replica and each other)", d, ready, len(s.ports))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// masterAddr is the primary's address as the first Sentinel that answers
// names it.
func (s *sentinelSet) masterAddr(ctx context.Context) (string, error) {
	var last error
	for _, port := range s.ports {
		c := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
		addr, err := c.GetMasterAddrByName(ctx, s.master).Result()
		c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel names the master: %v", last)
}

func (s *sentinelSet) stop() {
	for _, p := range s.sentinels {
		p.Stop(syscall.SIGKILL, time.Second)
	}
	if s.replica != nil {
		s.replica.stop()
	}
	if s.primary != nil {
		s.primary.stop()
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
