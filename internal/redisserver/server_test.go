package redisserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func client(t *testing.T, s *Server) *redis.Client {
	t.Helper()
	c := s.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

func start(t *testing.T, ctx context.Context, o Options) *Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start(%s) = %v", o.Name, err)
	}
	t.Cleanup(s.Kill)
	return s
}

// TestServersHaveTheSettingsAsked starts the kinds of server the reserve
// benchmark's durability phase compares and checks each is what it claims
// to be: the AOF one logs with fsync always, the others persist nothing,
// and the replica acknowledges the primary's writes for WAIT.
func TestServersHaveTheSettingsAsked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aof := start(t, ctx, Options{Name: "aof", Config: []string{"appendonly yes", "appendfsync always"}})
	primary := start(t, ctx, Options{Name: "primary"})
	replica := start(t, ctx, Options{Name: "replica", ReplicaOf: primary})

	for _, tc := range []struct {
		s          *Server
		appendonly string
		fsync      string
	}{
		{aof, "yes", "always"},
		{primary, "no", "everysec"}, // appendfsync is Redis's default, unused without AOF
		{replica, "no", "everysec"},
	} {
		t.Run(tc.s.Name, func(t *testing.T) {
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
	if got := strings.Join(aof.Settings(), "; "); !strings.Contains(got, "appendfsync always") {
		t.Errorf("aof Settings() = %q, want appendfsync always among them", got)
	}

	p := client(t, primary)
	if err := p.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 = %d, %v; want 1 replica", n, err)
	}
	if got, err := client(t, replica).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("replica GET k = %q, %v; want \"v\"", got, err)
	}
	if info, err := client(t, replica).Info(ctx, "replication").Result(); err != nil || !strings.Contains(info, "role:slave") {
		t.Errorf("replica INFO replication = %q, %v; want role:slave", info, err)
	}
}

// TestKilledServerStartsAgainEmptyOnItsPort: a kill loses everything (no
// persistence), and Start brings the server back on the same port.
func TestKilledServerStartsAgainEmptyOnItsPort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, ctx, Options{})
	c := client(t, s)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Kill() // a stopped server stays stopped
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start again = %v", err)
	}
	if !s.Running() {
		t.Fatal("Running() = false after Start")
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k after the restart = %d, %v; want 0 (nothing kept)", n, err)
	}
	if err := s.Start(ctx); err != nil {
		t.Errorf("Start on a running server = %v, want nil", err)
	}
}

// TestRefusedConfigIsExplained: a config redis-server refuses fails Start
// with the server's own words.
func TestRefusedConfigIsExplained(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, Options{Dir: t.TempDir(), Config: []string{"no-such-directive yes"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("Start with a bad directive = %v, want an error quoting it", err)
	}
}

// TestFailoverPromotesTheReplica kills the primary of a Failover and
// expects the Sentinels to promote the replica with what was replicated.
func TestFailoverPromotesTheReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := StartFailover(ctx, FailoverOptions{Dir: t.TempDir(), MasterName: "redisservertest"})
	if err != nil {
		t.Fatalf("StartFailover = %v", err)
	}
	t.Cleanup(f.Kill)
	if got, want := f.SentinelList(), f.Sentinels[0].Addr+","+f.Sentinels[1].Addr+","+f.Sentinels[2].Addr; got != want {
		t.Errorf("SentinelList() = %q, want %q", got, want)
	}
	old, err := f.Primary(ctx)
	if err != nil || old != f.Data[0] {
		t.Fatalf("Primary() = %v, %v; want %s", old, err, f.Data[0].Name)
	}
	if err := client(t, old).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitReplicated(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	old.Kill()
	next, err := f.WaitPromotion(ctx, old, 20*time.Second)
	if err != nil {
		t.Fatalf("WaitPromotion = %v\n%s", err, f.LogTails(20))
	}
	if next != f.Data[1] {
		t.Fatalf("WaitPromotion = %s, want %s", next.Name, f.Data[1].Name)
	}
	if got, err := client(t, next).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k on the new primary = %q, %v; want \"v\"", got, err)
	}
}

// TestReplicaOfAddr: a replica named by address (as through a proxy) is in
// sync when Start returns and follows its primary's writes.
func TestReplicaOfAddr(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	primary := start(t, ctx, Options{Name: "primary"})
	replica := start(t, ctx, Options{Name: "replica", ReplicaOfAddr: primary.Addr})
	p := client(t, primary)
	if err := p.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 = %d, %v; want 1 replica", n, err)
	}
	if got, err := client(t, replica).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("replica GET k = %q, %v; want \"v\"", got, err)
	}
	if _, err := Start(ctx, Options{Dir: t.TempDir(), ReplicaOfAddr: "no-port"}); err == nil {
		t.Error("Start with ReplicaOfAddr \"no-port\" = nil error, want one")
	}
}
