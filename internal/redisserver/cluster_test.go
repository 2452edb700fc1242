package redisserver

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A cluster of three primaries takes writes through a cluster client, each
// key on the node of its slot.
func TestClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := StartCluster(ctx, ClusterOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	nodes := map[string]bool{}
	for _, key := range []string{"{s:a}:meta", "{s:b}:meta", "{s:c}:meta", "{s:d}:meta", "{s:e}:meta", "{s:f}:meta"} {
		if err := cc.Set(ctx, key, "1", 0).Err(); err != nil {
			t.Fatalf("SET %s = %v", key, err)
		}
		n, err := c.NodeOf(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rdb := n.Client()
		got := rdb.Get(ctx, key).Val()
		rdb.Close()
		if got != "1" {
			t.Errorf("GET %s on its node %s = %q, want 1", key, n.Name, got)
		}
		nodes[n.Name] = true
	}
	if len(nodes) < 2 {
		t.Errorf("six keys landed on %d node(s), want them spread", len(nodes))
	}
}
