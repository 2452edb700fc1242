package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/freeport"
)

// FailoverOptions shape a Failover; the zero value (with a Dir) is a quick
// one.
type FailoverOptions struct {
	// Binary is the redis-server executable; "" means redis-server from PATH.
	Binary string
	// Dir is the folder the five servers keep their files in.
	Dir string
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

// readyBudget bounds how long a Failover may take to be able to fail over.
const readyBudget = 20 * time.Second

// Failover is a primary, one replica and three Sentinels. Clients reach it
// as the binaries do: through the Sentinels, by MasterName and
// SentinelList (FLASHGATE_REDIS_MASTER and FLASHGATE_REDIS_SENTINELS).
type Failover struct {
	// MasterName is the name the Sentinels monitor the primary under.
	MasterName string
	// Data are the two data nodes: Data[0] starts as the primary and
	// Data[1] as its replica; a failover swaps their roles.
	Data [2]*Server
	// Sentinels are the three Sentinels.
	Sentinels [3]*Server
}

// StartFailover starts the five servers and returns once the replica is in
// sync and every Sentinel knows the primary, the replica and the two other
// Sentinels, so a failover can happen. On an error it kills what it
// started; the servers' logs stay in o.Dir.
func StartFailover(ctx context.Context, o FailoverOptions) (_ *Failover, err error) {
	if o.MasterName == "" {
		o.MasterName = "flashgate"
	}
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = 3 * time.Second
	}
	ports, err := freeport.Ports(5)
	if err != nil {
		return nil, err
	}
	f := &Failover{MasterName: o.MasterName}
	defer func() {
		if err != nil {
			f.Kill()
		}
	}()
	server := func(name string, port int, replicaOf *Server, sentinel bool, config ...string) (*Server, error) {
		return newServer(Options{Binary: o.Binary, Dir: o.Dir, Name: name, Port: port, ReplicaOf: replicaOf, Sentinel: sentinel, Config: config})
	}
	if f.Data[0], err = server("data-0", ports[0], nil, false); err != nil {
		return nil, err
	}
	if f.Data[1], err = server("data-1", ports[1], f.Data[0], false); err != nil {
		return nil, err
	}
	for i := range f.Sentinels {
		m := o.MasterName
		f.Sentinels[i], err = server(fmt.Sprintf("sentinel-%d", i), ports[2+i], nil, true,
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", m, f.Data[0].Port, Quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", m, o.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", m, o.FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", m))
		if err != nil {
			return nil, err
		}
	}
	for _, s := range f.Servers() {
		if err := s.Start(ctx); err != nil {
			return nil, err
		}
	}
	if err := f.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, f.LogTails(40))
	}
	return f, nil
}

// Servers are the two data nodes, then the three Sentinels.
func (f *Failover) Servers() []*Server {
	return []*Server{f.Data[0], f.Data[1], f.Sentinels[0], f.Sentinels[1], f.Sentinels[2]}
}

// Kill kills every server.
func (f *Failover) Kill() {
	for _, s := range f.Servers() {
		if s != nil {
			s.Kill()
		}
	}
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

// Primary returns the data node the first running Sentinel that answers
// names as the primary.
func (f *Failover) Primary(ctx context.Context) (*Server, error) {
	var errs []error
	for _, s := range f.Sentinels {
		if !s.Running() {
			continue
		}
		addr, err := f.masterAddr(ctx, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
			continue
		}
		if d := f.dataAt(addr); d != nil {
			return d, nil
		}
		return nil, fmt.Errorf("%s names %s as primary, which is none of the data nodes", s.Name, addr)
	}
	return nil, fmt.Errorf("no Sentinel of %s answers: %w", f.MasterName, errors.Join(errs...))
}

// WaitPromotion waits until every running Sentinel names a data node other
// than old as the primary and that node answers ROLE as a master, and
// returns it; it gives up after within.
func (f *Failover) WaitPromotion(ctx context.Context, old *Server, within time.Duration) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		next, why := f.promoted(ctx, old)
		if next != nil {
			return next, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no promotion away from %s (%s) within %v: %s", old.Name, old.Addr, within, why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *Failover) promoted(ctx context.Context, old *Server) (*Server, string) {
	var agreed string
	for _, s := range f.Sentinels {
		if !s.Running() {
			continue
		}
		addr, err := f.masterAddr(ctx, s)
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
	role, err := role(ctx, next)
	if err != nil || role != "master" {
		return nil, fmt.Sprintf("%s is named primary but its ROLE is %q (%v)", next.Name, role, err)
	}
	return next, ""
}

// WaitReplicated waits until every running replica of the current primary
// has acknowledged everything the primary has written so far, so that
// killing the primary next loses nothing; it gives up after within. It
// increments the key "redisserver:replicated" on the primary.
func (f *Failover) WaitReplicated(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	p, err := f.Primary(ctx)
	if err != nil {
		return err
	}
	c := p.Client()
	defer c.Close()
	replicas := 0
	for _, d := range f.Data {
		if d != p && d.Running() {
			replicas++
		}
	}
	// WAIT blocks until that many replicas acknowledge the connection's
	// writes; a write of its own first makes "so far" include everyone's.
	if err := c.Incr(ctx, "redisserver:replicated").Err(); err != nil {
		return fmt.Errorf("write to primary %s: %w", p.Name, err)
	}
	n, err := c.Wait(ctx, replicas, within).Result()
	if err != nil || n < int64(replicas) {
		return fmt.Errorf("WAIT %d on primary %s = %d, %v: the replicas did not catch up within %v", replicas, p.Name, n, err, within)
	}
	return nil
}

// waitReady waits until the replica is in sync and every Sentinel sees the
// primary, one healthy replica and two other Sentinels.
func (f *Failover) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyBudget)
	defer cancel()
	for {
		why := f.notReady(ctx)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Redis with Sentinels not ready within %v: %s", readyBudget, why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *Failover) notReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rc := f.Data[1].Client()
	info, err := rc.Info(ctx, "replication").Result()
	_ = rc.Close()
	if err != nil || !strings.Contains(info, "master_link_status:up") {
		return fmt.Sprintf("replica %s not in sync (%v)", f.Data[1].Name, err)
	}
	for _, s := range f.Sentinels {
		sc := sentinelClient(s)
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

func (f *Failover) masterAddr(ctx context.Context, s *Server) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	sc := sentinelClient(s)
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, f.MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME = %q", hp)
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

// LogTails is the last n lines of every server's log, each under a heading.
func (f *Failover) LogTails(n int) string {
	var b strings.Builder
	for _, s := range f.Servers() {
		if s != nil {
			fmt.Fprintf(&b, "--- %s (%s) log tail:\n%s\n", s.Name, s.Addr, s.LogTail(n))
		}
	}
	return b.String()
}

func sentinelClient(s *Server) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
}

func role(ctx context.Context, s *Server) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c := s.Client()
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	r, _ := v[0].(string)
	return r, nil
}
