package deploytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/testenv"
)

// initSecrets are the secret files redis-init.sh reads, by their paths in the pod, with the values the tests
// give them (each test may change them).
func initSecrets() map[string]string {
	return map[string]string{
		"/run/secrets/redis/redis-password":    "deploytest-redis-password",
		"/run/secrets/redis/sentinel-password": "deploytest-sentinel-password",
		"/run/secrets/redis-edge/password":     "deploytest-edge-password",
	}
}

// runInit runs deploy/k8s/base/redis-init.sh as the Redis pods' init container runs it, as pod with the
// secrets given and KEY_PREFIX=prefix, its /conf, secret and /scripts paths moved into dir (no other pod
// answering). It returns the folder the configuration was written into and the script's output.
func runInit(t *testing.T, dir, pod, prefix string, secrets map[string]string) (conf string, out []byte, err error) {
	t.Helper()
	script, err := os.ReadFile("../k8s/base/redis-init.sh")
	if err != nil {
		t.Fatal(err)
	}
	conf = filepath.Join(dir, "conf")
	if err := os.Mkdir(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(script), "/conf/", conf+"/")
	s = strings.ReplaceAll(s, "/scripts/", "../k8s/base/")
	for path, value := range secrets {
		file := filepath.Join(dir, "secrets", path)
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, file, value)
		s = strings.ReplaceAll(s, path, file)
	}
	cmd := exec.Command("sh", "-c", s)
	cmd.Env = append(os.Environ(), "POD_NAME="+pod, "POD_NAMESPACE=deploytest", "MASTER_NAME=flashgate", "MAXMEMORY=64mb", "KEY_PREFIX="+prefix)
	out, err = cmd.CombinedOutput()
	return conf, out, err
}

// sharedPrefix is FLASHGATE_REDIS_PREFIX in deploy/k8s/base/shared.env: the binaries' key prefix, which the
// Redis pods' init container is given as KEY_PREFIX (TestKubernetesRedisUsers).
func sharedPrefix(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../k8s/base/shared.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "FLASHGATE_REDIS_PREFIX="); ok {
			return v
		}
	}
	t.Fatal("deploy/k8s/base/shared.env sets no FLASHGATE_REDIS_PREFIX")
	return ""
}

// deploy/k8s/base/redis-init.sh, run as the Redis pods' init container runs it, writes a redis.conf that a
// real redis-server starts with — redis-0 the primary, the others replicas of redis-0, noeviction and AOF on,
// the password required, the edges' user confined to the line's keys (checkEdgeUser) — and a sentinel.conf
// that a real Sentinel starts with, monitors the primary by and answers only with its password.
func TestRedisInitScript(t *testing.T) {
	t.Parallel()
	server := redisServerPath(t)
	secrets := initSecrets()
	password := secrets["/run/secrets/redis/redis-password"]
	prefix := sharedPrefix(t)
	domain := "redis.deploytest.svc.cluster.local"
	for _, pod := range []string{"redis-0", "redis-1"} {
		t.Run(pod, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			conf, out, err := runInit(t, dir, pod, prefix, secrets)
			if err != nil {
				t.Fatalf("redis-init.sh: %v\n%s", err, out)
			}
			if want := "primary is redis-0." + domain; !strings.Contains(string(out), want) {
				t.Errorf("redis-init.sh said %q, want %q", out, want)
			}
			for _, f := range []string{"redis.conf", "sentinel.conf"} {
				b, err := os.ReadFile(filepath.Join(conf, f))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), secrets["/run/secrets/redis-edge/password"]) {
					t.Errorf("%s holds the edges' Redis password itself; want only its hash", f)
				}
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
			checkEdgeUser(t, rdb, "127.0.0.1:"+port, prefix, secrets["/run/secrets/redis-edge/password"])

			// The Sentinel, pointed at this primary where the pod would name redis-0 by its DNS name.
			sentinelConf, err := os.ReadFile(filepath.Join(conf, "sentinel.conf"))
			if err != nil {
				t.Fatal(err)
			}
			sc := strings.ReplaceAll(string(sentinelConf), "redis-0."+domain+" 6379", "127.0.0.1 "+port)
			writeFile(t, filepath.Join(conf, "sentinel.conf"), sc)
			sport := freePort(t)
			spw := secrets["/run/secrets/redis/sentinel-password"]
			sentinel := startRedis(t, dir, server, []string{filepath.Join(conf, "sentinel.conf"), "--sentinel", "--port", sport, "--bind", "127.0.0.1"}, spw)
			addr, err := sentinel.Do(ctx, "SENTINEL", "get-master-addr-by-name", "flashgate").StringSlice()
			if err != nil || len(addr) != 2 || addr[1] != port {
				t.Errorf("SENTINEL get-master-addr-by-name flashgate = %v (%v), want [127.0.0.1 %s]", addr, err, port)
			}
			anon := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + sport, MaxRetries: -1})
			defer anon.Close()
			if err := anon.Do(ctx, "SENTINEL", "get-master-addr-by-name", "flashgate").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Errorf("SENTINEL get-master-addr-by-name without the Sentinels' password = %v, want NOAUTH", err)
			}
		})
	}
}

// redis-init.sh stops the pod, naming what is wrong, when a password is missing — the Sentinels' too: they
// require one — or the edges' is the default user's, or the prefix could widen the edges' key pattern.
func TestRedisInitScriptRefuses(t *testing.T) {
	t.Parallel()
	prefix := sharedPrefix(t)
	for _, tc := range []struct {
		name, file, value, prefix, want string
	}{
		{"no redis password", "/run/secrets/redis/redis-password", "", prefix, "redis-password"},
		{"no sentinel password", "/run/secrets/redis/sentinel-password", "", prefix, "sentinel-password"},
		{"no edge password", "/run/secrets/redis-edge/password", "", prefix, "flashgate-edge-redis"},
		{"edge password is the default's", "/run/secrets/redis-edge/password", "deploytest-redis-password", prefix, "one of their own"},
		{"prefix with a glob", "", "", "fg*", "KEY_PREFIX"},
		{"prefix with a space", "", "", "fg: +@all", "KEY_PREFIX"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secrets := initSecrets()
			if tc.file != "" {
				secrets[tc.file] = tc.value
			}
			conf, out, err := runInit(t, t.TempDir(), "redis-0", tc.prefix, secrets)
			if err == nil {
				t.Fatalf("redis-init.sh exited 0, want a refusal naming %q:\n%s", tc.want, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("redis-init.sh said %q, want it to name %q", out, tc.want)
			}
			if _, err := os.Stat(filepath.Join(conf, "redis.conf")); err == nil {
				t.Errorf("redis-init.sh refused but wrote redis.conf")
			}
		})
	}
}

func redisServerPath(t *testing.T) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (make test installs it, with redis-tools, when it starts its own Redis): %v", err)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli is not installed (Debian: redis-tools): %v", err)
	}
	return server
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
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("redis-server %v log:\n%s", args, b)
		}
	})
	port := args[slices.Index(args, "--port")+1]
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Password: password, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("redis-server %v answering PING", args), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
	return rdb
}

func freePort(t *testing.T) string {
	t.Helper()
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(ports[0])
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
