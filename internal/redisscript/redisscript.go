// Package redisscript runs one Lua script for many items in one pipeline,
// as redis.Script.Run does for one call: EVALSHA first, and EVAL, which
// loads the script, for the items the server answered NOSCRIPT (its script
// cache is empty after a restart or a failover).
package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Pipeliner is what Each needs of a client; redis.UniversalClient has it.
type Pipeliner interface {
	Pipeline() redis.Pipeliner
}

var _ Pipeliner = redis.UniversalClient(nil)

// Item gives the KEYS and ARGV of the script's run for item i. It may be
// called twice for one item (again for EVAL).
type Item func(i int) (keys []string, args []any)

// Each runs script once for each of n items, all in one pipeline, and
// returns their commands in item order. Errors are read per command: each
// carries its own reply or error, and a connection error lands on every
// one.
func Each(ctx context.Context, rdb Pipeliner, script *redis.Script, n int, item Item) []*redis.Cmd {
	return EachThen(ctx, rdb, script, n, item, nil)
}

// EachThen is Each with then, when not nil, called on each pipeline sent
// (one, or two when some items needed EVAL) after the script's runs are
// queued: commands it adds travel on the same connection after them, as
// WAIT must to cover their writes. The caller keeps the commands it adds.
func EachThen(ctx context.Context, rdb Pipeliner, script *redis.Script, n int, item Item, then func(pipe redis.Pipeliner)) []*redis.Cmd {
	if n == 0 {
		return nil
	}
	cmds := make([]*redis.Cmd, n)
	pipe := rdb.Pipeline()
	for i := range n {
		keys, args := item(i)
		cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
	}
	if then != nil {
		then(pipe)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	var again []int
	for i, cmd := range cmds {
		if IsNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	pipe = rdb.Pipeline()
	for _, i := range again {
		keys, args := item(i)
		cmds[i] = script.Eval(ctx, pipe, keys, args...)
	}
	if then != nil {
		then(pipe)
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// IsNoScript reports whether err is the server's NOSCRIPT: the script is
// not in its cache.
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
