package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/internal/testenv"
)

// A small crowd end to end, the way make bench runs the big one: the real
// binaries (sandbox gateway, origin, edge) on loopback ports, on this
// test's own Redis prefix and Postgres schema, and the simulator through
// them. Nothing is oversold, nothing answers 5xx, every shopper learns a
// fate, the ledger keeps its invariant, and the report renders.
func TestCrowdAgainstTheRealStack(t *testing.T) {
	env := testenv.New(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../origin", "../../edge", "../../deploy/sandboxgateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	edgeAddr, edgeAdmin, originAddr, originAdmin, gatewayAddr := port(), port(), port(), port(), port()
	common := []string{
		"FLASHGATE_ADMIN_TOKEN=4iVSe0dZ1Gzs8Zf0cQvCw6E2u0Vh5bIuPqX0jXyqOaA=",
		"FLASHGATE_TOKEN_KEYS=k1:" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"FLASHGATE_USER_TOKEN_SECRET=e2e-user-secret-0123456789abcdef",
		"FLASHGATE_GATEWAY_API_KEY=sk_e2e_0123456789abcdef",
		"FLASHGATE_GATEWAY_WEBHOOK_SECRET=whsec_e2e_0123456789abcdef",
		"FLASHGATE_REDIS_URL=" + env.RedisURL,
		"FLASHGATE_REDIS_PREFIX=" + env.Prefix,
		"FLASHGATE_POSTGRES_URL=" + env.PostgresURL,
		"FLASHGATE_SHUTDOWN_TIMEOUT=5s",
	}
	start := func(name string, vars ...string) {
		cmd := exec.Command(filepath.Join(bin, name))
		cmd.Env = append(append(os.Environ(), common...), vars...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", name, lastLines(out.String(), 30))
			}
		})
	}
	const gatewayToken = "ctl_e2e_0123456789abcdef" // the gateway's alone: origin and edge never see it
	start("sandboxgateway", "FLASHGATE_GATEWAY_ADDR="+gatewayAddr, "FLASHGATE_GATEWAY_PUBLIC_URL=http://"+gatewayAddr,
		"FLASHGATE_GATEWAY_CONTROL_TOKEN="+gatewayToken,
		"FLASHGATE_GATEWAY_WEBHOOK_URL=http://"+edgeAddr+"/v1/payments/webhook", "FLASHGATE_GATEWAY_RETRY_BASE=100ms")
	waitHealthy(t, "http://"+gatewayAddr+"/healthz")
	start("origin", "FLASHGATE_ORIGIN_ADDR="+originAddr, "FLASHGATE_ORIGIN_ADMIN_ADDR="+originAdmin,
		"FLASHGATE_GATEWAY_URL=http://"+gatewayAddr, "FLASHGATE_INSTANCE=e2e-origin")
	waitHealthy(t, "http://"+originAdmin+"/healthz")
	start("edge", "FLASHGATE_EDGE_ADDR="+edgeAddr, "FLASHGATE_EDGE_ADMIN_ADDR="+edgeAdmin,
		"FLASHGATE_ORIGIN_URL=http://"+originAddr, "FLASHGATE_TRUSTED_PROXIES=127.0.0.1/32")
	waitHealthy(t, "http://"+edgeAdmin+"/healthz")

	sc := crowdsim.DefaultScenario()
	sc.Shoppers, sc.Stock, sc.RatePerS, sc.Bots, sc.BotIPs = 600, 60, 100, 20, 2
	sc.PreQueueS, sc.BurstS, sc.TailS, sc.HoldTTLS, sc.MaxDurationS = 2, 2, 3, 3, 30
	res, err := crowdsim.Run(context.Background(), crowdsim.Config{
		Scenario: sc, EdgeURL: "http://" + edgeAddr, EdgeAdminURL: "http://" + edgeAdmin,
		OriginAdminURL: "http://" + originAdmin, GatewayURL: "http://" + gatewayAddr, GatewayToken: gatewayToken,
		AdminToken: "4iVSe0dZ1Gzs8Zf0cQvCw6E2u0Vh5bIuPqX0jXyqOaA=", UserSecret: []byte("e2e-user-secret-0123456789abcdef"),
		Conns: 64, Seed: 3, Progress: t.Logf,
	})
	if err != nil {
		t.Fatalf("crowdsim.Run = %v", err)
	}
	if res.Oversold != 0 || res.Status5xx != 0 || !res.InvariantOK {
		t.Errorf("oversold %d, 5xx %d, invariant %v; want 0, 0, true", res.Oversold, res.Status5xx, res.InvariantOK)
	}
	total := sc.Shoppers + sc.Bots
	if f := res.Fates; f.Reserved.Count+f.SoldOut.Count+f.Unknown != total || f.Unknown > total/100 || f.Answered < total*99/100 {
		t.Errorf("fates: %d reserved + %d sold out + %d unknown of %d shoppers, %d answered; want (almost) every shopper a fate and an answer",
			f.Reserved.Count, f.SoldOut.Count, f.Unknown, total, f.Answered)
	}
	if res.Fates.Paid == 0 || res.Sold < res.Fates.Paid || res.Sold > sc.Stock {
		t.Errorf("paid %d, sold %d of %d; want some paid, all of them sold, none beyond the stock", res.Fates.Paid, res.Sold, sc.Stock)
	}
	for _, k := range res.Ledger {
		if k.Drift != [3]int64{} || k.Pending != 0 {
			t.Errorf("ledger %s: drift %v, pending %d; want Redis and Postgres agreeing", k.SKU, k.Drift, k.Pending)
		}
	}
	dir := t.TempDir()
	if err := writeReport(dir, crowdreport.Runs{Flashgate: *res}); err != nil {
		t.Fatalf("writeReport = %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "oversold") {
		t.Errorf("report.md: %v, %d bytes", err, len(md))
	}
	t.Log(crowdreport.Summary(crowdreport.Runs{Flashgate: *res}))
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 30 s", url)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
