package autotune

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/linekeys"
	"github.com/flashgate/flashgate/internal/testenv"
)

// RedisLine reads the cursor, its held_ms and the join counters where the
// edges keep them; a line not in Redis reads as zeros.
func TestRedisLine(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	opts, err := redis.ParseURL(env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l := RedisLine{Client: rdb, Prefix: env.Prefix}
	if got, err := l.Read(ctx, "s1"); err != nil || got != (Line{}) {
		t.Fatalf("Read of a line not in Redis = %+v, %v; want zeros", got, err)
	}
	// As the edges' scripts leave it (package queue's restore and
	// join, package admission's advance).
	rdb.HSet(ctx, linekeys.Cursor(env.Prefix, "s1"), linekeys.CursorNowServing, "1200", "rate", "100", linekeys.CursorHeldMs, "1765000000123")
	rdb.Set(ctx, linekeys.Pre(env.Prefix, "s1"), "300", 0)
	rdb.Set(ctx, linekeys.Post(env.Prefix, "s1"), "4000", 0)
	want := Line{NowServing: 1200, Length: 4300, HeldMs: 1765000000123}
	if got, err := l.Read(ctx, "s1"); err != nil || got != want {
		t.Errorf("Read = %+v, %v; want %+v", got, err, want)
	}
}
