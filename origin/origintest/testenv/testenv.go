// Package testenv gives each test its own corner of the real Redis and
// Postgres: a Redis key prefix and a Postgres schema of its own, both removed
// when the test ends. It depends on nothing of the origin, so the storage
// packages' internal tests can use it as well as origintest.
//
// The servers come from FLASHGATE_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0) and FLASHGATE_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/flashgate_test?sslmode=disable); the
// database is created when missing. A missing server fails the test, never
// skips it.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisconn"
)

// Defaults of the environment variables that point tests at the servers.
const (
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/flashgate_test?sslmode=disable"
)

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

// New makes a fresh prefix and schema for t and removes both (the schema
// with everything in it, and every key under the prefix) in t.Cleanup.
func New(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	suffix := randomHex(t, 5)
	e := &Env{
		RedisURL: getenv("FLASHGATE_TEST_REDIS_URL", DefaultRedisURL),
		Prefix:   "t" + suffix + ":",
		Schema:   schemaName(t.Name(), suffix),
	}

	ropts, err := redisconn.ParseURL(e.RedisURL)
	if err != nil {
		t.Fatalf("FLASHGATE_TEST_REDIS_URL: %v", err)
	}
	e.Redis = redis.NewClient(ropts)
	if err := e.Redis.Ping(ctx).Err(); err != nil {
		_ = e.Redis.Close()
		t.Fatalf("these tests need a real Redis at %s (set FLASHGATE_TEST_REDIS_URL): %v", redisconn.Redact(e.RedisURL), err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DeleteKeys(cctx, e.Redis, e.Prefix); err != nil {
			t.Errorf("delete the test's Redis keys %s*: %v", e.Prefix, err)
		}
		_ = e.Redis.Close()
	})

	base := getenv("FLASHGATE_TEST_POSTGRES_URL", DefaultPostgresURL)
	if err := ensureDatabase(ctx, base); err != nil {
		t.Fatalf("these tests need a real Postgres at %s (set FLASHGATE_TEST_POSTGRES_URL): %v", redactURL(base), err)
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("these tests need a real Postgres at %s (set FLASHGATE_TEST_POSTGRES_URL): %v", redactURL(base), err)
	}
	defer admin.Close(ctx)
	ident := pgx.Identifier{e.Schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("create schema %s: %v", e.Schema, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", e.Schema, err)
			return
		}
		defer conn.Close(cctx)
		if _, err := conn.Exec(cctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", e.Schema, err)
		}
	})

	e.PostgresURL, err = withSearchPath(base, e.Schema)
	if err != nil {
		t.Fatalf("FLASHGATE_TEST_POSTGRES_URL: %v", err)
	}
	e.DB, err = pgxpool.New(ctx, e.PostgresURL)
	if err != nil {
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

// DeleteKeys deletes every key that starts with prefix, found with SCAN
// (fine in tests; never in production paths).
func DeleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 10000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// ensureDatabase creates the database that url names, if it is missing,
// through the server's postgres database. Test binaries of several packages
// may race to create it; losing that race is fine.
func ensureDatabase(ctx context.Context, rawURL string) error {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return err
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil // created meanwhile by another test binary
	}
	return err
}

// withSearchPath adds search_path=schema to a Postgres URL; pgx passes
// parameters it does not know to the server as run-time parameters.
func withSearchPath(rawURL, schema string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// schemaName makes a lower-case identifier from the test's name and suffix,
// short enough for Postgres (63 bytes).
func schemaName(test, suffix string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	b.WriteByte('_')
	b.WriteString(suffix)
	return b.String()
}

// RandomID returns n random bytes as lower-case hex, for ids that must not
// collide between tests.
func RandomID(t testing.TB, n int) string {
	t.Helper()
	return randomHex(t, n)
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

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
