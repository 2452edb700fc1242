package redisscript_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/commandlog"
	"github.com/flashgate/flashgate/internal/redisscript"
)

// env is a test's client to the test Redis, its own key prefix, and a log
// of the round trips the client makes.
type env struct {
	rdb    *redis.Client
	prefix string
	log    *commandlog.Log
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url := os.Getenv("FLASHGATE_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("FLASHGATE_TEST_REDIS_URL %q: %v", url, err)
	}
	e := &env{rdb: redis.NewClient(opts)}
	var b [6]byte
	_, _ = rand.Read(b[:])
	e.prefix = "redisscript-test:" + hex.EncodeToString(b[:]) + ":"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("these tests need a real Redis at %s (set FLASHGATE_TEST_REDIS_URL): %v", url, err)
	}
	e.log = commandlog.Attach(e.rdb)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for i := range maxItems {
			_ = e.rdb.Del(ctx, e.key(i)).Err()
		}
		_ = e.rdb.Close()
	})
	return e
}

// maxItems bounds the items of a test (each has a key of its own).
const maxItems = 50

func (e *env) key(i int) string { return fmt.Sprintf("%sk%d", e.prefix, i) }

// newScript returns a script no server has cached yet (its source carries
// a random comment), so its first EVALSHA meets NOSCRIPT: it counts calls
// on its key and answers {ARGV[1], count}, or an error for ARGV[1] "fail".
func newScript(t *testing.T) *redis.Script {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return redis.NewScript(`-- ` + hex.EncodeToString(b[:]) + `
if ARGV[1] == 'fail' then return redis.error_reply('BAD item refused') end
return {ARGV[1], redis.call('INCR', KEYS[1])}`)
}

// items returns n items, item i on key i with ARGV[1] names[i].
func (e *env) items(names []string) redisscript.Item {
	return func(i int) ([]string, []any) { return []string{e.key(i)}, []any{names[i]} }
}

// check asserts each command's reply: {names[i], count} for an item, an
// error for "fail".
func check(t *testing.T, what string, cmds []*redis.Cmd, names []string, count int64) {
	t.Helper()
	if len(cmds) != len(names) {
		t.Fatalf("%s: %d commands for %d items", what, len(cmds), len(names))
	}
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if names[i] == "fail" {
			if err == nil || !redis.HasErrorPrefix(err, "BAD") {
				t.Errorf("%s: item %d = %v, %v; want its own BAD error", what, i, v, err)
			}
			continue
		}
		if err != nil || len(v) != 2 || v[0] != names[i] || v[1] != count {
			t.Errorf("%s: item %d = %v, %v; want [%s %d]", what, i, v, err, names[i], count)
		}
	}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("item-%d", i)
	}
	return out
}

// Each answers every item in order from one pipeline while the script is
// cached; the first run of an uncached script, and every run after SCRIPT
// FLUSH, takes a second pipeline of EVAL and then answers the same.
//
// It does not run in parallel with the other tests here: they count the
// pipelines they send, and SCRIPT FLUSH would add one.
func TestEach(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	script := newScript(t)
	items := names(maxItems)
	evalsha := slices.Repeat([]string{"evalsha"}, len(items))
	eval := slices.Repeat([]string{"eval"}, len(items))

	check(t, "uncached", redisscript.Each(ctx, e.rdb, script, len(items), e.items(items)), items, 1)
	if got := e.log.Take(); !slices.EqualFunc(got, [][]string{evalsha, eval}, slices.Equal) {
		t.Errorf("uncached: pipelines sent %v, want one of EVALSHA, then one of EVAL", got)
	}

	check(t, "cached", redisscript.Each(ctx, e.rdb, script, len(items), e.items(items)), items, 2)
	if got := e.log.Take(); !slices.EqualFunc(got, [][]string{evalsha}, slices.Equal) {
		t.Errorf("cached: pipelines sent %v, want one of EVALSHA", got)
	}

	if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH = %v", err)
	}
	e.log.Take()
	check(t, "after SCRIPT FLUSH", redisscript.Each(ctx, e.rdb, script, len(items), e.items(items)), items, 3)
	if got := e.log.Take(); !slices.EqualFunc(got, [][]string{evalsha, eval}, slices.Equal) {
		t.Errorf("after SCRIPT FLUSH: pipelines sent %v, want one of EVALSHA, then one of EVAL", got)
	}
	if ok, err := e.rdb.ScriptExists(ctx, script.Hash()).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after the EVAL = %v, %v; want the script cached again", ok, err)
	}
}

// An item's own error stays its own: it is not run again, and the other
// items are answered.
func TestEachKeepsItemErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	script := newScript(t)
	items := []string{"a", "fail", "c", "fail", "e"}
	check(t, "uncached", redisscript.Each(ctx, e.rdb, script, len(items), e.items(items)), items, 1)
	got := e.log.Take()
	if len(got) != 2 || len(got[1]) != len(items) {
		t.Errorf("uncached: pipelines sent %v, want every item again with EVAL", got)
	}
	check(t, "cached", redisscript.Each(ctx, e.rdb, script, len(items), e.items(items)), items, 2)
	if got := e.log.Take(); len(got) != 1 {
		t.Errorf("cached: pipelines sent %v, want one: a script's error is not NOSCRIPT", got)
	}
}

// then's commands travel in each pipeline after the script's runs, so
// they see their writes; a connection error lands on every command.
func TestEachThen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	script := newScript(t)
	items := names(3)
	var after []*redis.StringCmd
	then := func(pipe redis.Pipeliner) { after = append(after, pipe.Get(ctx, e.key(2))) }
	check(t, "uncached", redisscript.EachThen(ctx, e.rdb, script, len(items), e.items(items), then), items, 1)
	if len(after) != 2 {
		t.Fatalf("then called %d times, want twice (EVALSHA and EVAL pipelines)", len(after))
	}
	if v, err := after[1].Result(); err != nil || v != "1" {
		t.Errorf("GET after the EVAL pipeline's runs = %q, %v; want 1", v, err)
	}
	want := [][]string{{"evalsha", "evalsha", "evalsha", "get"}, {"eval", "eval", "eval", "get"}}
	if got := e.log.Take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pipelines sent %v, want %v", got, want)
	}

	after = nil
	check(t, "cached", redisscript.EachThen(ctx, e.rdb, script, len(items), e.items(items), then), items, 2)
	if len(after) != 1 {
		t.Fatalf("then called %d times with the script cached, want once", len(after))
	}
	if v, err := after[0].Result(); err != nil || v != "2" {
		t.Errorf("GET after the runs = %q, %v; want 2", v, err)
	}
	e.log.Take()

	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	defer down.Close()
	for i, cmd := range redisscript.Each(ctx, down, script, len(items), e.items(items)) {
		if cmd.Err() == nil || redisscript.IsNoScript(cmd.Err()) {
			t.Errorf("item %d through an unreachable server = %v, want the connection error", i, cmd.Err())
		}
	}
	if cmds := redisscript.Each(ctx, e.rdb, script, 0, e.items(nil)); cmds != nil || len(e.log.Take()) != 0 {
		t.Errorf("Each of no items = %v, want nothing sent", cmds)
	}
}

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
