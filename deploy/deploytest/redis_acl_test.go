package deploytest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// edgeGoCommands are the commands the edge sends outside its scripts: the line's state (GET of the
// counters and seed, HMGET of the cursor: edge/internal/line/lines.go), a shopper's place (HGET:
// queue/queue.go), the admission loop's PING when no sale is open (admission/cursor.go), and its scripts
// (EVALSHA, then EVAL on NOSCRIPT). The commands inside the scripts are read from the scripts themselves.
var edgeGoCommands = []string{"GET", "HGET", "HMGET", "PING", "EVALSHA", "EVAL"}

// edgeConnCommands are what go-redis sends on each new connection as the edge uses it (HELLO with AUTH,
// CLIENT SETNAME and SETINFO where the server has them, SELECT of a db other than 0).
var edgeConnCommands = [][]string{{"HELLO", "3"}, {"AUTH", "edge", "x"}, {"CLIENT", "SETNAME", "edge"}, {"SELECT", "1"}}

// edgeCommandArgs are the arguments the test gives each command an edge sends, K standing for a key; a
// command the edge sends that is not here fails the test, which then needs it added here (and, where the
// user lacks it, to deploy/k8s/base/redis-edge.acl).
var edgeCommandArgs = map[string][]string{
	"GET":     {"K"},
	"SET":     {"K", "1"},
	"INCRBY":  {"K", "1"},
	"HGET":    {"K", "f"},
	"HMGET":   {"K", "f", "g"},
	"HSET":    {"K", "f", "1"},
	"HSETNX":  {"K", "f", "1"},
	"HGETALL": {"K"},
	"HDEL":    {"K", "f"},
	"RPUSH":   {"K", "1"},
	"LTRIM":   {"K", "0", "9"},
	"EVAL":    {"return 1", "1", "K"},
	"EVALSHA": {"e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "K"},
	"TIME":    {},
	"INFO":    {"replication"},
	"PING":    {},
}

// scriptCallRE finds the command of each redis.call or redis.pcall in a Lua script, spelled as a string
// literal — redis.call('HSET', ...) or pcall(redis.call, 'INFO', ...).
var (
	scriptCallRE = regexp.MustCompile(`redis\.p?call\s*[(,]\s*['"]([A-Za-z]+)['"]`)
	anyCallRE    = regexp.MustCompile(`redis\.p?call\b`)
)

// edgeScriptCommands are the commands the edge's Lua scripts (edge/**/*.lua) call, upper-cased, by the
// scripts calling each. A call whose command is not a string literal fails the test: the user's rules could
// not be checked against it.
func edgeScriptCommands(t *testing.T) map[string][]string {
	t.Helper()
	cmds := map[string][]string{}
	err := filepath.WalkDir("../../edge", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".lua" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		found := scriptCallRE.FindAllStringSubmatch(src, -1)
		if n := len(anyCallRE.FindAllString(src, -1)); n != len(found) {
			t.Errorf("%s: %d Redis calls, %d of them naming their command as a string literal: name each so that the edges' ACL can be checked", path, n, len(found))
		}
		for _, m := range found {
			c := strings.ToUpper(m[1])
			if !slices.Contains(cmds[c], path) {
				cmds[c] = append(cmds[c], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("found no Redis calls in the edge's Lua scripts (edge/**/*.lua)")
	}
	return cmds
}

// checkEdgeUser holds the edges' Redis user, as redis-init.sh made it on the server at addr (admin is its
// default user), against what an edge does and what it must not: every command the edge sends, in Go and
// inside its scripts, is allowed on the line's keys (<prefix>{q:<sale>}:*, edge/internal/line/keys.go) and
// refused on the origins' (<prefix>{s:<sale>}:*, origin/internal/checkout/keys.go); real calls as the user
// reach the line and are refused (NOPERM) the stock, the holds, the intents and the server's administration.
func checkEdgeUser(t *testing.T, admin *redis.Client, addr, prefix, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	line := prefix + "{q:sale-1}:"
	sale := prefix + "{s:sale-1}:"

	// ACL DRYRUN: what the user may run, without running it.
	dryrun := func(args []string) error {
		cmd := []any{"ACL", "DRYRUN", "edge"}
		for _, a := range args {
			cmd = append(cmd, a)
		}
		// It answers OK, or the refusal as a simple string, not as an error.
		res, err := admin.Do(ctx, cmd...).Text()
		if err == nil && res != "OK" {
			err = errors.New(res)
		}
		return err
	}
	withKey := func(cmd, key string) ([]string, bool) {
		args, ok := edgeCommandArgs[cmd]
		if !ok {
			return nil, false
		}
		out := []string{cmd}
		for _, a := range args {
			if a == "K" {
				a = key
			}
			out = append(out, a)
		}
		return out, true
	}
	sent := map[string][]string{}
	for _, c := range edgeGoCommands {
		sent[c] = append(sent[c], "the edge's Go code")
	}
	for c, scripts := range edgeScriptCommands(t) {
		sent[c] = append(sent[c], scripts...)
	}
	for _, c := range sortedKeys(sent) {
		args, ok := withKey(c, line+"cursor")
		if !ok {
			t.Errorf("%s sends %s, which this test has no arguments for: add it to edgeCommandArgs (and to redis-edge.acl)", strings.Join(sent[c], ", "), c)
			continue
		}
		if err := dryrun(args); err != nil {
			t.Errorf("the edges' user may not run %v (sent by %s): %v", args, strings.Join(sent[c], ", "), err)
		}
		if slices.Contains(edgeCommandArgs[c], "K") {
			args, _ := withKey(c, sale+"inv:sku-1")
			if err := dryrun(args); err == nil {
				t.Errorf("the edges' user may run %v on the origins' stock", args)
			}
		}
	}
	for _, args := range edgeConnCommands {
		if err := dryrun(args); err != nil {
			t.Errorf("the edges' user may not run %v on its connection: %v", args, err)
		}
	}

	// Real calls, as the edges' user.
	edge := redis.NewClient(&redis.Options{Addr: addr, Username: "edge", Password: password, MaxRetries: -1})
	defer edge.Close()
	if err := admin.HSet(ctx, sale+"inv:sku-1", "available", 5).Err(); err != nil {
		t.Fatalf("as the default user: HSET the stock: %v", err)
	}
	for _, cmd := range [][]any{
		{"PING"},
		{"HSET", line + "cursor", "rate", "10"},
		{"HMGET", line + "cursor", "now_serving", "rate"},
		{"INCRBY", line + "post", "1"},
		{"EVAL", "redis.call('HSET', KEYS[1], 'rate', ARGV[1]); return redis.call('TIME')", "1", line + "cursor", "20"},
		{"EVAL", "return redis.call('INFO', 'replication')", "0"},
	} {
		if err := edge.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("as the edges' user: %v = %v, want it done", cmd, err)
		}
	}
	for _, cmd := range [][]any{
		{"HGET", sale + "inv:sku-1", "available"},
		{"HSET", sale + "inv:sku-1", "available", "1000"},
		{"HSET", sale + "res:r-1", "status", "paid"},
		{"HGETALL", sale + "acct:a-1"},
		{"ZADD", sale + "holds", "0", "r-1"},
		{"XADD", sale + "intents", "*", "kind", "paid"},
		{"DEL", sale + "meta"},
		{"SET", prefix + "anything", "1"},
		// A script is checked call by call: keys it was not given, and keys it was given, alike.
		{"EVAL", "return redis.call('HINCRBY', KEYS[1], 'available', 1)", "1", sale + "inv:sku-1"},
		{"EVAL", "return redis.call('HSET', ARGV[1], 'available', 1000)", "1", line + "cursor", sale + "inv:sku-1"},
		{"FLUSHALL"}, {"FLUSHDB"}, {"KEYS", "*"}, {"SCAN", "0"}, {"RANDOMKEY"},
		{"CONFIG", "GET", "requirepass"}, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"},
		{"ACL", "LIST"}, {"SCRIPT", "FLUSH"}, {"FUNCTION", "FLUSH"}, {"REPLICAOF", "NO", "ONE"},
		{"CLIENT", "LIST"}, {"CLIENT", "KILL", "USER", "default"},
		{"PUBLISH", "__sentinel__:hello", "x"}, {"MIGRATE", "127.0.0.1", "1", sale + "meta", "0", "1"},
	} {
		if err := edge.Do(ctx, cmd...).Err(); !refused(err) {
			t.Errorf("as the edges' user: %v = %v, want NOPERM", cmd, err)
		}
	}
	for _, args := range [][]string{{"SHUTDOWN"}, {"MONITOR"}, {"DEBUG", "SLEEP", "0"}} {
		if err := dryrun(args); err == nil {
			t.Errorf("the edges' user may run %v", args)
		}
	}
	if got, err := admin.HGet(ctx, sale+"inv:sku-1", "available").Result(); err != nil || got != "5" {
		t.Errorf("the stock after the edges' user's attempts = %q (%v), want 5", got, err)
	}
}

// refused reports whether err is Redis refusing the user: NOPERM, or for a call inside a script the error
// naming it (Redis 7.0: "The user executing the script can't access at least one of the keys").
func refused(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "NOPERM") || strings.Contains(s, "user executing the script can't") || strings.Contains(s, "no permissions")
}
