package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/redisconn/redistest"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestParseRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-listen", "127.0.0.1:0"},
		{"-listen", "127.0.0.1:0", "-to", "127.0.0.1:1", "-sentinels", "127.0.0.1:2"},
		{"-listen", "127.0.0.1:0", "-to", "nowhere"},
		{"-listen", "127.0.0.1:0", "-to", "127.0.0.1:1", "-delay", "-1ms"},
		{"-listen", "127.0.0.1:0", "-to", "127.0.0.1:1", "extra"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

// freeAddr is a 127.0.0.1 port nothing listens on at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Through the proxy aimed at the Sentinels, a plain Redis client reaches the
// primary, one delay later each way; after a failover its new connections
// reach the promoted replica.
func TestFollowsTheSentinelsPrimary(t *testing.T) {
	f := redistest.StartFailover(t, redistest.Options{})
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", listen, "-sentinels", f.SentinelList(), "-master", f.MasterName, "-delay", "40ms"}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})

	c := redis.NewClient(&redis.Options{Addr: listen, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	testenv.Eventually(t, 5*time.Second, "PING through the proxy", func() bool { return c.Ping(ctx).Err() == nil })
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rt := time.Since(start); rt < 80*time.Millisecond {
		t.Errorf("a PING's round trip = %v, want at least the 2 × 40 ms the proxy adds", rt)
	}
	role := func() string {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return "error: " + err.Error()
		}
		for _, l := range strings.Split(info, "\r\n") {
			if port, ok := strings.CutPrefix(l, "tcp_port:"); ok {
				return port
			}
		}
		return "no tcp_port"
	}
	old := f.Primary(t)
	if got, want := role(), portOf(old.Addr); got != want {
		t.Fatalf("the proxy reached the server on port %s, want the primary's %s", got, want)
	}
	f.KillPrimary(t)
	promoted := f.WaitPromotion(t, old, 30*time.Second)
	testenv.Eventually(t, 10*time.Second, "after the failover, the proxy reaching the promoted replica's port "+portOf(promoted.Addr), func() bool {
		return role() == portOf(promoted.Addr)
	})
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
