package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testenv"
)

// cluster is what cluster.sh tells its FLASHGATE_RUN_THEN command.
type cluster struct {
	cdn        string   // nginx, http://host:port
	accessLog  string   // nginx's access log
	edges      []string // the edges' public listeners
	sale       string   // the demo sale's id
	redisPIDs  []int    // primary, replica
	redisAddrs []string // primary, replica
	sentinels  []string
	master     string
	originAdm  []string
	originTok  string
	// The Redis users (deploy/k8s/base/redis-edge.acl): the default user's
	// password (the origins'), and the edges' user "edge" with its password,
	// limited to the line's keys under prefix.
	redisPassword, edgeRedisPassword, prefix string
}

func clusterFromEnv(t *testing.T) cluster {
	t.Helper()
	need := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: run by cluster.sh as FLASHGATE_RUN_THEN only", name)
		}
		return v
	}
	c := cluster{
		cdn:        need("FLASHGATE_CLUSTER_CDN_URL"),
		accessLog:  need("FLASHGATE_CLUSTER_CDN_ACCESS_LOG"),
		edges:      strings.Split(need("FLASHGATE_CLUSTER_EDGE_URLS"), ","),
		sale:       need("FLASHGATE_DEMO_SALE_ID"),
		redisAddrs: strings.Split(need("FLASHGATE_CLUSTER_REDIS_ADDRS"), ","),
		sentinels:  strings.Split(need("FLASHGATE_REDIS_SENTINELS"), ","),
		master:     need("FLASHGATE_REDIS_MASTER"),
		originAdm:  strings.Split(need("FLASHGATE_CLUSTER_ORIGIN_ADMIN_URLS"), ","),
		originTok:  need("FLASHGATE_ORIGIN_ADMIN_TOKEN"),

		redisPassword:     need("FLASHGATE_CLUSTER_REDIS_PASSWORD"),
		edgeRedisPassword: need("FLASHGATE_CLUSTER_EDGE_REDIS_PASSWORD"),
		prefix:            need("FLASHGATE_REDIS_PREFIX"),
	}
	for _, p := range strings.Split(need("FLASHGATE_CLUSTER_REDIS_PIDS"), ",") {
		pid, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("FLASHGATE_CLUSTER_REDIS_PIDS: %v", err)
		}
		c.redisPIDs = append(c.redisPIDs, pid)
	}
	if len(c.edges) != 2 || len(c.redisPIDs) != 2 || len(c.redisAddrs) != 2 || len(c.sentinels) != 3 {
		t.Fatalf("want 2 edges, 2 Redis nodes and 3 Sentinels, got %v %v %v %v", c.edges, c.redisPIDs, c.redisAddrs, c.sentinels)
	}
	return c
}

// checkCluster is the check cluster.sh runs against itself: this test
// binary, run as its FLASHGATE_RUN_THEN command with checkEnv set (see
// TestRunClusterSurvivesPrimaryKill).
func checkCluster(t *testing.T) {
	if os.Getenv("FLASHGATE_CLUSTER_CDN_URL") == "" {
		t.Fatalf("%s is set but FLASHGATE_CLUSTER_CDN_URL is not: this check runs only as cluster.sh's FLASHGATE_RUN_THEN", checkEnv)
	}
	c := clusterFromEnv(t)
	h := &shopperClient{t: t, http: &http.Client{Timeout: 5 * time.Second}}

	// The snapshot through nginx, from its cache once the sale is open.
	var snap struct {
		SaleID string `json:"sale_id"`
		Status string `json:"status"`
	}
	testenv.Eventually(t, 20*time.Second, "sale "+c.sale+" open through nginx", func() bool {
		res := h.do("GET", c.cdn+"/v1/sales/"+c.sale, nil, "")
		if res.status != http.StatusOK {
			t.Fatalf("GET nginx /v1/sales/%s = %d %s, want 200", c.sale, res.status, res.body)
		}
		if res.header.Get("X-Cache-Status") == "" {
			t.Errorf("GET nginx /v1/sales/%s has no X-Cache-Status: not answered through the reference CDN config", c.sale)
		}
		res.decode(&snap)
		if snap.SaleID != c.sale {
			t.Fatalf("snapshot through nginx names sale %q, want %q", snap.SaleID, c.sale)
		}
		return snap.Status == "open"
	})

	// One line across both edges: shoppers joining at edge1 and at edge2
	// directly, and through nginx, get one place each, one after another
	// in the order they joined (the sale is fresh and no one else joins).
	var order []string
	positions := map[string]int{}
	place := func(who string, pos int) {
		order = append(order, who)
		positions[who] = pos
	}
	for i := 0; i < 6; i++ {
		edge := c.edges[i%2]
		who := fmt.Sprintf("direct-%d-edge%d", i, i%2+1)
		j := h.join(edge, c.sale, h.login(c.cdn, who))
		place(who, j.Position)
	}
	// Logged in first, so that nginx's round robin spreads the joins
	// themselves over both edges.
	alice := h.login(c.cdn, "alice")
	others := make([]string, 3)
	for i := range others {
		others[i] = h.login(c.cdn, fmt.Sprintf("cdn-%d", i))
	}
	aliceJoin := h.join(c.cdn, c.sale, alice)
	place("alice", aliceJoin.Position)
	for i, user := range others {
		place(fmt.Sprintf("cdn-%d", i), h.join(c.cdn, c.sale, user).Position)
	}
	first := positions[order[0]]
	for i, who := range order {
		if positions[who] != first+i {
			t.Errorf("join %d (%s) got place %d, want %d: the edges do not keep one line (places %v)", i, who, positions[who], first+i, positions)
		}
	}
	checkBothEdgesServedJoins(t, c)
	t.Logf("10 joins through edge1, edge2 and nginx got places %d to %d, one each, in the order they joined", first, first+len(order)-1)

	// The edges share their token keys: alice's queue token, from whichever
	// edge nginx chose, is good at both.
	for i, edge := range c.edges {
		res := h.do("GET", edge+"/v1/sales/"+c.sale+"/queue/status",
			map[string]string{"Authorization": "Bearer " + aliceJoin.QueueToken, "X-User-Token": alice}, "")
		if res.status != http.StatusOK {
			t.Errorf("GET edge%d /queue/status with alice's queue token = %d %s, want 200", i+1, res.status, res.body)
		}
	}

	// Alice is admitted and holds a unit, through nginx.
	adm := h.waitAdmitted(c.cdn, c.sale, alice, aliceJoin.QueueToken, 20*time.Second)
	aliceHold := h.reserve(c.cdn, c.sale, alice, adm, "alice-1", 10*time.Second)
	t.Logf("alice holds %s through nginx", aliceHold)

	// Everything the edges did so far, they did as their own Redis user:
	// the primary refused them nothing.
	noEdgeRefusals(t, c, c.redisAddrs[0], "before the failover")

	// The Redis primary dies; the Sentinels promote the replica.
	killed := time.Now()
	if err := syscall.Kill(c.redisPIDs[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 the Redis primary (pid %d): %v", c.redisPIDs[0], err)
	}
	newPrimary := waitPromotion(t, c, 20*time.Second)
	t.Logf("the Sentinels promoted %s %s after the primary was killed", newPrimary, time.Since(killed).Round(time.Millisecond))

	// The whole shape follows: a new shopper joins and holds through nginx.
	bob := h.login(c.cdn, "bob")
	bobJoin := h.joinRetrying(c.cdn, c.sale, bob, 30*time.Second)
	bobAdm := h.waitAdmitted(c.cdn, c.sale, bob, bobJoin.QueueToken, 30*time.Second)
	bobHold := h.reserve(c.cdn, c.sale, bob, bobAdm, "bob-1", 30*time.Second)
	t.Logf("bob joined, was admitted and holds %s through nginx %s after the kill", bobHold, time.Since(killed).Round(time.Millisecond))

	// Alice's hold, answered 201 before the failover, is still hers.
	var r struct {
		ReservationID string `json:"reservation_id"`
		Status        string `json:"status"`
	}
	res := h.retry503("GET", c.cdn+"/v1/reservations/"+aliceHold, map[string]string{"Authorization": "Bearer " + alice}, "", 20*time.Second)
	if res.status != http.StatusOK {
		t.Fatalf("GET nginx /v1/reservations/%s (alice) = %d %s, want 200", aliceHold, res.status, res.body)
	}
	res.decode(&r)
	if r.ReservationID != aliceHold || r.Status != "held" {
		t.Fatalf("alice's reservation after the failover = %s %q, want %s held", r.ReservationID, r.Status, aliceHold)
	}

	if links := os.Getenv("FLASHGATE_CLUSTER_LINKS"); links != "" {
		cutEdgeLink(t, h, c, links)
	}

	// And the books say no promise was broken.
	var ledger struct {
		ReservationsLost *int `json:"reservations_lost"`
	}
	lres := h.do("GET", c.originAdm[0]+"/admin/sales/"+c.sale+"/ledger", map[string]string{"Authorization": "Bearer " + c.originTok}, "")
	if lres.status != http.StatusOK {
		t.Fatalf("GET origin1 ledger = %d %s", lres.status, lres.body)
	}
	lres.decode(&ledger)
	if ledger.ReservationsLost == nil || *ledger.ReservationsLost != 0 {
		t.Errorf("ledger reservations_lost = %v after the failover, want 0: %s", ledger.ReservationsLost, lres.body)
	}

	// The promoted replica has the edges' user too, refused them nothing,
	// and refuses it what is not the line's.
	noEdgeRefusals(t, c, newPrimary, "after the failover")
	edgeUserConfined(t, c, newPrimary)
}

// noEdgeRefusals requires the Redis server at addr to have refused the
// edges' user nothing (its ACL LOG, read as the default user): whatever the
// edges sent it (their connections' set-up, reads, scripts and every call
// inside them), the user's rules allowed.
func noEdgeRefusals(t *testing.T, c cluster, addr, when string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: c.redisPassword, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := rdb.ACLLog(ctx, 1000).Result()
	if err != nil {
		t.Fatalf("ACL LOG on %s (%s): %v", addr, when, err)
	}
	for _, e := range entries {
		if e.Username == "edge" {
			t.Errorf("Redis %s refused the edges' user %d time(s) %s: %s %q (%s): deploy/k8s/base/redis-edge.acl lacks what an edge does",
				addr, e.Count, when, e.Reason, e.Object, e.Context)
		}
	}
}

// edgeUserConfined connects to the primary at addr as the edges' user and
// requires it to reach the line's keys and be refused the origins' stock
// and holds and the server's administration (NOPERM).
func edgeUserConfined(t *testing.T, c cluster, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: "edge", Password: c.edgeRedisPassword, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cursor := c.prefix + "{q:" + c.sale + "}:cursor"
	if err := rdb.HGet(ctx, cursor, "now_serving").Err(); err != nil {
		t.Errorf("as the edges' user: HGET %s now_serving = %v, want the line's cursor", cursor, err)
	}
	sale := c.prefix + "{s:" + c.sale + "}:"
	for _, cmd := range [][]any{
		{"HGET", sale + "inv:sneaker-42", "available"},
		{"HSET", sale + "inv:sneaker-42", "available", "1000"},
		{"ZRANGE", sale + "holds", "0", "-1"},
		{"EVAL", "return redis.call('HINCRBY', KEYS[1], 'available', 1)", "1", sale + "inv:sneaker-42"},
		{"EVAL", "return redis.call('HGET', ARGV[1], 'available')", "1", cursor, sale + "inv:sneaker-42"},
		{"FLUSHALL"},
		{"CONFIG", "GET", "requirepass"},
		{"KEYS", "*"},
	} {
		if err := rdb.Do(ctx, cmd...).Err(); !refused(err) {
			t.Errorf("as the edges' user: %v = %v, want NOPERM", cmd, err)
		}
	}
}

// refused reports whether err is Redis refusing the user: NOPERM, or, for
// a call inside a script, the error that names the script (Redis 7.0: "The
// user executing the script can't access at least one of the keys").
func refused(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "NOPERM") || strings.Contains(s, "user executing the script can't") || strings.Contains(s, "no permissions")
}

// cutEdgeLink takes edge1's link down (namespaces only) and requires the
// snapshot through nginx to keep answering 200 from edge2, each answer within
// the reference config's snapshot timeout and a margin; then brings the link
// back and waits for edge1 to answer again.
func cutEdgeLink(t *testing.T, h *shopperClient, c cluster, links string) {
	t.Helper()
	link := ""
	for _, kv := range strings.Split(links, ",") {
		if name, dev, ok := strings.Cut(kv, "="); ok && name == "edge1" {
			link = dev
		}
	}
	if link == "" {
		t.Fatalf("FLASHGATE_CLUSTER_LINKS %q names no link for edge1", links)
	}
	ipLink := func(state string) {
		t.Helper()
		if out, err := exec.Command("ip", "link", "set", link, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s %s: %v\n%s", link, state, err, out)
		}
	}
	ipLink("down")
	restored := false
	defer func() {
		if !restored {
			ipLink("up")
		}
	}()
	const slowest = 5 * time.Second // the snapshot location's proxy_read_timeout (3 s), and a margin
	var worst time.Duration
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		began := time.Now()
		res := h.do("GET", c.cdn+"/v1/sales/"+c.sale, nil, "")
		took := time.Since(began)
		worst = max(worst, took)
		if res.status != http.StatusOK {
			t.Fatalf("GET nginx /v1/sales/%s with edge1's link down = %d %s after %s, want 200 from edge2", c.sale, res.status, res.body, took)
		}
		if took > slowest {
			t.Errorf("GET nginx /v1/sales/%s with edge1's link down took %s, want within %s", c.sale, took, slowest)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("edge1's link (%s) down: the snapshot through nginx answered 200 throughout, slowest %s", link, worst.Round(time.Millisecond))
	ipLink("up")
	restored = true
	testenv.Eventually(t, 10*time.Second, "edge1 answering /healthz after its link came back up", func() bool {
		return h.do("GET", c.edges[0]+"/healthz", nil, "").status == http.StatusOK
	})
}

// checkBothEdgesServedJoins reads nginx's access log: the joins that went
// through nginx reached both edges.
func checkBothEdgesServedJoins(t *testing.T, c cluster) {
	t.Helper()
	b, err := os.ReadFile(c.accessLog)
	if err != nil {
		t.Fatalf("nginx access log: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "POST /v1/sales/"+c.sale+"/queue ") {
			continue
		}
		if i := strings.Index(line, " edge="); i >= 0 {
			seen[strings.Fields(line[i+len(" edge="):])[0]] = true
		}
	}
	for _, e := range c.edges {
		if !seen[strings.TrimPrefix(e, "http://")] {
			t.Errorf("no join through nginx reached %s (access log's edges: %v)", e, seen)
		}
	}
}

func waitPromotion(t *testing.T, c cluster, within time.Duration) string {
	t.Helper()
	old := c.redisAddrs[0]
	var promoted string
	testenv.Eventually(t, within, "the Sentinels naming a primary other than the killed "+old, func() bool {
		for _, s := range c.sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s, DialTimeout: time.Second, ReadTimeout: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			addr, err := sc.GetMasterAddrByName(ctx, c.master).Result()
			cancel()
			sc.Close()
			if err == nil && len(addr) == 2 {
				if got := net.JoinHostPort(addr[0], addr[1]); got != old {
					promoted = got
					return true
				}
			}
		}
		return false
	})
	return promoted
}

// shopperClient speaks the edge's public API as the shopper's page does.
type shopperClient struct {
	t    *testing.T
	http *http.Client
}

type answer struct {
	t      *testing.T
	status int
	body   []byte
	header http.Header
}

func (a answer) decode(v any) {
	a.t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		a.t.Fatalf("decode %s: %v", a.body, err)
	}
}

// retryAfter is the answer's Retry-After, within [200ms, 2s].
func (a answer) retryAfter() time.Duration {
	d := 500 * time.Millisecond
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil {
		d = time.Duration(s) * time.Second
	}
	return min(max(d, 200*time.Millisecond), 2*time.Second)
}

func (h *shopperClient) do(method, url string, headers map[string]string, body string) answer {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := h.http.Do(req)
	if err != nil {
		return answer{t: h.t, status: 0, body: []byte(err.Error()), header: http.Header{}}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{t: h.t, status: 0, body: []byte(err.Error()), header: http.Header{}}
	}
	return answer{t: h.t, status: res.StatusCode, body: b, header: res.Header}
}

// retry503 repeats a request answered 503 please_wait (or not answered,
// or 429) after its Retry-After, until another answer or the deadline.
func (h *shopperClient) retry503(method, url string, headers map[string]string, body string, within time.Duration) answer {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		res := h.do(method, url, headers, body)
		switch res.status {
		case 0, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			if time.Now().Add(res.retryAfter()).After(deadline) {
				return res
			}
			time.Sleep(res.retryAfter())
		default:
			return res
		}
	}
}

func (h *shopperClient) login(base, user string) string {
	h.t.Helper()
	res := h.retry503("POST", base+"/v1/dev/login", nil, fmt.Sprintf(`{"user_id":%q}`, user), 10*time.Second)
	if res.status != http.StatusOK {
		h.t.Fatalf("POST %s/v1/dev/login %s = %d %s, want 200", base, user, res.status, res.body)
	}
	var v struct {
		UserToken string `json:"user_token"`
	}
	res.decode(&v)
	return v.UserToken
}

type joined struct {
	QueueToken string `json:"queue_token"`
	Position   int    `json:"position"`
}

func (h *shopperClient) join(base, sale, user string) joined {
	h.t.Helper()
	res := h.do("POST", base+"/v1/sales/"+sale+"/queue", map[string]string{"Authorization": "Bearer " + user}, "{}")
	if res.status != http.StatusAccepted {
		h.t.Fatalf("POST %s/v1/sales/%s/queue = %d %s, want 202", base, sale, res.status, res.body)
	}
	var j joined
	res.decode(&j)
	if j.QueueToken == "" || j.Position <= 0 {
		h.t.Fatalf("join answered %s: want a queue token and a position", res.body)
	}
	return j
}

// joinRetrying joins, waiting out 503 please_wait while a failover runs.
func (h *shopperClient) joinRetrying(base, sale, user string, within time.Duration) joined {
	h.t.Helper()
	res := h.retry503("POST", base+"/v1/sales/"+sale+"/queue", map[string]string{"Authorization": "Bearer " + user}, "{}", within)
	if res.status != http.StatusAccepted {
		h.t.Fatalf("POST %s/v1/sales/%s/queue after the failover = %d %s, want 202 within %s", base, sale, res.status, res.body, within)
	}
	var j joined
	res.decode(&j)
	return j
}

// waitAdmitted polls the shopper's status until admitted and returns the
// admission token.
func (h *shopperClient) waitAdmitted(base, sale, user, queueToken string, within time.Duration) string {
	h.t.Helper()
	var admission string
	next := time.Now() // when the next poll is due
	testenv.Eventually(h.t, within, "admitted in the line of "+sale+" at "+base, func() bool {
		if time.Now().Before(next) {
			return false
		}
		last := h.do("GET", base+"/v1/sales/"+sale+"/queue/status",
			map[string]string{"Authorization": "Bearer " + queueToken, "X-User-Token": user}, "")
		wait := 400 * time.Millisecond // under the per-account poll limit (3 a second)
		switch last.status {
		case http.StatusOK:
			var s struct {
				State          string `json:"state"`
				AdmissionToken string `json:"admission_token"`
			}
			last.decode(&s)
			if s.State == "admitted" && s.AdmissionToken != "" {
				admission = s.AdmissionToken
				return true
			}
			if s.State != "waiting" {
				h.t.Fatalf("status %s, want waiting or admitted", last.body)
			}
		case 0, http.StatusServiceUnavailable, http.StatusTooManyRequests:
			wait = last.retryAfter()
		default:
			h.t.Fatalf("GET %s/v1/sales/%s/queue/status = %d %s", base, sale, last.status, last.body)
		}
		next = time.Now().Add(wait)
		return false
	})
	return admission
}

// reserve holds one unit with the admission token and returns the
// reservation's id; a 503 please_wait is pressed again with the same key.
func (h *shopperClient) reserve(base, sale, user, admission, key string, within time.Duration) string {
	h.t.Helper()
	res := h.retry503("POST", base+"/v1/sales/"+sale+"/reserve",
		map[string]string{"Authorization": "Bearer " + admission, "X-User-Token": user},
		fmt.Sprintf(`{"sku":"sneaker-42","idempotency_key":%q}`, key), within)
	if res.status != http.StatusCreated {
		h.t.Fatalf("POST %s/v1/sales/%s/reserve = %d %s, want 201", base, sale, res.status, res.body)
	}
	var v struct {
		ReservationID string `json:"reservation_id"`
		Status        string `json:"status"`
	}
	res.decode(&v)
	if v.ReservationID == "" || v.Status != "held" {
		h.t.Fatalf("reserve answered %s: want a held reservation", res.body)
	}
	return v.ReservationID
}

// checkRegions is TestRunClusterAcrossRegions's check, run by cluster.sh
// with two regions: nginx and edge1 at home, a second nginx and edge2 far,
// regionDelay each way from Redis and origin2.
func checkRegions(t *testing.T) {
	c := clusterFromEnv(t)
	far := os.Getenv("FLASHGATE_CLUSTER_FAR_CDN_URL")
	if far == "" || os.Getenv("FLASHGATE_CLUSTER_REGION_DELAY") != regionDelay.String() {
		t.Fatalf("FLASHGATE_CLUSTER_FAR_CDN_URL %q, FLASHGATE_CLUSTER_REGION_DELAY %q: want cluster.sh's two regions, %s each way",
			far, os.Getenv("FLASHGATE_CLUSTER_REGION_DELAY"), regionDelay)
	}
	h := &shopperClient{t: t, http: &http.Client{Timeout: 5 * time.Second}}
	rtt := 2 * regionDelay

	// Both regions' CDNs serve the open sale.
	for _, cdn := range []string{c.cdn, far} {
		testenv.Eventually(t, 20*time.Second, "GET "+cdn+"/v1/sales/"+c.sale+" answering 200 and open", func() bool {
			res := h.do("GET", cdn+"/v1/sales/"+c.sale, nil, "")
			var snap struct {
				Status string `json:"status"`
			}
			res.decode(&snap)
			if res.status != http.StatusOK || snap.Status != "open" {
				return false
			}
			if res.header.Get("X-Cache-Status") == "" {
				t.Errorf("GET %s/v1/sales/%s has no X-Cache-Status: not the reference CDN config", cdn, c.sale)
			}
			return true
		})
	}

	// One line across the regions: joins alternating between them get one
	// place each, in the order they were made; a far join costs at least
	// the link's round trip, a home one less.
	var homeTook, farTook []time.Duration
	var places []int
	var farShopper, farQueueToken string
	for i := range 8 {
		cdn, region := c.cdn, "home"
		if i%2 == 1 {
			cdn, region = far, "far"
		}
		user := h.login(cdn, fmt.Sprintf("%s-%d", region, i))
		start := time.Now()
		j := h.join(cdn, c.sale, user)
		took := time.Since(start)
		places = append(places, j.Position)
		if region == "far" {
			farTook = append(farTook, took)
			farShopper, farQueueToken = user, j.QueueToken
		} else {
			homeTook = append(homeTook, took)
		}
	}
	for i := 1; i < len(places); i++ {
		if places[i] != places[0]+i {
			t.Errorf("joins alternating between the regions got places %v, want one line: consecutive places in join order", places)
			break
		}
	}
	for _, d := range farTook {
		if d < rtt {
			t.Errorf("a far join took %s, less than the link's round trip %s: the far edge does not reach Redis through the link", d, rtt)
		}
	}
	if m := median(homeTook); m >= rtt {
		t.Errorf("home joins took %v (median %s), want under the link's round trip %s: home joins should not cross it", homeTook, m, rtt)
	}
	t.Logf("joins: home %v, far %v (round trip %s); places %v", homeTook, farTook, rtt, places)

	// The far shopper is admitted by the far edge and holds a unit through
	// the far CDN; the reserve crosses the link to origin2.
	adm := h.waitAdmitted(far, c.sale, farShopper, farQueueToken, 20*time.Second)
	start := time.Now()
	hold := h.reserve(far, c.sale, farShopper, adm, "far-1", 10*time.Second)
	if took := time.Since(start); took < rtt {
		t.Errorf("the far reserve took %s, less than the link's round trip %s", took, rtt)
	}
	t.Logf("the far shopper holds %s through the far region's nginx", hold)

	// Both edges, the far one through the link, did it all as their own
	// Redis user, refused nothing.
	noEdgeRefusals(t, c, c.redisAddrs[0], "across the regions")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
