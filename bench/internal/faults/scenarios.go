package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/bench/internal/delayproxy"
	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// Scenario is one fault played against a running sale, with the payment
// provider the origin takes payments through.
type Scenario struct {
	Name  string
	Short bool   // cheap enough for make test
	What  string // one line for the report
	// Payments marks a scenario of the payment gateway (frozen, killed,
	// its webhooks lost): Scenarios plays it once per personality of the
	// sandbox gateway, every other scenario once with DefaultPersonality.
	Payments bool
	// Personality is the provider the sandbox gateway plays (a
	// sandboxgateway.Personalities name); the origin takes payments through the
	// matching provider (Provider), pointed at the sandbox.
	Personality string
	topo        topology
	// stopsPostgres marks a fault on the run's one Postgres cluster: the
	// scenario is played alone, never beside another (Options.Parallel).
	stopsPostgres bool
	// fault waits for its moment (f.at), breaks something, heals it, and
	// marks the fault's start and end (f.begin, f.finish). It returns when
	// the stack has been given back everything the fault took.
	fault func(ctx context.Context, f *faultEnv) error
}

// faultEnv is what a fault works with, and what it records.
type faultEnv struct {
	st         *stack
	t          *traffic
	start, end time.Time
	notes      []string
	// losses are when the fault made Redis lose data or writes (emptied,
	// restarted from an older file, a lagging replica promoted): each lets a
	// line admit up to a serving block early (earlyBound).
	losses []time.Time
	// failures are what the fault's own checks found wrong.
	failures []string
}

// at waits until d after the sale's start.
func (f *faultEnv) at(ctx context.Context, d time.Duration) error {
	if !sleepUntil(ctx, f.t.zero.Add(d)) {
		return ctx.Err()
	}
	return nil
}

func (f *faultEnv) begin()  { f.start = time.Now() }
func (f *faultEnv) finish() { f.end = time.Now() }

func (f *faultEnv) note(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

// lose marks a Redis loss, now: call it just before the action.
func (f *faultEnv) lose() { f.losses = append(f.losses, time.Now()) }

func (f *faultEnv) fail(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

// DefaultPersonality is the sandbox gateway's personality for the
// scenarios that are not about payments: its own protocol, which the
// origin's default provider (sandbox) speaks.
const DefaultPersonality = sandboxgateway.PersonalityFlashgate

// DefaultProvider is the origin's provider for DefaultPersonality
// (providerOf).
const DefaultProvider = "sandbox"

// shortPersonality is the personality the short payment scenarios (make
// test's) play: one real provider's API, webhooks and listing.
const shortPersonality = sandboxgateway.PersonalityStripe

// Provider is the origin's payment provider (FLASHGATE_PAYMENT_PROVIDER)
// that talks to the sandbox gateway playing sc.Personality.
func (sc Scenario) Provider() string { return providerOf(sc.Personality) }

// Label names the scenario in logs and the report: its name, and for a
// payment scenario the provider, "gateway-frozen (stripe)".
func (sc Scenario) Label() string {
	if !sc.Payments {
		return sc.Name
	}
	return sc.Name + " (" + sc.Provider() + ")"
}

// slug names the scenario's folder: its name, and for a payment scenario
// the provider, "gateway-frozen-stripe".
func (sc Scenario) slug() string {
	if !sc.Payments {
		return sc.Name
	}
	return sc.Name + "-" + sc.Provider()
}

// providerOf is the origin's provider for a personality of the sandbox
// gateway: sandbox for its own protocol, else the personality's name.
func providerOf(personality string) string {
	if personality == sandboxgateway.PersonalityFlashgate {
		return DefaultProvider
	}
	return personality
}

// Scenarios is every play of every scenario, in the order make chaos plays
// them: a payment scenario once per personality of the sandbox gateway
// (sandboxgateway.Personalities: a personality added there joins here), short
// with shortPersonality only; every other scenario once, with
// DefaultPersonality.
func Scenarios() []Scenario {
	var out []Scenario
	for _, sc := range scenarios() {
		if !sc.Payments {
			sc.Personality = DefaultPersonality
			out = append(out, sc)
			continue
		}
		for _, p := range sandboxgateway.Personalities() {
			play := sc
			play.Personality = p
			play.Short = sc.Short && p == shortPersonality
			out = append(out, play)
		}
	}
	return out
}

// scenarios is every scenario once, in play order, without a personality.
func scenarios() []Scenario {
	return []Scenario{
		{Name: "baseline", What: "no fault: the control run", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.finish()
			return nil
		}},
		{Name: "origin-kill9", Short: true, What: "origin killed -9 at 3 s and started again at once under the same instance name",
			fault: killOrigin(false)},
		{Name: "origin-kill9-new-name", What: "origin killed -9 at 3 s and replaced at once by one with a new instance name (its stream entries must be taken over)",
			fault: killOrigin(true)},
		{Name: "edge-kill9", What: "the first edge killed -9 at 3 s and started again at once (the second goes on)", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.st.edges[0].proc.Kill()
			err := f.st.edges[0].proc.Start()
			f.finish()
			return err
		}},
		{Name: "postgres-stop", stopsPostgres: true, What: "Postgres stopped (fast shutdown) from 3 s to 7 s", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.st.pg.stop()
			if err := f.at(ctx, 7*time.Second); err != nil {
				return err
			}
			err := f.st.pg.start(ctx)
			f.finish()
			return err
		}},
		{Name: "redis-kill9-empty", What: "Redis killed -9 at 3 s and started again at once, empty (no persistence, as make run starts it)",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 3*time.Second); err != nil {
					return err
				}
				f.begin()
				f.lose()
				f.st.redis.Kill()
				err := f.st.redis.Start(ctx)
				f.finish()
				return err
			}},
		{Name: "redis-flushall", Short: true, What: "FLUSHALL on Redis at 3 s", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.lose()
			err := flushAll(ctx, f.st.redis)
			f.finish()
			return err
		}},
		{Name: "redis-restart-old-snapshot", Short: true,
			What:  "Redis saves a snapshot (SAVE) at 1.5 s, is killed -9 at 3 s and restarted at once from that older file: the writes since are lost",
			fault: redisOldSnapshot},
		{Name: "origin-start-redis-down",
			What: "origin stopped at 3 s, Redis killed, the origin started while Redis is down, Redis back (empty) at 7 s: the origin must wait, not exit, and be ready within " +
				originReadyWithin.String() + " of Redis's return",
			fault: originStartDown("Redis",
				func(ctx context.Context, f *faultEnv) error { f.lose(); f.st.redis.Kill(); return nil },
				func(ctx context.Context, f *faultEnv) error { return f.st.redis.Start(ctx) })},
		{Name: "origin-start-postgres-down", stopsPostgres: true,
			What: "origin stopped at 3 s, Postgres stopped, the origin started while Postgres is down, Postgres back at 7 s: the origin must wait, not exit, and be ready within " +
				originReadyWithin.String() + " of Postgres's return",
			fault: originStartDown("Postgres",
				func(ctx context.Context, f *faultEnv) error { f.st.pg.stop(); return nil },
				func(ctx context.Context, f *faultEnv) error { return f.st.pg.start(ctx) })},
		{Name: "postgres-then-redis", stopsPostgres: true, What: "Postgres stopped at 2 s, FLUSHALL on Redis at 4.5 s, Postgres back at 6 s: the 201s answered meanwhile exist only in Redis",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 2*time.Second); err != nil {
					return err
				}
				f.begin()
				f.st.pg.stop()
				if err := f.at(ctx, 4500*time.Millisecond); err != nil {
					return err
				}
				f.lose()
				if err := flushAll(ctx, f.st.redis); err != nil {
					return err
				}
				if err := f.at(ctx, 6*time.Second); err != nil {
					return err
				}
				err := f.st.pg.start(ctx)
				f.finish()
				return err
			}},
		{Name: "sentinel-failover", topo: sentinelRedis,
			What: "Redis primary (one replica, three Sentinels) killed -9 at 3 s; the fault ends when the Sentinels have promoted the replica",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 3*time.Second); err != nil {
					return err
				}
				old, err := f.st.sentinel.Primary(ctx)
				if err != nil {
					return err
				}
				f.begin()
				f.lose()
				old.Kill()
				_, err = f.st.sentinel.WaitPromotion(ctx, old, 30*time.Second)
				f.finish()
				if err != nil {
					return fmt.Errorf("the sentinels did not promote the replica: %w", err)
				}
				f.note("the replica was promoted %.1f s after the kill", f.end.Sub(f.start).Seconds())
				return nil
			}},
		{Name: "redis-lagging-replica-promoted", topo: replicatedRedis,
			What: "Redis's replica, its replication link cut at 2 s while the primary takes writes, promoted by hand (REPLICAOF NO ONE) when the primary is killed -9 at 3 s; " +
				"origin and edges are pointed at it",
			fault: promoteLaggingReplica},
		{Name: "redis-slow-50-200ms", What: "every Redis round trip of origin and edge delayed 50–200 ms (25–100 ms each way) from 2 s to 8 s",
			fault: slowRedis(delayproxy.Delay{Min: 25 * time.Millisecond, Max: 100 * time.Millisecond}, 6*time.Second)},
		{Name: "redis-slow-0.5-1.5s", What: "every Redis round trip of origin and edge delayed 0.5–1.5 s (0.25–0.75 s each way) from 2 s to 7 s",
			fault: slowRedis(delayproxy.Delay{Min: 250 * time.Millisecond, Max: 750 * time.Millisecond}, 5*time.Second)},
		{Name: "gateway-frozen", Payments: true, What: "payment gateway frozen (SIGSTOP: connections open, no answers) from 3 s to 8 s", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.st.gateway.Freeze()
			err := f.at(ctx, 8*time.Second)
			f.st.gateway.Thaw()
			f.finish()
			return err
		}},
		{Name: "gateway-killed", Payments: true, What: "payment gateway killed -9 at 3 s, back at 6 s (the sandbox forgets its intents: those listed just before the kill are kept for the checks)",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 3*time.Second); err != nil {
					return err
				}
				f.begin()
				if err := f.t.keepGatewayIntents(ctx); err != nil {
					f.note("could not list the gateway's intents before the kill: %v", err)
				}
				f.st.gateway.Kill()
				if err := f.at(ctx, 6*time.Second); err != nil {
					return err
				}
				err := f.st.gateway.Start()
				f.finish()
				return err
			}},
		{Name: "webhooks-lost", Payments: true, Short: true, What: "the gateway's webhooks switched off from 2 s to 8 s (events recorded, never sent): the reconciler must settle the payments, found through the provider's own listing API",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 2*time.Second); err != nil {
					return err
				}
				f.begin()
				if err := setWebhooks(ctx, f.st, false); err != nil {
					return err
				}
				if err := f.at(ctx, 8*time.Second); err != nil {
					return err
				}
				err := setWebhooks(ctx, f.st, true)
				f.finish()
				return err
			}},
	}
}

func killOrigin(fresh bool) func(context.Context, *faultEnv) error {
	return func(ctx context.Context, f *faultEnv) error {
		if err := f.at(ctx, 3*time.Second); err != nil {
			return err
		}
		f.begin()
		f.st.origin.Kill()
		err := f.st.restartOrigin(fresh)
		f.finish()
		return err
	}
}

// redisOldSnapshot: Redis saves a snapshot, takes more writes, is killed
// and restarts from the snapshot, as a crash would leave a server that
// snapshots now and then.
func redisOldSnapshot(ctx context.Context, f *faultEnv) error {
	if err := f.at(ctx, 1500*time.Millisecond); err != nil {
		return err
	}
	c := f.st.redis.Client()
	defer c.Close()
	// A key of the harness's own, outside the binaries' prefix, tells that
	// the restart loaded the snapshot.
	if err := c.Set(ctx, snapshotMark, "1", 0).Err(); err != nil {
		return fmt.Errorf("SET %s: %w", snapshotMark, err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("SAVE: %w", err)
	}
	saved := time.Now()
	keysSaved, _ := c.DBSize(ctx).Result()
	if err := f.at(ctx, 3*time.Second); err != nil {
		return err
	}
	keysKilled, _ := c.DBSize(ctx).Result()
	f.begin()
	f.lose()
	f.st.redis.Kill()
	err := f.st.redis.Start(ctx)
	f.finish()
	if err != nil {
		return err
	}
	after := f.st.redis.Client()
	defer after.Close()
	if n, err := after.Exists(ctx, snapshotMark).Result(); err != nil || n != 1 {
		return fmt.Errorf("Redis did not restart from its snapshot: EXISTS %s = %d, %v", snapshotMark, n, err)
	}
	f.note("Redis restarted from a snapshot taken %.1f s before the kill: %d keys in it, %d at the kill",
		f.start.Sub(saved).Seconds(), keysSaved, keysKilled)
	return nil
}

// snapshotMark is the key redisOldSnapshot saves with the snapshot.
const snapshotMark = "harness:snapshot"

// promoteLaggingReplica cuts the replica's link, lets the primary take
// writes for a second, kills the primary and promotes the replica by hand:
// what an operator (or a failover without Sentinel's checks) does with a
// replica that lagged.
func promoteLaggingReplica(ctx context.Context, f *faultEnv) error {
	if err := f.at(ctx, 2*time.Second); err != nil {
		return err
	}
	_ = f.st.replLink.Close()
	cut := time.Now()
	if err := f.at(ctx, 3*time.Second); err != nil {
		return err
	}
	behind := "unknown"
	if p, err := replOffset(ctx, f.st.redis, "master_repl_offset"); err == nil {
		if r, err := replOffset(ctx, f.st.replica, "slave_repl_offset"); err == nil {
			behind = strconv.FormatInt(p-r, 10)
		}
	}
	f.begin()
	f.lose()
	f.st.redis.Kill()
	c := f.st.replica.Client()
	defer c.Close()
	if err := c.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("REPLICAOF NO ONE on the replica: %w", err)
	}
	f.st.retargetRedis(f.st.replica.Addr)
	f.finish()
	f.note("the replica's link was cut %.1f s before the primary's kill, %s bytes of replication stream behind it; promoted and pointed at %.2f s after the kill",
		f.start.Sub(cut).Seconds(), behind, f.end.Sub(f.start).Seconds())
	return nil
}

// replOffset reads one offset of INFO replication.
func replOffset(ctx context.Context, s *redisserver.Server, field string) (int64, error) {
	c := s.Client()
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO replication of %s has no %s", s.Name, field)
}

// originReadyWithin is how soon after its dependency's return an origin
// started without it must be ready.
const originReadyWithin = 10 * time.Second

// originStartDown stops the origin, takes dep away (down), starts the
// origin while dep is away, brings dep back (up) at 7 s, and checks that
// the origin never exited and answered /readyz 200 within
// originReadyWithin of dep's return. An origin that exited is started again
// once dep is back, so the rest of the scenario runs.
func originStartDown(dep string, down, up func(context.Context, *faultEnv) error) func(context.Context, *faultEnv) error {
	return func(ctx context.Context, f *faultEnv) error {
		if err := f.at(ctx, 3*time.Second); err != nil {
			return err
		}
		f.begin()
		o := f.st.origin
		o.Stop(syscall.SIGTERM, 5*time.Second)
		if err := down(ctx, f); err != nil {
			return err
		}
		if err := o.Start(); err != nil {
			return err
		}
		started, exited := time.Now(), o.Exited()
		var exitedAt time.Time
		readyWhileDown := false
		// watch polls /readyz until it answers 200 (its moment), the
		// origin exits, or until passes.
		watch := func(until time.Time) (readyAt time.Time, last string) {
			for {
				select {
				case <-exited:
					exitedAt = time.Now()
					return time.Time{}, last
				default:
				}
				status, desc := originReady(ctx, f.st)
				last = desc
				if status == 200 {
					return time.Now(), last
				}
				if !time.Now().Before(until) || !sleepFor(ctx, 100*time.Millisecond) {
					return time.Time{}, last
				}
			}
		}
		// While dep is away the origin must stay up (and should not say it
		// is ready).
		back := f.t.zero.Add(7 * time.Second)
		for time.Now().Before(back) && exitedAt.IsZero() && ctx.Err() == nil {
			if at, _ := watch(back); !at.IsZero() {
				readyWhileDown = true
				sleepFor(ctx, 100*time.Millisecond)
			}
		}
		if err := f.at(ctx, 7*time.Second); err != nil {
			return err
		}
		if err := up(ctx, f); err != nil {
			return fmt.Errorf("bring %s back: %w", dep, err)
		}
		back = time.Now()
		var readyAt time.Time
		last := "none"
		if exitedAt.IsZero() {
			readyAt, last = watch(back.Add(originReadyWithin))
		}
		switch {
		case !exitedAt.IsZero():
			f.fail("the origin, started with %s down, exited %.1f s after it started (%s): it must wait for %s",
				dep, exitedAt.Sub(started).Seconds(), lastLine(o.Tail(5)), dep)
			// Started again at once, so the rest of the scenario plays on.
			if err := o.Start(); err != nil {
				return err
			}
			if err := waitHTTP(ctx, o, "http://"+f.st.originAdmin+"/healthz", 30*time.Second); err != nil {
				return err
			}
			f.note("the harness started the origin again once %s was back: it answered /healthz %.1f s after", dep, time.Since(back).Seconds())
		case readyAt.IsZero():
			f.fail("the origin, started with %s down, did not answer /readyz 200 within %v of %s's return (last answer: %s)",
				dep, originReadyWithin, dep, last)
		default:
			f.note("the origin, started with %s down %.1f s before its return, answered /readyz 200 %.1f s after %s came back",
				dep, back.Sub(started).Seconds(), readyAt.Sub(back).Seconds(), dep)
		}
		if readyWhileDown {
			f.note("the origin answered /readyz 200 while %s was down", dep)
		}
		f.finish()
		if exitedAt.IsZero() && !o.Running() {
			f.fail("the origin, started with %s down, exited after it was ready (%s)", dep, lastLine(o.Tail(5)))
		}
		return nil
	}
}

// originReady asks the origin's admin /readyz; it returns the status (0:
// no answer) and a short description of the answer.
func originReady(ctx context.Context, st *stack) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	status, body, err := admin(ctx, "GET", "http://"+st.originAdmin+"/readyz", nil)
	if err != nil {
		return 0, "no answer: " + err.Error()
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return status, fmt.Sprintf("%d %s", status, e.Error)
	}
	return status, strconv.Itoa(status)
}

// lastLine is the last non-empty line of a log tail, cut to 300 bytes.
func lastLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

func slowRedis(each delayproxy.Delay, d time.Duration) func(context.Context, *faultEnv) error {
	return func(ctx context.Context, f *faultEnv) error {
		if err := f.at(ctx, 2*time.Second); err != nil {
			return err
		}
		f.begin()
		f.st.proxy.SetDelay(each, each)
		err := f.at(ctx, 2*time.Second+d)
		f.st.proxy.SetDelay(delayproxy.Delay{}, delayproxy.Delay{})
		f.finish()
		return err
	}
}

func setWebhooks(ctx context.Context, st *stack, on bool) error {
	status, body, err := gatewayControl(ctx, "PUT", "http://"+st.gatewayAddr+"/sandbox/webhooks", map[string]bool{"enabled": on})
	if err != nil || status != 200 {
		return fmt.Errorf("switch webhooks %v: %d %s %v", on, status, body, err)
	}
	return nil
}

// gatewayIntent is an intent as the sandbox gateway lists it.
type gatewayIntent struct {
	ID          string            `json:"intent_id"`
	Status      string            `json:"status"`
	AmountMinor int64             `json:"amount_minor"`
	Metadata    map[string]string `json:"metadata"`
	Refunds     []struct {
		AmountMinor int64  `json:"amount_minor"`
		Status      string `json:"status"`
	} `json:"refunds"`
}

// charged: the gateway took the money and has not given it all back.
func (in gatewayIntent) charged() bool {
	if in.Status != "succeeded" {
		return false
	}
	var refunded int64
	for _, r := range in.Refunds {
		if r.Status == "succeeded" {
			refunded += r.AmountMinor
		}
	}
	return refunded < in.AmountMinor
}

func listGatewayIntents(ctx context.Context, st *stack) ([]gatewayIntent, error) {
	status, body, err := gatewayControl(ctx, "GET", "http://"+st.gatewayAddr+"/sandbox/intents", nil)
	if err != nil || status != 200 {
		return nil, fmt.Errorf("list intents: %d %v", status, err)
	}
	var out struct {
		Intents []gatewayIntent `json:"intents"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("list intents: %w", err)
	}
	// The control listing is the sandbox's core form whatever provider it
	// plays: an intent without its id, status or amount is another form,
	// which the checks would misread.
	for _, in := range out.Intents {
		if in.ID == "" || in.Status == "" || in.AmountMinor <= 0 {
			return nil, fmt.Errorf("list intents: an intent not in the sandbox's core form (intent_id, status, amount_minor): %+v", in)
		}
	}
	return out.Intents, nil
}

// keepGatewayIntents remembers the gateway's intents before it is killed
// (the sandbox keeps them in memory only).
func (t *traffic) keepGatewayIntents(ctx context.Context) error {
	list, err := listGatewayIntents(ctx, t.st)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keptIntents == nil {
		t.keptIntents = map[string]gatewayIntent{}
	}
	for _, in := range list {
		t.keptIntents[in.ID] = in
	}
	return nil
}
