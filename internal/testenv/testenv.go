// Package testenv gives each test or benchmark a corner of the shared Redis
// and Postgres on this machine: a Redis key prefix and a Postgres schema
// (reached through search_path) of its own, both removed at the end. It never
// flushes a database, so tests and benchmarks run beside each other on one
// Redis and one Postgres.
//
// Tests call New or NewRedis, which take the servers from
// FLASHGATE_TEST_REDIS_URL (default redis://127.0.0.1:6379/0) and
// FLASHGATE_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/flashgate_test?sslmode=disable), create
// that database when missing, and clean up in t.Cleanup; a missing server
// fails the test, never skips it. Benchmarks use the parts: Name,
// CreateSchema, DeleteKeys and LoopbackOnly.
//
// It declares the little of testing.TB it needs (TB), so the bench tools can
// import it without the testing package.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisconn"
)

// Defaults of the environment variables that point tests at the servers.
const (
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/flashgate_test?sslmode=disable"
)

// TB is what New and NewRedis need of a test: *testing.T, *testing.B and
// testing.TB satisfy it.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// RedisURL is the Redis server tests use: FLASHGATE_TEST_REDIS_URL, or
// DefaultRedisURL.
func RedisURL() string { return getenv("FLASHGATE_TEST_REDIS_URL", DefaultRedisURL) }

// PostgresURL is the Postgres database tests use:
// FLASHGATE_TEST_POSTGRES_URL, or DefaultPostgresURL.
func PostgresURL() string { return getenv("FLASHGATE_TEST_POSTGRES_URL", DefaultPostgresURL) }

// Redis is one test's share of a Redis server: its key prefix and a client
// for the test's own checks.
type Redis struct {
	URL    string
	Prefix string // for example "t3f9a0c2d1e:"
	Client *redis.Client
}

// NewRedis makes a fresh key prefix on the server at url and deletes every
// key under it in t.Cleanup. It fails t when Redis cannot be reached.
func NewRedis(t TB, url string) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := connect(ctx, url, "t"+RandomHex(5)+":", func(*redis.Options) {})
	if err != nil {
		t.Fatalf("these tests need a real Redis at %s (set FLASHGATE_TEST_REDIS_URL): %v", redisconn.Redact(url), err)
	}
	t.Cleanup(func() {
		if _, err := r.Remove(context.Background()); err != nil {
			t.Errorf("%v", err)
		}
	})
	return r
}

// OpenRedis connects a benchmark run to the Redis at url, with context
// deadlines honoured and poolSize connections (0: go-redis's default),
// checks that it answers, and makes a prefix from kind that no other run
// uses: Name(kind) and ":". Remove undoes it.
func OpenRedis(ctx context.Context, url, kind string, poolSize int) (*Redis, error) {
	return connect(ctx, url, Name(kind)+":", func(o *redis.Options) {
		o.ContextTimeoutEnabled = true
		if poolSize > 0 {
			o.PoolSize = poolSize
		}
	})
}

// connect makes a client of the Redis at url, its options set by tune, and
// checks that the server answers.
func connect(ctx context.Context, url, prefix string, tune func(*redis.Options)) (*Redis, error) {
	opts, err := redisconn.ParseURL(url) // its errors never show a password
	if err != nil {
		return nil, err
	}
	tune(opts)
	r := &Redis{URL: url, Prefix: prefix, Client: redis.NewClient(opts)}
	if err := r.Client.Ping(ctx).Err(); err != nil {
		_ = r.Client.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	return r, nil
}

// Remove deletes every key under the prefix, with a budget of its own (the
// caller's may be spent, or its run interrupted), closes the client, and
// reports how many keys it deleted.
func (r *Redis) Remove(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	n, err := DeleteKeys(ctx, r.Client, r.Prefix)
	_ = r.Client.Close()
	if err != nil {
		return n, fmt.Errorf("delete the Redis keys %s*: %w", r.Prefix, err)
	}
	return n, nil
}

// Env is one test's share of Redis and Postgres.
type Env struct {
	// RedisURL is the Redis server; keys of this test start with Prefix.
	RedisURL string
	// Prefix is this test's Redis key prefix, for example "t3f9a0c2d1e:".
	Prefix string
	// PostgresURL points at the test database with search_path set to
	// Schema, so everything a pool made from it creates lands in Schema.
	PostgresURL string
	// Schema is this test's Postgres schema.
	Schema string

	// Redis and DB are clients for the test's own checks; DB is scoped to Schema.
	Redis *redis.Client
	DB    *pgxpool.Pool
}

// New makes a fresh Redis prefix and Postgres schema for t and removes both
// (every key under the prefix, and the schema with everything in it) in
// t.Cleanup. It fails t when Redis or Postgres cannot be reached.
func New(t TB) *Env {
	t.Helper()
	r := NewRedis(t, RedisURL())
	e := &Env{RedisURL: r.URL, Prefix: r.Prefix, Redis: r.Client, Schema: schemaName(t.Name(), RandomHex(5))}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := PostgresURL()
	if err := EnsureDatabase(ctx, base); err != nil {
		t.Fatalf("these tests need a real Postgres at %s (set FLASHGATE_TEST_POSTGRES_URL): %v", redactURL(base), err)
	}
	schemaURL, drop, err := CreateSchema(ctx, base, e.Schema)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.PostgresURL = schemaURL
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Errorf("%v", err)
		}
	})
	if e.DB, err = pgxpool.New(ctx, e.PostgresURL); err != nil {
		t.Fatalf("connect to schema %s: %v", e.Schema, err)
	}
	t.Cleanup(e.DB.Close) // runs before the schema is dropped
	// The URL's search_path must reach the server as a run-time parameter;
	// without it every test would share the public schema.
	var current string
	if err := e.DB.QueryRow(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		t.Fatalf("read current schema: %v", err)
	}
	if current != e.Schema {
		t.Fatalf("current_schema() = %q through %s, want %q: search_path in the URL did not take", current, redactURL(e.PostgresURL), e.Schema)
	}
	return e
}

// RandomHex returns n random bytes as lower-case hex, for names that must
// not collide between tests and runs.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Name returns kind, "_" and 8 random hex digits, for example
// "reservebench_1f3a9c0d": a key prefix, schema, sale or instance name no
// other run uses. kind should be lowercase letters, digits and _, so the
// name is a valid schema name too.
func Name(kind string) string { return kind + "_" + RandomHex(4) }

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}
