// Package redistest runs a Redis that can fail over, for tests: a primary,
// one replica and three Sentinels (redisserver.Failover), each its own
// redis-server process on a free 127.0.0.1 port in the test's temp folder.
// A test kills the primary with SIGKILL (KillPrimary), waits until the
// Sentinels have promoted the replica (WaitPromotion), and may start the old
// primary again (Server.Start), which the Sentinels then turn into a
// replica of the new one.
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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/redisserver"
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
const Quorum = redisserver.Quorum

// Server is one redis-server process, data node or Sentinel.
type Server = redisserver.Server

// Failover is a primary, one replica and three Sentinels, with methods that
// fail the test instead of returning errors.
type Failover struct {
	*redisserver.Failover
}

// StartFailover starts the five servers and returns once the replica is in
// sync and every Sentinel knows the primary, the replica and the two other
// Sentinels, so a failover can happen. It fails t when redis-server is not
// on PATH or the servers do not come up within 20 s.
func StartFailover(t testing.TB, opts Options) *Failover {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := redisserver.StartFailover(ctx, redisserver.FailoverOptions{Dir: t.TempDir(),
		MasterName: opts.MasterName, DownAfter: opts.DownAfter, FailoverTimeout: opts.FailoverTimeout})
	if err != nil {
		t.Fatalf("this test runs redis-servers of its own (redis-server on PATH): %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(f.LogTails(40))
		}
		f.Kill()
	})
	return &Failover{f}
}

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
	return c.(*redis.Client) // the failover client
}

// Primary returns the data node a running Sentinel names as the primary.
func (f *Failover) Primary(t testing.TB) *Server {
	t.Helper()
	p, err := f.Failover.Primary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
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
	next, err := f.Failover.WaitPromotion(context.Background(), old, within)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// WaitReplicated waits until every running replica of the current primary
// has acknowledged everything the primary has written so far, so that
// killing the primary next loses nothing; it fails t after within.
func (f *Failover) WaitReplicated(t testing.TB, within time.Duration) {
	t.Helper()
	if err := f.Failover.WaitReplicated(context.Background(), within); err != nil {
		t.Fatal(err)
	}
}
