package autotune

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/linekeys"
	"github.com/flashgate/flashgate/internal/testenv"
)

// RedisLine reads the cursor, its held_ms and the join counters where the
// edges keep them; a line not in Redis is not Present.
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
		t.Fatalf("Read of a line not in Redis = %+v, %v; want none", got, err)
	}
	// As the edges' scripts leave it (package queue's restore and
	// join, package admission's advance).
	if err := rdb.HSet(ctx, linekeys.Cursor(env.Prefix, "s1"), linekeys.CursorNowServing, "1200", "rate", "100",
		linekeys.CursorHeldMs, "1765000000123").Err(); err != nil {
		t.Fatal(err)
	}
	for key, v := range map[string]string{linekeys.Pre(env.Prefix, "s1"): "300", linekeys.Post(env.Prefix, "s1"): "4000"} {
		if err := rdb.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	want := Line{Present: true, NowServing: 1200, Length: 4300, HeldMs: 1765000000123}
	if got, err := l.Read(ctx, "s1"); err != nil || got != want {
		t.Errorf("Read = %+v, %v; want %+v", got, err, want)
	}
}
