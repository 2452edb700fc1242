package ownredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func client(t *testing.T, s *Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServersHaveTheSettingsAsked starts the three kinds of server the
// durability phase compares and checks each is what it claims to be: the
// AOF one logs with fsync always, the others persist nothing, and the
// replica acknowledges the primary's writes for WAIT.
func TestServersHaveTheSettingsAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := func() string { return t.TempDir() }

	aof, err := Start(ctx, Options{Dir: dir(), Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	if err != nil {
		t.Fatal(err)
	}
	defer aof.Stop()
	primary, err := Start(ctx, Options{Dir: dir()})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	replica, err := Start(ctx, Options{Dir: dir(), ReplicaOf: primary})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()

	for _, tc := range []struct {
		name       string
		s          *Server
		appendonly string
		fsync      string
	}{
		{"aof", aof, "yes", "always"},
		{"primary", primary, "no", "everysec"}, // appendfsync is Redis's default, unused without AOF
		{"replica", replica, "no", "everysec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, tc.s)
			for k, want := range map[string]string{"appendonly": tc.appendonly, "appendfsync": tc.fsync, "save": ""} {
				got, err := c.ConfigGet(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if got[k] != want {
					t.Errorf("CONFIG GET %s = %q, want %q", k, got[k], want)
				}
			}
		})
	}

	p := client(t, primary)
	if err := p.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := p.Do(ctx, "WAIT", 1, 5000).Int64()
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 = %d, %v; want 1 replica", n, err)
	}
	if got, err := client(t, replica).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("replica GET k = %q, %v; want \"v\"", got, err)
	}
	info, err := client(t, replica).Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "role:slave") {
		t.Errorf("replica INFO replication = %q, %v; want role:slave", info, err)
	}
}

func TestStopIsIdempotent(t *testing.T) {
	s, err := Start(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
	var none *Server
	none.Stop()
}
