package deploytest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// deploy/k8s/base/redis-init.sh, run as the Redis pods' init container runs it (its /conf and secret paths
// moved into a temporary folder, no other pod answering), writes a redis.conf that a real redis-server starts
// with — redis-0 the primary, the others replicas of redis-0, noeviction and AOF on, the password required —
// and a sentinel.conf that a real Sentinel starts with and monitors the primary by.
func TestRedisInitScript(t *testing.T) {
	t.Parallel()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (make test installs it, with redis-tools, when it starts its own Redis): %v", err)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli is not installed (Debian: redis-tools): %v", err)
	}
	script, err := os.ReadFile("../k8s/base/redis-init.sh")
	if err != nil {
		t.Fatal(err)
	}
	const namespace, password = "deploytest", "deploytest-redis-password"
	domain := "redis." + namespace + ".svc.cluster.local"
	for _, pod := range []string{"redis-0", "redis-1"} {
		t.Run(pod, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			conf, secrets := filepath.Join(dir, "conf"), filepath.Join(dir, "secrets")
			for _, d := range []string{conf, secrets} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(secrets, "redis-password"), password)
			writeFile(t, filepath.Join(secrets, "sentinel-password"), "")
			s := strings.ReplaceAll(string(script), "/conf/", conf+"/")
			s = strings.ReplaceAll(s, "/run/secrets/redis/", secrets+"/")
			cmd := exec.Command("sh", "-c", s)
			cmd.Env = append(os.Environ(), "POD_NAME="+pod, "POD_NAMESPACE="+namespace, "MASTER_NAME=flashgate", "MAXMEMORY=64mb")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("redis-init.sh: %v\n%s", err, out)
			}
			if want := "primary is redis-0." + domain; !strings.Contains(string(out), want) {
				t.Errorf("redis-init.sh said %q, want %q", out, want)
			}

			// Redis enters its dir as it reads the file: the pod's /data volume is the test's folder here.
			redisConf, err := os.ReadFile(filepath.Join(conf, "redis.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(redisConf), "\ndir /data\n") {
				t.Errorf("redis.conf does not keep its data in /data (the pod's volume):\n%s", redisConf)
			}
			writeFile(t, filepath.Join(conf, "redis.conf"), strings.Replace(string(redisConf), "\ndir /data\n", "\ndir "+dir+"\n", 1))
			port := freePort(t)
			rdb := startRedis(t, dir, server, []string{filepath.Join(conf, "redis.conf"), "--port", port, "--bind", "127.0.0.1", "--dir", dir}, password)
			ctx := context.Background()
			for key, want := range map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "maxmemory": "67108864", "replica-announce-ip": pod + "." + domain} {
				got, err := rdb.ConfigGet(ctx, key).Result()
				if err != nil || got[key] != want {
					t.Errorf("CONFIG GET %s = %v (%v), want %s", key, got, err, want)
				}
			}
			info, err := rdb.Info(ctx, "replication").Result()
			if err != nil {
				t.Fatal(err)
			}
			wantRole := "role:master"
			if pod != "redis-0" {
				wantRole = "master_host:redis-0." + domain
			}
			if !strings.Contains(info, wantRole) {
				t.Errorf("INFO replication lacks %q:\n%s", wantRole, info)
			}
			if pod != "redis-0" {
				return
			}
			// The Sentinel, pointed at this primary where the pod would name redis-0 by its DNS name.
			sentinelConf, err := os.ReadFile(filepath.Join(conf, "sentinel.conf"))
			if err != nil {
				t.Fatal(err)
			}
			sc := strings.ReplaceAll(string(sentinelConf), "redis-0."+domain+" 6379", "127.0.0.1 "+port)
			writeFile(t, filepath.Join(conf, "sentinel.conf"), sc)
			sport := freePort(t)
			sentinel := startRedis(t, dir, server, []string{filepath.Join(conf, "sentinel.conf"), "--sentinel", "--port", sport, "--bind", "127.0.0.1"}, "")
			addr, err := sentinel.Do(ctx, "SENTINEL", "get-master-addr-by-name", "flashgate").StringSlice()
			if err != nil || len(addr) != 2 || addr[1] != port {
				t.Errorf("SENTINEL get-master-addr-by-name flashgate = %v (%v), want [127.0.0.1 %s]", addr, err, port)
			}
		})
	}
}

// startRedis starts a redis-server of the test's own with args and returns a client once it answers PING;
// the server is killed when the test ends.
func startRedis(t *testing.T, dir, server string, args []string, password string) *redis.Client {
	t.Helper()
	log, err := os.CreateTemp(dir, "redis-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(server, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port := args[slices.Index(args, "--port")+1]
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Password: password, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return rdb
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("redis-server %v does not answer: %v\n%s", args, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
