package commandlog_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/commandlog"
)

// The log holds each round trip once, a pipeline as one, without the new
// connection's handshake, and Take empties it.
func TestLogRecordsRoundTrips(t *testing.T) {
	t.Parallel()
	url := os.Getenv("FLASHGATE_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("FLASHGATE_TEST_REDIS_URL %q: %v", url, err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	key := "commandlog-test:" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer rdb.Del(context.Background(), key)

	log := commandlog.Attach(rdb)
	if err := rdb.Set(ctx, key, "1", time.Minute).Err(); err != nil {
		t.Fatalf("SET = %v (these tests need a real Redis at %s)", err, url)
	}
	pipe := rdb.Pipeline()
	pipe.Incr(ctx, key)
	pipe.Get(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"set"}, {"incr", "get"}}
	if got := log.Take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Take() = %v, want %v", got, want)
	}
	if got := log.Take(); len(got) != 0 {
		t.Errorf("Take() again = %v, want nothing", got)
	}
}
