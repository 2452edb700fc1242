package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// account is shopper i of a group: "user-" and nine digits, the group's
// digit first, so every shopper of every group is a distinct account and
// every id is 14 characters, as a realistic shop account id is.
func account(group, i int) string { return fmt.Sprintf("user-%d%08d", group, i) }

// Shopper groups: each path has accounts of its own.
const (
	groupLine    = 1 // the memory phase's line
	groupPoll    = 2 // the status-poll line
	groupJoin    = 3
	groupSoldOut = 4
	groupProxied = 5
	groupOrigin  = 6
)

// filler joins shoppers to a sale's line through the edge's real Joiner
// (batched script calls), on a Redis client of its own so that the node's
// heap holds none of it. The node keeps raising the line's durable ceilings
// as it fills (each tick, a block ahead at the recent join rate); a join
// that meets a ceiling first asks again shortly, as a shopper would.
type filler struct {
	rdb     *redis.Client
	joiner  *edgeinternals.Joiner
	workers int
}

func newFiller(rdb *redis.Client, keys edgeinternals.Keys, workers int) *filler {
	return &filler{rdb: rdb, joiner: edgeinternals.NewJoiner(rdb, keys, edgeinternals.JoinerOptions{}), workers: workers}
}

func (f *filler) close() { f.joiner.Close() }

// join joins shoppers from to to-1 of group to sale and calls place (when
// not nil) with each one's position, from many goroutines at once.
func (f *filler) join(ctx context.Context, sale string, startsAt time.Time, group, from, to int, place func(i int, pos int64)) (loadgen.Result, error) {
	res := loadgen.Run(ctx, loadgen.Options{Workers: f.workers, Calls: to - from, First: from}, func() loadgen.Func {
		return func(ctx context.Context, i int) (int, error) {
			p, _, err := f.joiner.Join(ctx, sale, startsAt, account(group, i))
			for errors.Is(err, edgeinternals.ErrWait) && ctx.Err() == nil {
				time.Sleep(2 * time.Millisecond)
				p, _, err = f.joiner.Join(ctx, sale, startsAt, account(group, i))
			}
			if err != nil {
				return 0, err
			}
			if place != nil {
				place(i, p.Position)
			}
			return 0, nil
		}
	})
	if res.Err != nil {
		return res, fmt.Errorf("join %s to sale %s: %d of %d failed, first: %w", account(group, from), sale, res.Errors, to-from, res.Err)
	}
	if res.Cut {
		return res, fmt.Errorf("join to sale %s: cut after %d of %d: %w", sale, res.Calls, to-from, ctx.Err())
	}
	return res, nil
}

// positions reads the places of the given shoppers of group from the
// sale's places hash, a thousand per HMGET, pipelined.
func positions(ctx context.Context, rdb *redis.Client, keys edgeinternals.Keys, sale string, group int, shoppers []int) ([]int64, error) {
	out := make([]int64, len(shoppers))
	const per = 1000
	pipe := rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for start := 0; start < len(shoppers); start += per {
		fields := make([]string, 0, per)
		for _, i := range shoppers[start:min(start+per, len(shoppers))] {
			fields = append(fields, account(group, i))
		}
		cmds = append(cmds, pipe.HMGet(ctx, keys.Places(sale), fields...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read places of sale %s: %w", sale, err)
	}
	for c, cmd := range cmds {
		for k, v := range cmd.Val() {
			s, _ := v.(string)
			p, err := strconv.ParseInt(s, 10, 64)
			if err != nil || p < 1 {
				return nil, fmt.Errorf("place of %s in sale %s is %q, want a position", account(group, shoppers[c*per+k]), sale, s)
			}
			out[c*per+k] = p
		}
	}
	return out, nil
}
