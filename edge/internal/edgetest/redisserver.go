package edgetest

import (
	"context"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/redisserver"
)

// RedisServer is a redis-server of the test's own on a free 127.0.0.1 port,
// without persistence, that the test may stop and start again on the same
// port. It is killed in t.Cleanup.
type RedisServer struct {
	Port int
	URL  string

	t   testing.TB
	srv *redisserver.Server
}

// StartRedisServer starts a redis-server from PATH; it fails t when there
// is none.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("this test runs a redis-server of its own (redis-server on PATH): %v", err)
	}
	t.Cleanup(srv.Kill)
	return &RedisServer{Port: srv.Port, URL: srv.URL, t: t, srv: srv}
}

// Start starts the server (again) and waits until it answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.srv.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server and waits for it to exit.
func (s *RedisServer) Stop() { s.srv.Kill() }
