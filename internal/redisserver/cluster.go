package redisserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/freeport"
)

// ClusterOptions shape a Redis Cluster of primaries only.
type ClusterOptions struct {
	// Binary and Dir are as in Options; each node keeps its files in Dir.
	Binary, Dir string
	// Primaries is how many nodes share the 16,384 slots; 0 means 3.
	Primaries int
}

// Cluster is a Redis Cluster of redis-servers on free ports, its slots
// split evenly between its primaries.
type Cluster struct {
	Nodes []*Server
}

// clusterSlots is Redis Cluster's number of hash slots.
const clusterSlots = 16384

// StartCluster starts o.Primaries servers in cluster mode, gives each an
// even share of the slots, introduces them to each other and waits until
// every node says the cluster is ok.
func StartCluster(ctx context.Context, o ClusterOptions) (_ *Cluster, err error) {
	if o.Primaries <= 0 {
		o.Primaries = 3
	}
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Kill()
		}
	}()
	// The cluster bus's ports are free ones too: Redis's default, the
	// client port + 10000, may be any connection's ephemeral port.
	buses, err := freeport.Ports(o.Primaries)
	if err != nil {
		return nil, err
	}
	for i, bus := range buses {
		s, err := Start(ctx, Options{Binary: o.Binary, Dir: o.Dir, Name: fmt.Sprintf("cluster-%d", i),
			Config: []string{"cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 5000",
				"cluster-port " + strconv.Itoa(bus)}})
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		from, to := i*clusterSlots/len(c.Nodes), (i+1)*clusterSlots/len(c.Nodes)-1
		if err := s.call(ctx, "cluster", "addslotsrange", from, to); err != nil {
			return nil, err
		}
	}
	for i, s := range c.Nodes[1:] {
		if err := c.Nodes[0].call(ctx, "cluster", "meet", "127.0.0.1", s.Port, buses[i+1]); err != nil {
			return nil, err
		}
	}
	return c, c.waitOK(ctx, 20*time.Second)
}

// call runs one command on s with a client of its own.
func (s *Server) call(ctx context.Context, args ...any) error {
	rdb := s.Client()
	defer rdb.Close()
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redis-server %s: %v: %w", s.Name, args, err)
	}
	return nil
}

// waitOK waits until every node reports cluster_state:ok and knows every
// other node.
func (c *Cluster) waitOK(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		notOK := ""
		for _, s := range c.Nodes {
			if why := clusterNotOK(ctx, s, len(c.Nodes)); why != "" {
				notOK = why
				break
			}
		}
		if notOK == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster not ok after %v: %s", within, notOK)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterNotOK says why s does not yet see a whole cluster of n nodes, or "".
func clusterNotOK(ctx context.Context, s *Server, n int) string {
	rdb := s.Client()
	defer rdb.Close()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Sprintf("%s: %v", s.Name, err)
	}
	if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
		return fmt.Sprintf("%s: %s", s.Name, strings.Join(strings.Fields(info)[:3], " "))
	}
	return ""
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// List is Addrs comma-separated, as FLASHGATE_REDIS_CLUSTER takes them.
func (c *Cluster) List() string { return strings.Join(c.Addrs(), ",") }

// NodeOf returns the node that holds key's slot.
func (c *Cluster) NodeOf(ctx context.Context, key string) (*Server, error) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	addr := node.Options().Addr
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s, nil
		}
	}
	return nil, errors.New("redis cluster: no node at " + addr)
}

// Kill kills every node.
func (c *Cluster) Kill() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}
