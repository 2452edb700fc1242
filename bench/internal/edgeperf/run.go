package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/inproc"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/edge/edgeinternals"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
)

// env is everything a run has started.
type env struct {
	c      Config
	rdb    *redis.Client // the benchmark's own: CPU samples, fills, checks
	origin *inproc.Origin

	keySpec, userSecret, edgePrefix string                // every node's
	issuer                          *tokens.Issuer        // queue and admission tokens, with the nodes' keys
	users                           *tokens.DevUserIssuer // user tokens, with the nodes' user secret
	endsAt                          time.Time             // every sale's end

	// The paths' node, bare server and load-generator clients.
	node                                 *inproc.Edge
	bare                                 *bare
	edgeClient, bareClient, originClient *loadgen.HTTPClient
}

// Run runs the benchmark and returns its report. Keys and schema are removed
// even when a part fails.
func Run(ctx context.Context, c Config) (rep Report, err error) {
	if err := c.Validate(); err != nil {
		return Report{}, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	defer func() {
		rep.Seconds = time.Since(began).Seconds()
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the run reached its %s cap: raise -timeout, or lower -n, -proxy-n and -mem-polls)", err, c.Timeout)
		}
	}()
	rep.Settings = Settings{Conns: c.Conns, Requests: c.Requests, ProxyRequests: c.ProxyRequests, Warmup: c.Warmup, Rounds: c.Rounds,
		Limits: c.Limits, PollLine: c.PollLine, PollAdmitted: c.PollAdmitted, OriginWorkers: c.OriginWorkers}

	r, err := testenv.OpenRedis(ctx, c.RedisURL, "edgebench", 0)
	if err != nil {
		return rep, err
	}
	defer func() {
		n, cerr := r.Remove(ctx)
		rep.Cleanup.RedisKeys = n
		err = errors.Join(err, cerr)
	}()
	rdb, prefix := r.Client, r.Prefix
	rep.Prefix = prefix
	if rep.Machine, err = benchreport.DescribeMachine(ctx, rdb, c.PostgresURL); err != nil {
		return rep, err
	}

	e := &env{c: c, rdb: rdb}
	stop, err := e.start(ctx, prefix)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, stop(stopCtx))
	}()
	if err != nil {
		return rep, err
	}
	if c.Paths[PathMemory] {
		// First, each part on a node of its own: what the node keeps per
		// shopper is what this part measures, and what the paths leave in
		// theirs would blur it.
		rep.Memory = &Memory{}
		if err := e.memory(ctx, rep.Memory); err != nil {
			return rep, fmt.Errorf("memory: %w", err)
		}
		// Let the memory node go before the paths' starts (see settleHeap).
		procstat.SettleHeap(ctx, rep.Memory.Baseline.InuseBytes+4<<20, 15*time.Second)
	}
	return rep, e.paths(ctx, &rep)
}

// start brings up the origin with every sale, in a Postgres schema of its
// own. stop undoes it.
func (e *env) start(ctx context.Context, prefix string) (stop func(context.Context) error, err error) {
	stop = func(context.Context) error { return nil }
	c := e.c
	if e.keySpec, err = tokens.GenerateKeySpec("bench"); err != nil {
		return stop, err
	}
	keys, err := tokens.ParseKeySet(e.keySpec)
	if err != nil {
		return stop, err
	}
	e.userSecret = testenv.RandomHex(32)
	e.edgePrefix = prefix + "edge:"
	e.issuer = tokens.NewIssuer(keys, tokens.IssuerOptions{AdmissionTTL: c.Timeout + 10*time.Minute})
	e.users = tokens.NewDevUserIssuer([]byte(e.userSecret), "", c.Timeout+time.Hour, nil)

	e.origin, err = inproc.StartOrigin(ctx, inproc.OriginConfig{
		RedisURL: c.RedisURL, PostgresURL: c.PostgresURL, RedisPrefix: prefix + "origin:",
		Schema: strings.TrimSuffix(prefix, ":"), // lowercase letters, digits and _
		Sales: []inproc.Sale{
			{Sale: saleOpen, SKU: sku, Stock: 2*c.Rounds*(c.Warmup+c.ProxyRequests) + slack},
			{Sale: saleSoldOut, SKU: sku, Stock: 0},
			{Sale: salePoll, SKU: sku, Stock: slack},
			{Sale: saleLine, SKU: sku, Stock: slack},
		},
		TokenKeys: e.keySpec, UserSecret: e.userSecret, Workers: c.OriginWorkers, Log: c.Log,
	})
	if err != nil {
		return stop, err
	}
	return e.origin.Stop, nil
}

// nodeConfig is the edge node's Config: production defaults (tick,
// refresh, timeouts, pools) on the run's Redis prefix, keys and origin,
// with the limits asked for.
func (e *env) nodeConfig() edgeinternals.Config {
	cfg := edgeinternals.DefaultConfig()
	cfg.Addr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RedisURL = e.c.RedisURL
	cfg.RedisPrefix = e.edgePrefix
	cfg.OriginURL = "http://" + e.origin.Addr
	cfg.LineAudience = inproc.LineAudience
	cfg.AdminToken = testenv.RandomHex(32) // 32 random bytes, as strong as the edge requires
	cfg.TokenKeys = e.keySpec
	cfg.UserTokenSecret = e.userSecret
	switch e.c.Limits {
	case LimitsProduction:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = unreachable, unreachable, unreachable
		cfg.LimitJoinSubnet, cfg.LimitPollSubnet = unreachable, unreachable // the load comes from one network too
	case LimitsHigh:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = unreachable, unreachable, unreachable
		cfg.LimitJoinSubnet, cfg.LimitPollSubnet = unreachable, unreachable // the load comes from one network too
		cfg.LimitJoinAccount, cfg.LimitPollAccount, cfg.LimitReserveAccount = unreachable, unreachable, unreachable
	case LimitsOff:
		cfg.LimitJoinIP, cfg.LimitPollIP, cfg.LimitReserveIP = "", "", ""
		cfg.LimitJoinSubnet, cfg.LimitPollSubnet = "", ""
		cfg.LimitJoinAccount, cfg.LimitPollAccount, cfg.LimitReserveAccount = "", "", ""
	}
	return cfg
}

// startNode starts a node and waits until it serves every sale.
func (e *env) startNode(ctx context.Context) (*inproc.Edge, error) {
	n, err := inproc.StartEdge(e.nodeConfig(), e.c.Log)
	if err != nil {
		return nil, err
	}
	if err := n.WaitSales(ctx, saleOpen, saleSoldOut, salePoll, saleLine); err != nil {
		return nil, errors.Join(err, n.Stop(context.WithoutCancel(ctx)))
	}
	if e.endsAt.IsZero() {
		open, _ := n.App.Snapshots.Get(saleOpen)
		e.endsAt = open.EndsAt
	}
	return n, nil
}

// paths measures the request paths on a node of their own, beside the bare
// handler, and stops both at the end.
func (e *env) paths(ctx context.Context, rep *Report) (err error) {
	c := e.c
	var todo []func(context.Context) (*Path, error)
	for _, p := range []struct {
		name string
		run  func(context.Context) (*Path, error)
	}{
		{PathStatus, e.status}, {PathJoin, e.join}, {PathSoldOut, e.soldOut}, {PathStatic, e.static}, {PathProxied, e.proxied},
	} {
		if c.Paths[p.name] {
			todo = append(todo, p.run)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	rep.PathsHeap = procstat.ReadHeap() // what a node before left is gone
	if e.node, err = e.startNode(ctx); err != nil {
		return err
	}
	rep.Settings.Tick, rep.Settings.Refresh = e.node.Config.Tick.String(), e.node.Config.SnapshotRefresh.String()
	if e.bare, err = startBare(e.node); err != nil {
		return errors.Join(err, e.node.Stop(context.WithoutCancel(ctx)))
	}
	e.edgeClient = loadgen.NewHTTP(loadgen.HTTPOptions{Addr: e.node.Addr, Conns: c.Conns})
	e.bareClient = loadgen.NewHTTP(loadgen.HTTPOptions{Addr: e.bare.addr, Conns: c.Conns})
	e.originClient = loadgen.NewHTTP(loadgen.HTTPOptions{Addr: e.origin.Addr, Conns: c.Conns})
	defer func() {
		e.edgeClient.Close()
		e.bareClient.Close()
		e.originClient.Close()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, e.bare.stop(stopCtx), e.node.Stop(stopCtx))
		e.node, e.bare = nil, nil
	}()
	for _, run := range todo {
		path, err := run(ctx)
		if path != nil {
			rep.Paths = append(rep.Paths, path)
		}
		if err != nil && path != nil {
			return fmt.Errorf("%s: %w", path.Name, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
