// Package testenv is the origin tests' name for internal/testenv, which
// gives each test a Redis key prefix and a Postgres schema of its own, both
// removed when the test ends. New code imports internal/testenv directly.
package testenv

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testenv"
)

// Defaults of the environment variables that point tests at the servers.
const (
	DefaultRedisURL    = testenv.DefaultRedisURL
	DefaultPostgresURL = testenv.DefaultPostgresURL
)

// Env is one test's share of Redis and Postgres; see internal/testenv.
type Env = testenv.Env

// New makes a fresh prefix and schema for t and removes both in t.Cleanup.
func New(t testing.TB) *Env {
	t.Helper()
	return testenv.New(t)
}

// DeleteKeys deletes every key that starts with prefix, found with SCAN.
func DeleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	_, err := testenv.DeleteKeys(ctx, rdb, prefix)
	return err
}

// RandomID returns n random bytes as lower-case hex, for ids that must not
// collide between tests.
func RandomID(t testing.TB, n int) string { return testenv.RandomHex(n) }
