package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/bench/internal/delayproxy"
)

// Scenario is one fault played against a running sale.
type Scenario struct {
	Name  string
	Short bool   // cheap enough for make test
	What  string // one line for the report
	topo  topology
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

// Scenarios is every scenario, in the order make chaos plays them.
func Scenarios() []Scenario {
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
		{Name: "edge-kill9", What: "edge killed -9 at 3 s and started again at once", fault: func(ctx context.Context, f *faultEnv) error {
			if err := f.at(ctx, 3*time.Second); err != nil {
				return err
			}
			f.begin()
			f.st.edge.Kill()
			err := f.st.edge.Start()
			f.finish()
			return err
		}},
		{Name: "postgres-stop", What: "Postgres stopped (fast shutdown) from 3 s to 7 s", fault: func(ctx context.Context, f *faultEnv) error {
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
			err := flushAll(ctx, f.st.redis)
			f.finish()
			return err
		}},
		{Name: "postgres-then-redis", What: "Postgres stopped at 2 s, FLUSHALL on Redis at 4.5 s, Postgres back at 6 s: the 201s answered meanwhile exist only in Redis",
			fault: func(ctx context.Context, f *faultEnv) error {
				if err := f.at(ctx, 2*time.Second); err != nil {
					return err
				}
				f.begin()
				f.st.pg.stop()
				if err := f.at(ctx, 4500*time.Millisecond); err != nil {
					return err
				}
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
				old.Kill()
				_, err = f.st.sentinel.WaitPromotion(ctx, old, 30*time.Second)
				f.finish()
				if err != nil {
					return fmt.Errorf("the sentinels did not promote the replica: %w", err)
				}
				f.note("the replica was promoted %.1f s after the kill", f.end.Sub(f.start).Seconds())
				return nil
			}},
		{Name: "redis-slow-50-200ms", What: "every Redis round trip of origin and edge delayed 50–200 ms (25–100 ms each way) from 2 s to 8 s",
			fault: slowRedis(delayproxy.Delay{Min: 25 * time.Millisecond, Max: 100 * time.Millisecond}, 6*time.Second)},
		{Name: "redis-slow-0.5-1.5s", What: "every Redis round trip of origin and edge delayed 0.5–1.5 s (0.25–0.75 s each way) from 2 s to 7 s",
			fault: slowRedis(delayproxy.Delay{Min: 250 * time.Millisecond, Max: 750 * time.Millisecond}, 5*time.Second)},
		{Name: "gateway-frozen", What: "payment gateway frozen (SIGSTOP: connections open, no answers) from 3 s to 8 s", fault: func(ctx context.Context, f *faultEnv) error {
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
		{Name: "gateway-killed", What: "payment gateway killed -9 at 3 s, back at 6 s (the sandbox forgets its intents: those listed just before the kill are kept for the checks)",
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
		{Name: "webhooks-lost", What: "the gateway's webhooks switched off from 2 s to 8 s (events recorded, never sent): the reconciler must settle the payments",
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
		return nil, err
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
