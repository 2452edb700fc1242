package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/delayproxy"
	"github.com/flashgate/flashgate/internal/childproc"
	"github.com/flashgate/flashgate/internal/freeport"
	"github.com/flashgate/flashgate/internal/gowork"
	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// Secrets the stack is configured with. The harness mints user tokens and
// admission tokens with them, as the shop and the edge would.
const (
	adminToken    = "doimxBez0OgvwcnmaZhqQkZTW6psFJzwp3KxZUUIilY=" // 32 random bytes: both tiers refuse weaker
	tokenKeys     = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	userSecret    = "chaos-user-secret-0123456789abcdef"
	gatewayKey    = "sk_chaos_0123456789abcdef"
	webhookSecret = "whsec_chaos_0123456789abcdef"
	redisPrefix   = "chaos:"

	// gatewayControlToken is the sandbox gateway's alone: the harness pays
	// and lists intents with it; origin and edge never see it.
	gatewayControlToken = "ctl_chaos_0123456789abcdef"
)

// topology is how Redis is deployed for a scenario.
type topology int

const (
	// plainRedis is one redis-server without persistence or replica, as make
	// run starts it, reached by origin and edge through the delay proxy.
	plainRedis topology = iota
	// sentinelRedis is a primary, a replica and three Sentinels; origin and
	// edge are given the Sentinels (FLASHGATE_REDIS_SENTINELS and
	// FLASHGATE_REDIS_MASTER) when they know those settings.
	sentinelRedis
	// replicatedRedis is plainRedis with a replica whose replication link
	// runs through a delay proxy of its own (replLink), so a fault can make
	// it lag, kill the primary, promote the replica by hand and point the
	// stack's delay proxy at it.
	replicatedRedis
)

// edgeNode is one edge of the stack. Every edge is pointed at the same
// origin and Redis.
type edgeNode struct {
	name        string // edge, edge-2: in logs and the report
	addr, admin string
	proc        *childproc.Proc
}

// stack is one scenario's deployment: its own Redis (fresh), its own
// database in the shared Postgres cluster, and the binaries (gateway,
// origin, two edges) on free ports. Every fault is a method.
type stack struct {
	dir  string
	bins string
	pg   *pgCluster
	db   string

	redis    *redisserver.Server   // plainRedis, replicatedRedis: the primary
	proxy    *delayproxy.Proxy     // plainRedis, replicatedRedis: origin and edges reach Redis through it
	sentinel *redisserver.Failover // sentinelRedis
	replica  *redisserver.Server   // replicatedRedis
	replLink *delayproxy.Proxy     // replicatedRedis: the replica's link to the primary
	notes    []string              // what the report should say about the set-up

	targetMu sync.Mutex // guards target
	target   string     // where the delay proxy sends new connections: the primary's address

	gatewayAddr, originAddr, originAdmin string
	gateway, origin                      *childproc.Proc
	edges                                []*edgeNode // two, both checked by the line sales
	originEnv                            []string
	instance                             int // the origin's instance number, for restarts under a new name
}

// edgeCount is how many edges the stack runs.
const edgeCount = 2

// startStack starts a stack for one scenario in dir, its sandbox gateway
// playing personality and its origin taking payments through the matching
// provider.
func startStack(ctx context.Context, dir, bins string, pg *pgCluster, db string, topo topology, personality string, sentinelSupport bool) (*stack, error) {
	s := &stack{dir: dir, bins: bins, pg: pg, db: db, instance: 1}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var redisEnv []string
	var err error
	switch topo {
	case sentinelRedis:
		if s.sentinel, err = startSentinels(ctx, dir); err != nil {
			return nil, err
		}
		if sentinelSupport {
			redisEnv = []string{"FLASHGATE_REDIS_SENTINELS=" + s.sentinel.SentinelList(), "FLASHGATE_REDIS_MASTER=" + s.sentinel.MasterName}
		} else {
			// Without Sentinel support the binaries can only be pointed at
			// the primary: the failover shows what that costs.
			redisEnv = []string{"FLASHGATE_REDIS_URL=" + s.sentinel.Data[0].URL}
			s.notes = append(s.notes, "origin and edge have no Sentinel settings (FLASHGATE_REDIS_SENTINELS): they were pointed at the primary")
		}
	default:
		if s.redis, err = startRedis(ctx, dir); err != nil {
			return nil, err
		}
		s.target = s.redis.Addr
		if s.proxy, err = delayproxy.Listen("127.0.0.1:0", s.resolveRedis); err != nil {
			return nil, err
		}
		redisEnv = []string{"FLASHGATE_REDIS_URL=redis://" + s.proxy.Addr() + "/0"}
		if topo == replicatedRedis {
			if s.replLink, err = delayproxy.New(s.redis.Addr); err != nil {
				return nil, err
			}
			if s.replica, err = startReplica(ctx, dir, s.replLink.Addr()); err != nil {
				return nil, err
			}
		}
	}
	if err := pg.createDB(ctx, db); err != nil {
		return nil, fmt.Errorf("create database %s: %w", db, err)
	}
	ports, err := freeport.Ports(3 + 2*edgeCount)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, port := range ports {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	s.gatewayAddr, s.originAddr, s.originAdmin = addrs[0], addrs[1], addrs[2]
	for i := range edgeCount {
		name := "edge"
		if i > 0 {
			name = fmt.Sprintf("edge-%d", i+1)
		}
		s.edges = append(s.edges, &edgeNode{name: name, addr: addrs[3+2*i], admin: addrs[4+2*i]})
	}

	payments, err := paymentEnv(personality, "http://"+s.gatewayAddr)
	if err != nil {
		return nil, err
	}
	common := append([]string{
		"FLASHGATE_ADMIN_TOKEN=" + adminToken,
		"FLASHGATE_TOKEN_KEYS=" + tokenKeys,
		"FLASHGATE_USER_TOKEN_SECRET=" + userSecret,
		"FLASHGATE_REDIS_PREFIX=" + redisPrefix,
		"FLASHGATE_POSTGRES_URL=" + pg.url(db),
		"FLASHGATE_SHUTDOWN_TIMEOUT=3s",
	}, redisEnv...)
	s.gateway = &childproc.Proc{Name: "sandboxgateway", Path: filepath.Join(bins, "sandboxgateway"), Log: filepath.Join(dir, "gateway.log"),
		Env: childEnv(append(append([]string{}, common...),
			"FLASHGATE_GATEWAY_ADDR="+s.gatewayAddr, "FLASHGATE_GATEWAY_PUBLIC_URL=http://"+s.gatewayAddr,
			"FLASHGATE_GATEWAY_PERSONALITY="+personality,
			"FLASHGATE_GATEWAY_API_KEY="+gatewayKey, "FLASHGATE_GATEWAY_WEBHOOK_SECRET="+webhookSecret,
			"FLASHGATE_GATEWAY_CONTROL_TOKEN="+gatewayControlToken,
			"FLASHGATE_GATEWAY_WEBHOOK_URL=http://"+s.edges[0].addr+"/v1/payments/webhook",
			"FLASHGATE_GATEWAY_RETRY_BASE=200ms", "FLASHGATE_GATEWAY_RETRY_MAX=2s", "FLASHGATE_GATEWAY_SEED=7")...)}
	// A reconciler every 2 s and a stream lease of 4 s: what the defaults
	// do in 30 s and 10 s, within a scenario's few seconds.
	s.originEnv = append(append(append([]string{}, common...), payments...),
		"FLASHGATE_ORIGIN_ADDR="+s.originAddr, "FLASHGATE_ORIGIN_ADMIN_ADDR="+s.originAdmin,
		"FLASHGATE_POSTGRES_MAX_CONNS=16",
		"FLASHGATE_RECONCILE_INTERVAL=2s", "FLASHGATE_WRITER_CLAIM_IDLE=4s", "FLASHGATE_PAYMENT_GRACE=20s")
	s.origin = &childproc.Proc{Name: "origin", Path: filepath.Join(bins, "origin"), Log: filepath.Join(dir, "origin.log"),
		Env: childEnv(append(append([]string{}, s.originEnv...), "FLASHGATE_INSTANCE=chaos-origin-1")...)}
	for _, e := range s.edges {
		e.proc = &childproc.Proc{Name: e.name, Path: filepath.Join(bins, "edge"), Log: filepath.Join(dir, e.name+".log"),
			Env: childEnv(append(append([]string{}, common...),
				"FLASHGATE_EDGE_ADDR="+e.addr, "FLASHGATE_EDGE_ADMIN_ADDR="+e.admin,
				"FLASHGATE_ORIGIN_URL=http://"+s.originAddr, "FLASHGATE_TRUSTED_PROXIES=127.0.0.1/32",
				"FLASHGATE_DEFAULT_RATE="+strconv.FormatFloat(edgeDefaultRate, 'g', -1, 64),
				// Blocks of places sized to this sale's 25 admissions a second
				// (the default 256 suits hundreds): a loss then leaves about a
				// second of unused places, not ten.
				"FLASHGATE_LINE_MIN_BLOCK=32")...)}
	}

	for _, step := range s.healthChecks() {
		if err := step.p.Start(); err != nil {
			return nil, err
		}
		if err := waitHTTP(ctx, step.p, step.url, 30*time.Second); err != nil {
			return nil, err
		}
	}
	if err := s.originReady(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// originReady waits until the origin answers /readyz 200: it has reached
// Redis and Postgres and takes sales (until then it answers please_wait).
func (s *stack) originReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		status, desc := originReady(ctx, s)
		if status == 200 {
			return nil
		}
		if time.Now().After(deadline) || !sleepFor(ctx, 100*time.Millisecond) {
			return fmt.Errorf("the origin was not ready within %v (last answer: %s)", d, desc)
		}
	}
}

// paymentEnv is the origin's payment settings for the sandbox gateway
// playing personality at gatewayURL: the matching provider
// (FLASHGATE_PAYMENT_PROVIDER, providerOf), its API at the sandbox, under
// the sandbox's API key and webhook secret, as make run sets them. A
// personality the origin has no provider for is an error.
func paymentEnv(personality, gatewayURL string) ([]string, error) {
	provider := "FLASHGATE_PAYMENT_PROVIDER=" + providerOf(personality)
	switch personality {
	case sandboxgateway.PersonalityFlashgate:
		return []string{provider, "FLASHGATE_GATEWAY_URL=" + gatewayURL,
			"FLASHGATE_GATEWAY_API_KEY=" + gatewayKey, "FLASHGATE_GATEWAY_WEBHOOK_SECRET=" + webhookSecret}, nil
	case sandboxgateway.PersonalityStripe:
		return []string{provider, "FLASHGATE_STRIPE_API_URL=" + gatewayURL,
			"FLASHGATE_STRIPE_SECRET_KEY=" + gatewayKey, "FLASHGATE_STRIPE_WEBHOOK_SECRET=" + webhookSecret}, nil
	case sandboxgateway.PersonalityRazorpay: // one fixed test key id, the sandbox's API key as its secret
		return []string{provider, "FLASHGATE_RAZORPAY_API_URL=" + gatewayURL,
			"FLASHGATE_RAZORPAY_KEY_ID=" + sandboxgateway.RazorpayKeyID, "FLASHGATE_RAZORPAY_KEY_SECRET=" + gatewayKey,
			"FLASHGATE_RAZORPAY_WEBHOOK_SECRET=" + webhookSecret}, nil
	}
	return nil, fmt.Errorf("the sandbox gateway's personality %q has no origin settings here (paymentEnv)", personality)
}

// healthCheck is a binary and its liveness URL.
type healthCheck struct {
	p   *childproc.Proc
	url string
}

// healthChecks lists the binaries in start order: the gateway, the origin,
// the edges.
func (s *stack) healthChecks() []healthCheck {
	out := []healthCheck{{s.gateway, "http://" + s.gatewayAddr + "/healthz"}, {s.origin, "http://" + s.originAdmin + "/healthz"}}
	for _, e := range s.edges {
		out = append(out, healthCheck{e.proc, "http://" + e.admin + "/healthz"})
	}
	return out
}

// procs are the binaries the stack runs, edges first (the stop order).
func (s *stack) procs() []*childproc.Proc {
	var out []*childproc.Proc
	for _, e := range s.edges {
		out = append(out, e.proc)
	}
	return append(out, s.origin, s.gateway)
}

// resolveRedis is the delay proxy's Resolver: the primary's address, which
// a promotion by hand moves (retargetRedis).
func (s *stack) resolveRedis(context.Context) (string, error) {
	s.targetMu.Lock()
	defer s.targetMu.Unlock()
	return s.target, nil
}

// retargetRedis sends the delay proxy's new connections to addr; the
// connections it holds to the old target stay until that side ends them.
func (s *stack) retargetRedis(addr string) {
	s.targetMu.Lock()
	s.target = addr
	s.targetMu.Unlock()
}

// redisClient returns a client of the Redis primary the binaries use now,
// for the harness's own reads and faults; the caller closes it.
func (s *stack) redisClient(ctx context.Context) (*redis.Client, error) {
	if s.sentinel != nil {
		p, err := s.sentinel.Primary(ctx)
		if err != nil {
			return nil, err
		}
		return p.Client(), nil
	}
	s.targetMu.Lock()
	defer s.targetMu.Unlock()
	if s.replica != nil && s.target == s.replica.Addr {
		return s.replica.Client(), nil
	}
	return s.redis.Client(), nil
}

// close stops everything the stack started; the Postgres cluster stays.
func (s *stack) close() {
	var wg sync.WaitGroup
	for _, p := range s.procs() {
		if p != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Stop(syscall.SIGTERM, 4*time.Second)
			}()
		}
	}
	wg.Wait()
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	if s.replLink != nil {
		_ = s.replLink.Close()
	}
	if s.redis != nil {
		s.redis.Kill()
	}
	if s.replica != nil {
		s.replica.Kill()
	}
	if s.sentinel != nil {
		s.sentinel.Kill()
	}
}

// logs is the tail of each binary's log, for a failed scenario.
func (s *stack) logs(n int) string {
	var b strings.Builder
	for _, c := range s.healthChecks() {
		if p := c.p; p != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.Log, p.Tail(n))
		}
	}
	return b.String()
}

// restartOrigin starts the origin again, under a new instance name when
// fresh is set (a replacement pod rather than the same one restarted).
func (s *stack) restartOrigin(fresh bool) error {
	if fresh {
		s.instance++
		s.origin.Env = childEnv(append(append([]string{}, s.originEnv...), "FLASHGATE_INSTANCE=chaos-origin-"+strconv.Itoa(s.instance))...)
	}
	return s.origin.Start()
}

// healthy waits until every binary answers its health check.
func (s *stack) healthy(ctx context.Context, d time.Duration) error {
	for _, c := range s.healthChecks() {
		if err := waitHTTP(ctx, c.p, c.url, d); err != nil {
			return err
		}
	}
	return nil
}

// sentinelSupport reports whether both binaries accept the Sentinel
// settings (their -h names FLASHGATE_REDIS_SENTINELS).
func sentinelSupport(bins string) bool {
	for _, name := range []string{"origin", "edge"} {
		out, _ := exec.Command(filepath.Join(bins, name), "-h").CombinedOutput()
		if !strings.Contains(string(out), "FLASHGATE_REDIS_SENTINELS") {
			return false
		}
	}
	return true
}

// buildBinaries builds origin, edge and the sandbox gateway into dir from
// the repository that holds the working directory.
func buildBinaries(ctx context.Context, dir string) error {
	root, err := gowork.Root(ctx)
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./origin", "./edge", "./deploy/sandboxgateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}
