package autotune

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/linekeys"
)

// RedisLine reads a sale's line where the edges keep it: the cursor and
// its held_ms, and the join counters (internal/linekeys). Only reads: the
// line is the edges' to change.
type RedisLine struct {
	Client redis.UniversalClient
	Prefix string // FLASHGATE_REDIS_PREFIX, the edges' too
}

// Read implements BackEnd's Line. A line not in Redis (not started yet,
// or lost and being rebuilt) is not Present.
func (l RedisLine) Read(ctx context.Context, sale string) (Line, error) {
	// The keys share the sale's hash tag: one pipeline, one node.
	var cursor *redis.SliceCmd
	var pre, post *redis.StringCmd
	_, err := l.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		cursor = p.HMGet(ctx, linekeys.Cursor(l.Prefix, sale), linekeys.CursorNowServing, linekeys.CursorHeldMs)
		pre = p.Get(ctx, linekeys.Pre(l.Prefix, sale))
		post = p.Get(ctx, linekeys.Post(l.Prefix, sale))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Line{}, err
	}
	if err := cursor.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return Line{}, err
	}
	v := cursor.Val()
	if v[0] == nil {
		return Line{}, nil // no cursor: no line
	}
	out := Line{Present: true}
	out.NowServing = number(v[0])
	out.HeldMs = number(v[1])
	p, _ := pre.Int64()
	q, _ := post.Int64()
	out.Length = p + q
	return out, nil
}

// number is a hash field's integer value, 0 when absent.
func number(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
