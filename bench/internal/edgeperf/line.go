package edgeperf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// RedisLine is what a sale's line costs in Redis.
type RedisLine struct {
	// Keys is MEMORY USAGE (SAMPLES 0: every field) of each of the sale's
	// queue keys, by role: places, pre, post, seed, cursor.
	Keys map[string]int64 `json:"memory_usage_bytes"`
	// Total is the sum of Keys; PerShopper is Total over the shoppers in
	// line, PlacesPerShopper the places hash alone over them.
	Total            int64   `json:"memory_usage_total_bytes"`
	PerShopper       float64 `json:"bytes_per_shopper"`
	PlacesPerShopper float64 `json:"places_bytes_per_shopper"`
	// Encoding is OBJECT ENCODING of the places hash.
	Encoding string `json:"places_encoding"`
	// FieldBytes and ValueBytes are the mean lengths of an account id and
	// of a place as stored.
	FieldBytes float64 `json:"field_bytes"`
	ValueBytes float64 `json:"value_bytes"`
	// UsedMemoryDelta is the change of INFO used_memory (allocator sizes,
	// not C struct sizes) since the line was empty, over the shoppers
	// added: a cross-check of MEMORY USAGE, blurred by other clients.
	UsedMemoryPerShopper float64 `json:"used_memory_delta_per_shopper"`
	// Model is Redis 7's hash-table layout worked out for these lengths.
	Model HashModel `json:"model"`
}

// HashModel is what one entry of a hash-table-encoded hash costs in Redis
// 7.0, as MEMORY USAGE counts it: a dictEntry (key, value and next
// pointers), the field and the value as SDS strings rounded to the
// allocator's size class, and the entry's share of the bucket array (a
// pointer per slot, slots the next power of two).
type HashModel struct {
	DictEntry float64 `json:"dict_entry"`
	Field     float64 `json:"field_sds"`
	Value     float64 `json:"value_sds"`
	Buckets   float64 `json:"bucket_share"`
	Total     float64 `json:"total"`
}

// usedMemory is INFO used_memory.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis memory: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis memory: no used_memory in INFO")
}

// lineMemory measures the sale's queue keys with shoppers in line.
// usedBefore is used_memory when the line was empty.
func lineMemory(ctx context.Context, rdb *redis.Client, keys edgeinternals.Keys, sale string, shoppers int, fieldBytes, valueBytes float64, usedBefore int64) (RedisLine, error) {
	out := RedisLine{Keys: map[string]int64{}, FieldBytes: fieldBytes, ValueBytes: valueBytes}
	for role, key := range map[string]string{
		"places": keys.Places(sale), "pre": keys.Pre(sale), "post": keys.Post(sale),
		"seed": keys.Seed(sale), "cursor": keys.Cursor(sale),
	} {
		n, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err == redis.Nil {
			continue // pre is never set when nobody joined before the start
		}
		if err != nil {
			return out, fmt.Errorf("memory usage %s: %w", key, err)
		}
		out.Keys[role] = n
		out.Total += n
	}
	enc, err := rdb.ObjectEncoding(ctx, keys.Places(sale)).Result()
	if err != nil {
		return out, fmt.Errorf("object encoding: %w", err)
	}
	out.Encoding = enc
	used, err := usedMemory(ctx, rdb)
	if err != nil {
		return out, err
	}
	if shoppers > 0 {
		out.PerShopper = float64(out.Total) / float64(shoppers)
		out.PlacesPerShopper = float64(out.Keys["places"]) / float64(shoppers)
		out.UsedMemoryPerShopper = float64(used-usedBefore) / float64(shoppers)
	}
	out.Model = hashModel(shoppers, fieldBytes, valueBytes)
	return out, nil
}

// hashModel works out Redis 7.0's hash-table entry for a line of n
// shoppers whose fields and values have the given mean lengths, as MEMORY
// USAGE counts it: the dictEntry at its C size, each SDS at its allocation
// size. The SDS header is 1 byte below 32 characters (sdshdr5), 3 below 256
// (sdshdr8), plus the terminating NUL; the size classes are those of the
// jemalloc Redis bundles (8, 16, 24, 32, 40, 48, ...). A system jemalloc
// with 16-byte spacing (Debian's) allocates 32 B for the 24-byte dictEntry
// and 48 for a 40-byte SDS: INFO used_memory shows the difference.
func hashModel(n int, fieldBytes, valueBytes float64) HashModel {
	m := HashModel{DictEntry: 24, Field: sdsAlloc(fieldBytes), Value: sdsAlloc(valueBytes)}
	if n > 0 {
		slots := 4
		for slots < n {
			slots *= 2
		}
		m.Buckets = 8 * float64(slots) / float64(n)
	}
	m.Total = m.DictEntry + m.Field + m.Value + m.Buckets
	return m
}

func sdsAlloc(length float64) float64 {
	l := int(length + 0.5)
	size := l + 2 // sdshdr5 and NUL
	if l >= 32 {
		size = l + 4 // sdshdr8 and NUL
	}
	for _, class := range []int{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512} {
		if size <= class {
			return float64(class)
		}
	}
	return float64(size)
}
