package reserveperf

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
	"github.com/flashgate/flashgate/internal/redisconn"
)

// Markers the probe reserve carries where redis-benchmark will put
// __rand_int__: each is as long as the substitution marker, so every key and
// argument keeps its length (and the idempotency key its length prefix).
const (
	markAccount = "PROBEACCOUNT"
	markToken   = "PROBETOKENID"
	markIdem    = "PROBEIDEMKEY"
)

// reserveCommand makes one reserve through a checkout.Reserver whose client
// records what it sends, and returns that command as an EVALSHA of sha with
// the account, token id, idempotency key and reservation id turned into
// __rand_int__ substitution markers. redis-benchmark then sends exactly what the
// Reserver sends, whatever keys and arguments reserve.lua takes today.
func reserveCommand(ctx context.Context, c Config, prefix, sha string) ([]string, error) {
	opts, err := redisconn.ParseURL(c.RedisURL)
	if err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	rec := &recorder{}
	rdb.AddHook(rec)
	sp := reservescript.New(rdb, prefix, retention)
	probe := reservescript.Request{
		Sale: scriptSale, SKU: sku, HoldTTL: holdTTL,
		Account: "a" + markAccount, TokenID: "j000000000" + markToken, IdempotencyKey: "k" + markIdem,
	}
	r := sp.Reserver(c.Reserver[0])
	res := r.Run(ctx, loadgen.Options{Workers: 1, Calls: 1}, []reservescript.Request{probe})
	r.Close()
	if res.Err != nil {
		return nil, fmt.Errorf("probe reserve: %w", res.Err)
	}
	if res.Labels[reservescript.Created] != 1 {
		return nil, fmt.Errorf("probe reserve: outcome %v, want created", res.Labels)
	}
	args := rec.last()
	if len(args) < 3 {
		return nil, fmt.Errorf("probe reserve: recorded %q, want an EVALSHA or EVAL", args)
	}
	// EVAL carries the source where EVALSHA carries its hash.
	args[0], args[1] = "EVALSHA", sha
	resID := regexp.MustCompile(`r_[0-9a-z]{16}_` + regexp.QuoteMeta(scriptSale))
	swap := strings.NewReplacer(markAccount, randInt, markToken, randInt, markIdem, randInt)
	for i := 2; i < len(args); i++ {
		args[i] = swap.Replace(resID.ReplaceAllLiteralString(args[i], "r_0000"+randInt+"_"+scriptSale))
	}
	return args, nil
}

// recorder is a go-redis hook that keeps the last script call it saw.
type recorder struct {
	mu   sync.Mutex
	args []string // guarded by mu
}

var _ redis.Hook = (*recorder)(nil)

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.keep([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.keep(cmds)
		return next(ctx, cmds)
	}
}

func (r *recorder) keep(cmds []redis.Cmder) {
	for _, cmd := range cmds {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			continue
		}
		args := make([]string, len(cmd.Args()))
		for i, a := range cmd.Args() {
			args[i] = fmt.Sprint(a)
		}
		r.mu.Lock()
		r.args = args
		r.mu.Unlock()
	}
}

func (r *recorder) last() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.args...)
}
