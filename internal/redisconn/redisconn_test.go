package redisconn_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/redisconn/redistest"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	sentinels := []string{"10.0.0.1:26379", "sentinel-b:26379"}
	for _, tc := range []struct {
		name string
		opts redisconn.Options
		want string // "" = valid; else a part of the error
	}{
		{"plain url", redisconn.Options{URL: "redis://127.0.0.1:6379/0"}, ""},
		{"sentinels", redisconn.Options{URL: "redis://:pw@ignored/2", Sentinels: sentinels, MasterName: "flashgate"}, ""},
		{"ipv6 sentinel", redisconn.Options{URL: "redis:///0", Sentinels: []string{"[::1]:26379"}, MasterName: "m"}, ""},
		{"bad scheme", redisconn.Options{URL: "http://127.0.0.1:6379"}, "invalid URL scheme"},
		{"no master name", redisconn.Options{URL: "redis:///0", Sentinels: sentinels}, "master name is required"},
		{"no port", redisconn.Options{URL: "redis:///0", Sentinels: []string{"10.0.0.1"}, MasterName: "m"}, `"10.0.0.1" is not host:port`},
		{"no host", redisconn.Options{URL: "redis:///0", Sentinels: []string{":26379"}, MasterName: "m"}, "is not host:port"},
		{"port out of range", redisconn.Options{URL: "redis:///0", Sentinels: []string{"a:70000"}, MasterName: "m"}, "port must be 1-65535"},
		{"named port", redisconn.Options{URL: "redis:///0", Sentinels: []string{"a:redis"}, MasterName: "m"}, "port must be 1-65535"},
		{"unix socket", redisconn.Options{URL: "unix:///tmp/redis.sock", Sentinels: sentinels, MasterName: "m"}, "not a unix socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", tc.opts, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate(%+v) = %v, want an error with %q", tc.opts, err, tc.want)
			}
		})
	}
}

func TestParseSentinels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{" , ", nil, false},
		{"a:1", []string{"a:1"}, false},
		{" a:1 , b:2,, ", []string{"a:1", "b:2"}, false},
		{"a:1,b", nil, true},
		{"a:1;b:2", nil, true},
	} {
		got, err := redisconn.ParseSentinels(tc.in)
		if (err != nil) != tc.wantErr || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("ParseSentinels(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// Neither Redact nor an error about a URL shows its password.
func TestPasswordsAreRedacted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"redis://user:s3cret@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"redis://:s3cret@host/0", "redis://:xxxxx@host/0"},
		{"redis://host:6379/0", "redis://host:6379/0"},
		{"redis://u:s3cret@host:port-is-bad/0", "redis://xxxxx@host:port-is-bad/0"},
		{":s3cret@host", "(unparseable url)"},
	} {
		if got := redisconn.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, raw := range []string{"redis://u:s3cret@host:port-is-bad/0", "redis://u:s3cret@host/notadb", "redis://u:s3cret@h/0?bogus=1"} {
		_, err := redisconn.New(redisconn.Options{URL: raw})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%s) = %v, want an error without the password", redisconn.Redact(raw), err)
		}
	}
	// A password holding an unencoded '#', '?' or '/' cuts the URL short:
	// url.Parse then reads the start of the password as a port and quotes
	// it in its error.
	for _, raw := range []string{"redis://u:zq1#kx9@host:1/0", "redis://u:zq1?kx9@host/0", "redis://u:zq1/kx9@host/0"} {
		_, err := redisconn.ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "zq1") || strings.Contains(err.Error(), "kx9") {
			t.Errorf("ParseURL(a URL with a password of '#', '?' or '/') = %v, want an error without any of the password", err)
		}
	}
}

// The pool is as large as the URL says, else as Options.PoolSize says, and
// every call obeys its context.
func TestPoolSizeAndTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      redisconn.Options
		wantPool  int
		sentinels bool
	}{
		{"default", redisconn.Options{URL: "redis://127.0.0.1:6379/0", PoolSize: 64}, 64, false},
		{"from url", redisconn.Options{URL: "redis://127.0.0.1:6379/0?pool_size=7", PoolSize: 64}, 7, false},
		{"sentinels", redisconn.Options{URL: "redis://:pw@x/3?pool_size=9", Sentinels: []string{"127.0.0.1:1"}, MasterName: "m"}, 9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redisconn.New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			o := c.(*redis.Client).Options()
			if o.PoolSize != tc.wantPool || !o.ContextTimeoutEnabled {
				t.Errorf("New(%s): PoolSize %d, ContextTimeoutEnabled %v; want %d, true", tc.name, o.PoolSize, o.ContextTimeoutEnabled, tc.wantPool)
			}
			if tc.sentinels && (o.Addr != "FailoverClient" || o.DB != 3 || o.Password != "pw") {
				t.Errorf("New(%s): Addr %q, DB %d, password set %v; want the failover client on db 3 with the URL's password", tc.name, o.Addr, o.DB, o.Password == "pw")
			}
		})
	}
}

// With cluster nodes New makes a cluster client with the URL's
// credentials and the pool per node; the URL may name no db but 0, and
// Sentinels and a cluster exclude each other.
func TestClusterClient(t *testing.T) {
	t.Parallel()
	c, err := redisconn.New(redisconn.Options{URL: "redis://:pw@ignored/0?pool_size=5", Cluster: []string{"127.0.0.1:7001", "127.0.0.1:7002"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("New(cluster) = %T, want *redis.ClusterClient", c)
	}
	if o := cc.Options(); o.PoolSize != 5 || o.Password != "pw" || !o.ContextTimeoutEnabled || len(o.Addrs) != 2 {
		t.Errorf("New(cluster): PoolSize %d, password set %v, ContextTimeoutEnabled %v, Addrs %v; want 5, true, true, two", o.PoolSize, o.Password == "pw", o.ContextTimeoutEnabled, o.Addrs)
	}
	for _, bad := range []redisconn.Options{
		{URL: "redis://x/2", Cluster: []string{"127.0.0.1:7001"}},
		{URL: "redis://x/0", Cluster: []string{"127.0.0.1:7001"}, Sentinels: []string{"127.0.0.1:1"}, MasterName: "m"},
		{URL: "redis://x/0", Cluster: []string{"no-port"}},
	} {
		if _, err := redisconn.New(bad); err == nil {
			t.Errorf("New(%+v) = nil error, want a refusal", bad)
		}
	}
	if _, err := redisconn.FromSettings(redisconn.Settings{URL: "redis://x/0", Cluster: "127.0.0.1:7001, 127.0.0.1:7002"}, 8); err != nil {
		t.Errorf("FromSettings(a cluster) = %v", err)
	}
	if _, err := redisconn.FromSettings(redisconn.Settings{URL: "redis://x/0", Cluster: "127.0.0.1"}, 8); err == nil || !strings.Contains(err.Error(), "FLASHGATE_REDIS_CLUSTER") {
		t.Errorf("FromSettings(a bad cluster node) = %v, want an error naming FLASHGATE_REDIS_CLUSTER", err)
	}
}

func testRedisURL() string {
	if v := os.Getenv("FLASHGATE_TEST_REDIS_URL"); v != "" {
		return v
	}
	return "redis://127.0.0.1:6379/0"
}

// Without Sentinels the client reaches the server the URL names.
func TestPlainClientReachesTheServer(t *testing.T) {
	t.Parallel()
	c, err := redisconn.New(redisconn.Options{URL: testRedisURL(), PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping through %s = %v", redisconn.Redact(testRedisURL()), err)
	}
}

// The failover client follows a promotion: what was written (and
// replicated) before the primary was killed is read from the new primary,
// writes go to it, and a script the old primary had cached, missing from the
// new one's cache, is loaded again by redis.Script.Run.
func TestFailoverClientFollowsAPromotion(t *testing.T) {
	t.Parallel()
	f := redistest.StartFailover(t, redistest.Options{})
	c := f.Client(t)
	ctx := context.Background()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }

	incr := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	cctx, cancel := call()
	if n, err := incr.Run(cctx, c, []string{"n"}).Int64(); err != nil || n != 1 {
		t.Fatalf("script INCR before the failover = %d, %v; want 1", n, err)
	}
	cancel()
	f.WaitReplicated(t, 5*time.Second)

	old := f.KillPrimary(t)
	killed := time.Now()
	next := f.WaitPromotion(t, old, 20*time.Second)
	if next == old {
		t.Fatalf("WaitPromotion returned the killed primary %s", old.Name)
	}
	t.Logf("%s promoted %v after %s was killed", next.Name, time.Since(killed).Round(time.Millisecond), old.Name)

	direct := redis.NewClient(&redis.Options{Addr: next.Addr})
	defer direct.Close()
	cctx, cancel = call()
	if cached, err := direct.ScriptExists(cctx, incr.Hash()).Result(); err != nil || len(cached) != 1 || cached[0] {
		t.Errorf("SCRIPT EXISTS on the new primary %s = %v, %v; want [false] (scripts are not replicated)", next.Name, cached, err)
	}
	cancel()

	// The client learns of the switch from the Sentinels; until then a
	// call may still reach for the dead primary.
	var n int64
	testenv.Eventually(t, 10*time.Second, "script INCR answered after the promotion", func() bool {
		cctx, cancel := call()
		defer cancel()
		var err error
		n, err = incr.Run(cctx, c, []string{"n"}).Int64()
		return err == nil
	})
	if n != 2 {
		t.Errorf("script INCR after the failover = %d, want 2 (the replicated 1, plus one)", n)
	}
	cctx, cancel = call()
	defer cancel()
	if got, err := direct.Get(cctx, "n").Int64(); err != nil || got != 2 {
		t.Errorf("GET n on the new primary %s = %d, %v; want 2 (the client wrote there)", next.Name, got, err)
	}
}
