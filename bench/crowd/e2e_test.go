package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/delayproxy"
	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/testenv"
)

// A small crowd end to end, the way make bench runs the big one: the real
// binaries (sandbox gateway, origin, edge) on loopback ports, on this
// test's own Redis prefix and Postgres schema, and the simulator through
// them, with both bot cohorts, the defences off and on. Nothing is
// oversold, nothing answers 5xx, every shopper learns a fate, the ledger
// keeps its invariant, and the report renders. With the defences on every
// honest shopper who joined solved a real proof of work at the edge, and no
// admission token served another account. The two runs play at once, each
// on a stack of its own (make bench plays them one after the other on one
// stack: TestRunDefences), so the test takes about as long as one.
func TestCrowdAgainstTheRealStack(t *testing.T) {
	t.Parallel()
	sc := smallScenario()
	sc.Smart = crowdsim.SmartCohort(30)
	modes := []string{crowdsim.DefencesOff, crowdsim.DefencesOn}
	stacks := make([]stack, len(modes))
	for i := range modes {
		stacks[i] = startStack(t, 0)
	}
	results := make([]crowdreport.Runs, len(modes))
	errs := make([]error, len(modes))
	var wg sync.WaitGroup
	for i, mode := range modes {
		wg.Go(func() {
			o := options{Config: stacks[i].config(t, sc, 3), DefenceModes: []string{mode}}
			_, errs[i] = runDefences(context.Background(), o, "e2e", &results[i], crowdsim.Run)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("defences %s: runDefences = %v", modes[i], err)
		}
	}
	runs := crowdreport.Runs{Flashgate: results[0].Flashgate, Defended: &results[1].Flashgate}
	for _, res := range []*crowdsim.Result{&runs.Flashgate, runs.Defended} {
		mode := res.Bots.Defences.Mode
		checkRun(t, res, sc)
		honest, challenged, asked := 0, 0, 0
		for _, g := range res.Bots.Groups {
			if g.Bot {
				if g.SharedTokens != nil && g.SharedTokens.ExtraHolds != 0 {
					t.Errorf("defences %s: %s cohort: %d holds with another account's admission token, want 0", mode, g.Cohort, g.SharedTokens.ExtraHolds)
				}
				continue
			}
			honest, challenged, asked = honest+g.Accounts, challenged+g.Challenged, asked+g.ChallengeRequired
		}
		t.Logf("defences %s: %d honest, %d solved a proof of work, %d answered challenge_required; tarpit %q, one unit per payer %q", mode, honest, challenged, asked,
			res.Bots.Defences.Tarpit, res.Bots.Defences.OneUnitPerPayer)
		switch {
		case len(res.Bots.Groups) != 4:
			t.Errorf("defences %s: %d groups in the fairness table, want honest ×2, hammering, smart: %+v", mode, len(res.Bots.Groups), res.Bots.Groups)
		case mode == crowdsim.DefencesOff && challenged != 0:
			t.Errorf("defences off: %d honest shoppers challenged, want 0", challenged)
		case mode == crowdsim.DefencesOn && challenged < honest*9/10:
			t.Errorf("defences on: %d of %d honest shoppers solved a proof of work, want (almost) all", challenged, honest)
		case asked != 0:
			// The snapshot publishes the challenge: an honest page solves
			// it before its join and joins once.
			t.Errorf("defences %s: %d honest shoppers answered 403 challenge_required, want 0", mode, asked)
		case res.Bots.Groups[3].Cohort != "smart" || res.Bots.Groups[3].SharedTokens == nil || res.Bots.Groups[3].SharedTokens.Tried == 0:
			t.Errorf("defences %s: smart cohort %+v, want its shared admission tokens tried", mode, res.Bots.Groups[3])
		}
	}
	if mode := runs.Defended.Bots.Defences.Mode; runs.Flashgate.Bots.Defences.Mode != crowdsim.DefencesOff || mode != crowdsim.DefencesOn {
		t.Fatalf("runs: %q and %q; want off and on", runs.Flashgate.Bots.Defences.Mode, mode)
	}
	dir := t.TempDir()
	if err := writeReport(dir, runs); err != nil {
		t.Fatalf("writeReport = %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "oversold") || !strings.Contains(string(md), "## Bots and defences") {
		t.Errorf("report.md: %v, %d bytes", err, len(md))
	}
	t.Log(crowdreport.Summary(runs))
}

// regionDelay is the one-way distance TestCrowdAcrossTwoRegions puts
// between the far edge and the home region's Redis and origin.
const regionDelay = 40 * time.Millisecond

// The same crowd split across two regions (docs/REGIONS.md): a second edge
// reaches the home region's Redis and origin through a delay proxy, 40 ms
// each way. The sale stays exact, every shopper of both regions gets an
// answer, and the far region's joins and reserves pay the distance: at
// least one round trip (the proxy is on their path), and — what the design
// promises — not many more than at home (a batch per round trip, not a
// queue of them).
func TestCrowdAcrossTwoRegions(t *testing.T) {
	t.Parallel()
	st := startStack(t, regionDelay)
	sc := smallScenario()
	res := st.run(t, sc, 5)
	checkRun(t, res, sc)
	if len(res.Regions) != 2 {
		t.Fatalf("regions = %+v, want home and far", res.Regions)
	}
	home, far := res.Regions[0], res.Regions[1]
	rtt := (2 * regionDelay).Seconds()
	for _, r := range res.Regions {
		if r.Shoppers < sc.Shoppers/4 || r.Answered < r.Shoppers*99/100 {
			t.Errorf("region %s: %d of %d shoppers answered; want a fair share of the crowd, (almost) all answered", r.Name, r.Answered, r.Shoppers)
		}
	}
	for _, c := range []struct {
		what      string
		home, far crowdsim.Dist
	}{{"join", home.Join, far.Join}, {"reserve", home.Reserve, far.Reserve}} {
		if c.home.Count == 0 || c.far.Count == 0 {
			t.Errorf("%s: %d at home, %d far; want some in each region", c.what, c.home.Count, c.far.Count)
			continue
		}
		extra := c.far.P50 - c.home.P50
		t.Logf("%s p50: home %.3f s, far %.3f s: %.3f s more, the round trip is %.3f s", c.what, c.home.P50, c.far.P50, extra, rtt)
		if c.far.P50 < rtt || extra > 4*rtt {
			t.Errorf("%s p50: far %.3f s, home %.3f s; want the far one at least the round trip (%.3f s), and at most four more than home",
				c.what, c.far.P50, c.home.P50, rtt)
		}
	}
	t.Log(crowdreport.Summary(crowdreport.Runs{Flashgate: *res}))
}

// testSetUp is the lead a test run's first sale gets, as a bench run's: on
// a machine busy with the rest of make test the edges learned of a sale
// later (up to 9 s on a fresh clone), and the run sets up a new sale with
// twice the lead (crowdsim.Config.SetUp).
const testSetUp = 3 * time.Second

func smallScenario() crowdsim.Scenario {
	sc := crowdsim.DefaultScenario()
	sc.Shoppers, sc.Stock, sc.RatePerS, sc.Hammering.Accounts, sc.Hammering.Addresses = 600, 60, 100, 20, 2
	sc.PreQueueS, sc.BurstS, sc.TailS, sc.HoldTTLS, sc.MaxDurationS = 2, 2, 3, 3, 30
	return sc
}

// checkRun holds a run to what every flashgate run must show.
func checkRun(t *testing.T, res *crowdsim.Result, sc crowdsim.Scenario) {
	t.Helper()
	if res.Oversold != 0 || res.Status5xx != 0 || !res.InvariantOK {
		t.Errorf("oversold %d, 5xx %d, invariant %v; want 0, 0, true", res.Oversold, res.Status5xx, res.InvariantOK)
	}
	total := sc.Shoppers + sc.BotAccounts()
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
	// The rate over the run, read from the edge's admin listener once a
	// second, and the set-up's change as the origin recorded it.
	if a := res.Admission; a == nil || len(a.Samples) < 2 || a.Samples[len(a.Samples)-1].RatePerS != sc.RatePerS ||
		len(a.Changes) == 0 || a.Changes[len(a.Changes)-1].AfterRatePerS != sc.RatePerS {
		t.Errorf("admission %+v; want samples and a change at the rate set, %g/s", a, sc.RatePerS)
	}
}

const (
	adminToken   = "4iVSe0dZ1Gzs8Zf0cQvCw6E2u0Vh5bIuPqX0jXyqOaA="
	userSecret   = "e2e-user-secret-0123456789abcdef"
	gatewayToken = "ctl_e2e_0123456789abcdef" // the gateway's alone: origin and edge never see it
)

// stack is the binaries one test started: an edge, an origin and the
// sandbox gateway, and with a distance a far edge.
type stack struct {
	edge, edgeAdmin, originAdmin, gateway string // host:port
	farEdge                               string // "" for one region
}

// startStack builds and starts the binaries on free loopback ports, with
// this test's Redis prefix and Postgres schema; they stop with the test.
// The end-to-end tests run beside each other (they wait more than they
// compute), so a run's CPU table counts every test's binaries: no test
// here checks those figures; make bench's runs are alone.
// A farDelay above 0 also starts a far edge, whose Redis and origin
// connections go through delay proxies adding farDelay each way.
func startStack(t *testing.T, farDelay time.Duration) stack {
	t.Helper()
	env := testenv.New(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../origin", "../../edge", "../../deploy/sandboxgateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Every address at once (freeport holds each until all are chosen).
	ports, err := freeport.Ports(7)
	if err != nil {
		t.Fatal(err)
	}
	port := func() string {
		p := ports[0]
		ports = ports[1:]
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	var st stack
	st.edge, st.edgeAdmin, st.gateway = port(), port(), port()
	originAddr, originAdmin := port(), port()
	st.originAdmin = originAdmin
	common := []string{
		"FLASHGATE_ADMIN_TOKEN=" + adminToken,
		"FLASHGATE_TOKEN_KEYS=k1:" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"FLASHGATE_USER_TOKEN_SECRET=" + userSecret,
		"FLASHGATE_GATEWAY_API_KEY=sk_e2e_0123456789abcdef",
		"FLASHGATE_GATEWAY_WEBHOOK_SECRET=whsec_e2e_0123456789abcdef",
		"FLASHGATE_REDIS_PREFIX=" + env.Prefix,
		"FLASHGATE_POSTGRES_URL=" + env.PostgresURL,
		"FLASHGATE_SHUTDOWN_TIMEOUT=5s",
		// The tests' stacks share one Postgres (100 connections here) with each other and the lab's other tests.
		"FLASHGATE_POSTGRES_MAX_CONNS=8",
		// The far edge reaches the origin through a delay proxy, under
		// another address than the origin listens on.
		"FLASHGATE_LINE_AUDIENCE=flashgate-e2e",
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
	redisURL := "FLASHGATE_REDIS_URL=" + env.RedisURL
	start("sandboxgateway", "FLASHGATE_GATEWAY_ADDR="+st.gateway, "FLASHGATE_GATEWAY_PUBLIC_URL=http://"+st.gateway,
		"FLASHGATE_GATEWAY_CONTROL_TOKEN="+gatewayToken,
		"FLASHGATE_GATEWAY_WEBHOOK_URL=http://"+st.edge+"/v1/payments/webhook", "FLASHGATE_GATEWAY_RETRY_BASE=100ms")
	waitHealthy(t, "http://"+st.gateway+"/healthz")
	start("origin", redisURL, "FLASHGATE_ORIGIN_ADDR="+originAddr, "FLASHGATE_ORIGIN_ADMIN_ADDR="+originAdmin,
		"FLASHGATE_GATEWAY_URL=http://"+st.gateway, "FLASHGATE_INSTANCE=e2e-origin")
	waitHealthy(t, "http://"+originAdmin+"/healthz")
	start("edge", redisURL, "FLASHGATE_EDGE_ADDR="+st.edge, "FLASHGATE_EDGE_ADMIN_ADDR="+st.edgeAdmin,
		"FLASHGATE_ORIGIN_URL=http://"+originAddr, "FLASHGATE_TRUSTED_PROXIES=127.0.0.1/32")
	waitHealthy(t, "http://"+st.edgeAdmin+"/healthz")
	if farDelay <= 0 {
		return st
	}
	u, err := url.Parse(env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	toRedis, toOrigin := distance(t, u.Host, farDelay), distance(t, originAddr, farDelay)
	u.Host = toRedis
	st.farEdge = port()
	farAdmin := port()
	start("edge", "FLASHGATE_REDIS_URL="+u.String(), "FLASHGATE_EDGE_ADDR="+st.farEdge, "FLASHGATE_EDGE_ADMIN_ADDR="+farAdmin,
		"FLASHGATE_ORIGIN_URL=http://"+toOrigin, "FLASHGATE_TRUSTED_PROXIES=127.0.0.1/32")
	waitHealthy(t, "http://"+farAdmin+"/healthz")
	return st
}

// distance is a delay proxy to target, d each way, closed with the test.
func distance(t *testing.T, target string, d time.Duration) string {
	t.Helper()
	p, err := delayproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.SetDelay(delayproxy.Delay{Min: d, Max: d}, delayproxy.Delay{Min: d, Max: d})
	return p.Addr()
}

// config is a run of sc through the stack, the far region's edge taking
// half the shoppers when there is one.
func (st stack) config(t *testing.T, sc crowdsim.Scenario, seed uint64) crowdsim.Config {
	cfg := crowdsim.Config{
		Scenario: sc, EdgeURL: "http://" + st.edge, EdgeAdminURL: "http://" + st.edgeAdmin,
		OriginAdminURL: "http://" + st.originAdmin, GatewayURL: "http://" + st.gateway, GatewayToken: gatewayToken,
		AdminToken: adminToken, UserSecret: []byte(userSecret), Conns: 64, Seed: seed, Progress: t.Logf,
		SetUp: testSetUp,
	}
	if st.farEdge != "" {
		cfg.FarEdgeURL = "http://" + st.farEdge
	}
	return cfg
}

// run plays sc through the stack (config).
func (st stack) run(t *testing.T, sc crowdsim.Scenario, seed uint64) *crowdsim.Result {
	t.Helper()
	res, err := crowdsim.Run(context.Background(), st.config(t, sc, seed))
	if err != nil {
		t.Fatalf("crowdsim.Run = %v", err)
	}
	return res
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, url+" answering 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
