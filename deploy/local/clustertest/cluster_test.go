// Package clustertest runs `make run-cluster`'s script (deploy/local/cluster.sh)
// for real — nginx, two edges, two origins, a Redis primary with a replica
// and three Sentinels, Postgres, the sandbox gateway — and, as its
// FLASHGATE_RUN_THEN command, this test binary again, which checks the
// cluster from outside: the snapshot through nginx, a shopper joining,
// admitted and holding a unit through nginx, one line across both edges,
// and the same after the Redis primary is killed with SIGKILL; the edges,
// a Redis user of their own (deploy/k8s/base/redis-edge.acl), refused
// nothing by either Redis node (ACL LOG), that user refused the origins'
// keys and the server's administration.
//
// As root the cluster runs once in network namespaces and once on loopback
// ports; otherwise on loopback ports only. The runs, and the two regions'
// run, play at once: each waits far more than it computes. It needs what cluster.sh needs
// (redis-server, nginx, envsubst, socat for namespaces, Postgres as
// services.sh finds or starts it); the script installs what is missing when
// it runs as root.
package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// checkEnv switches this binary, run by cluster.sh as FLASHGATE_RUN_THEN,
// from running the script to checking the cluster it started (checkCluster).
const checkEnv = "FLASHGATE_CLUSTERTEST_CHECK"

// loopbackPortBase keeps the test's loopback clusters off the ports of a
// `make run-cluster` someone may have running (7000 on): the one-region
// loopback run takes 7400 on, the two regions' 7500 on. The runs play at
// once, each with a Postgres database of its own (FLASHGATE_CLUSTER_DB).
const loopbackPortBase, regionsPortBase = 7400, 7500

// runBudget bounds one run of the script: build (cached), start, check, stop.
const runBudget = 150 * time.Second

// TestRunClusterSurvivesPrimaryKill runs cluster.sh in each shape this
// machine allows and requires the check to pass and the script to leave
// nothing behind. Run by the script as its FLASHGATE_RUN_THEN command
// (checkEnv set), the same test is the check itself.
func TestRunClusterSurvivesPrimaryKill(t *testing.T) {
	if runAsCheck(t, checkCluster) {
		return
	}
	t.Parallel() // beside TestRunClusterAcrossRegions
	prebuild(t)
	all := []struct {
		name, netns string
		needRoot    bool
	}{
		{"netns", "1", true},
		{"loopback", "0", false},
	}
	shapes := all[:0]
	for _, s := range all {
		if s.needRoot && os.Geteuid() != 0 {
			t.Logf("the %s shape needs root (network namespaces); running the others", s.name)
			continue
		}
		shapes = append(shapes, s)
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			runCluster(t, "TestRunClusterSurvivesPrimaryKill", loopbackPortBase, "FLASHGATE_CLUSTER_NETNS="+s.netns, "FLASHGATE_CLUSTER_DB=flashgate_cluster_"+s.name)
			t.Logf("cluster.sh (%s) started, passed the check and stopped in %s", s.name, time.Since(start).Round(time.Millisecond))
			if s.netns == "1" {
				assertNoNamespacesLeft(t)
			} else {
				assertPortsFree(t, loopbackPortBase)
			}
		})
	}
}

// runAsCheck runs check and reports true when this binary was started by
// cluster.sh as its FLASHGATE_RUN_THEN command (checkEnv set).
func runAsCheck(t *testing.T, check func(*testing.T)) bool {
	if os.Getenv(checkEnv) == "" {
		return false
	}
	check(t)
	return true
}

// prebuild compiles what cluster.sh builds, outside the run's budget: on a
// cold build cache that alone takes minutes, and the script's own build is
// then a cache hit.
func prebuild(t *testing.T) {
	t.Helper()
	prebuilt.Do(func() { prebuildErr = buildBinaries(t) })
	if prebuildErr != nil {
		t.Fatal(prebuildErr)
	}
}

// prebuilt makes the build once per test binary: both tests need it.
var (
	prebuilt    sync.Once
	prebuildErr error
)

// buildBinaries runs cluster.sh's go build from the repository's root.
func buildBinaries(t *testing.T) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Into bin/, as the script builds: its three runs then find bin/ up to
	// date and leave it alone, rather than write it at once.
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", "bin/", "./origin", "./edge", "./deploy/sandboxgateway", "./bench/...")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build the cluster's binaries: %v\n%s", err, out)
	}
	t.Logf("built the cluster's binaries in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// regionDelay is the one-way delay TestRunClusterAcrossRegions asks of the
// link between the regions.
const regionDelay = 50 * time.Millisecond

// TestRunClusterAcrossRegions runs cluster.sh with two regions
// (FLASHGATE_CLUSTER_REGION_DELAY): edge2 behind a second nginx, 50 ms each
// way from Redis and its origin. Run by the script (checkEnv set), it is the
// check: one line across both regions' CDNs, the far region's joins and
// reserves paying the distance once, and a far shopper holding a unit.
func TestRunClusterAcrossRegions(t *testing.T) {
	if runAsCheck(t, checkRegions) {
		return
	}
	t.Parallel()
	prebuild(t)
	start := time.Now()
	runCluster(t, "TestRunClusterAcrossRegions", regionsPortBase, "FLASHGATE_CLUSTER_NETNS=0", "FLASHGATE_CLUSTER_REGION_DELAY="+regionDelay.String(),
		"FLASHGATE_CLUSTER_DB=flashgate_cluster_regions")
	t.Logf("cluster.sh (two regions) started, passed the check and stopped in %s", time.Since(start).Round(time.Millisecond))
	assertPortsFree(t, regionsPortBase)
}

// runCluster runs cluster.sh with env, on loopback ports from base when
// it runs on loopback, and this binary's test named check as its
// FLASHGATE_RUN_THEN command, which must pass.
func runCluster(t *testing.T, check string, base int, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runBudget)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "../cluster.sh")
	// A deadline stops the script as Ctrl-C would, so it still cleans up.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 40 * time.Second
	cmd.Env = append(append(os.Environ(), env...),
		fmt.Sprintf("FLASHGATE_CLUSTER_PORT_BASE=%d", base),
		"FLASHGATE_DEMO_STARTS_IN=2",
		// Three clusters' origins share make test's Postgres (100 connections here) with the lab's other tests.
		"FLASHGATE_POSTGRES_MAX_CONNS=4",
		checkEnv+"=1",
		fmt.Sprintf("FLASHGATE_RUN_THEN=%s -test.run='^%s$' -test.count=1 -test.v -test.timeout=90s", shellQuote(self), check),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || testing.Verbose() {
		t.Logf("cluster.sh output:\n%s", out.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("cluster.sh did not finish within %s", runBudget)
	}
	if err != nil {
		t.Fatalf("cluster.sh with %s = %v, want exit 0 (the check passed)", env, err)
	}
	if !strings.Contains(out.String(), "--- PASS: "+check) {
		t.Fatalf("cluster.sh exited 0 but the check did not report PASS")
	}
}

func assertNoNamespacesLeft(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "fgc-") {
		t.Errorf("namespaces left after cluster.sh stopped:\n%s", out)
	}
	links, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v\n%s", err, links)
	}
	for _, l := range strings.Split(string(links), "\n") {
		if strings.Contains(l, " fgc-") {
			t.Errorf("link left after cluster.sh stopped: %s", l)
		}
	}
}

func assertPortsFree(t *testing.T, base int) {
	t.Helper()
	for _, off := range []int{0, 1, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62, 63, 70, 81, 82} {
		addr := fmt.Sprintf("127.0.0.1:%d", base+off)
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after cluster.sh stopped", addr)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
