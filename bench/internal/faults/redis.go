package faults

import (
	"context"
	"time"

	"github.com/flashgate/flashgate/internal/redisserver"
)

// startRedis starts the scenario's Redis in dir: one redis-server keeping
// nothing on disk, as make run starts it, that a fault may kill and start
// again empty on the same port.
func startRedis(ctx context.Context, dir string) (*redisserver.Server, error) {
	return redisserver.Start(ctx, redisserver.Options{Dir: dir, Name: "redis"})
}

// startReplica starts a replica of the primary behind link (a delay proxy
// in front of it, which a fault can cut), in sync when it returns.
func startReplica(ctx context.Context, dir, link string) (*redisserver.Server, error) {
	return redisserver.Start(ctx, redisserver.Options{Dir: dir, Name: "replica", ReplicaOfAddr: link})
}

// flushAll empties the server, as an operator's mistake or a failover onto
// an empty replica would.
func flushAll(ctx context.Context, s *redisserver.Server) error {
	c := s.Client()
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

// sentinelMaster is the master name the Sentinels watch.
const sentinelMaster = "chaosmaster"

// startSentinels starts a primary, one replica and three Sentinels in dir.
// The primary is down after 1 s and the failover timeout is short: a
// failover within a scenario's few seconds.
func startSentinels(ctx context.Context, dir string) (*redisserver.Failover, error) {
	return redisserver.StartFailover(ctx, redisserver.FailoverOptions{Dir: dir, MasterName: sentinelMaster,
		DownAfter: time.Second, FailoverTimeout: 5 * time.Second})
}
