// Command delayproxy forwards TCP connections with a delay each way: the
// distance between two regions, on one machine. make run-cluster puts one
// between the far region's edge and the home region's Redis and origin when
// FLASHGATE_CLUSTER_REGION_DELAY is set (deploy/local/cluster.sh,
// docs/REGIONS.md).
//
//	delayproxy -listen 127.0.0.1:7081 -sentinels 127.0.0.1:7061,127.0.0.1:7062 -master flashgate -delay 60ms
//	delayproxy -listen 127.0.0.1:7082 -to 127.0.0.1:7041 -delay 60ms
//
// With -sentinels each new connection goes to the primary the Sentinels name
// at that moment, so the far side follows a failover as a Sentinel client
// would (its open connections end with the old primary).
package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/bench/internal/benchcmd"
)

func main() {
	benchcmd.Main("delayproxy", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stderr) })
}
