// Package scratch gives a benchmark a corner of a shared Redis and Postgres
// of its own: a random key prefix, removed with SCAN and UNLINK, and a
// Postgres schema reached through search_path, dropped at the end. It never
// flushes a database, so it can run beside tests and other benchmarks.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Name returns kind followed by 8 random hex digits, for example
// "reservebench_1f3a9c0d": a key prefix, schema, sale or instance name
// no other run uses.
func Name(kind string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return kind + "_" + hex.EncodeToString(b[:])
}

// Loopback reports an error unless rawURL names a service on this machine
// (a loopback address, localhost, or a Unix socket directory): benchmarks
// load what they touch hard and must never be pointed elsewhere by accident.
func Loopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	host := u.Hostname()
	if h := u.Query().Get("host"); h != "" && host == "" {
		host = h // libpq style: postgres:///db?host=/run/postgresql
	}
	switch {
	case host == "localhost", strings.HasPrefix(host, "/"):
		return nil
	case host != "":
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%s://%s: benchmarks run against loopback services only", u.Scheme, u.Host)
}

// DeletePrefix unlinks every key whose name starts with prefix, a SCAN page
// at a time, and returns how many it removed.
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	if prefix == "" {
		return 0, fmt.Errorf("delete keys: refusing an empty prefix")
	}
	pattern := globEscape(prefix) + "*"
	removed := 0
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return removed, fmt.Errorf("delete keys %s: %w", pattern, err)
		}
		if len(keys) > 0 {
			n, err := rdb.Unlink(ctx, keys...).Result()
			if err != nil {
				return removed, fmt.Errorf("delete keys %s: %w", pattern, err)
			}
			removed += int(n)
		}
		if next == 0 {
			return removed, nil
		}
		cursor = next
	}
}

// globEscape escapes the characters SCAN MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Schema creates the Postgres schema name in the database of pgURL and
// returns a URL whose connections see only that schema (search_path), and a
// function that drops it with everything in it.
func Schema(ctx context.Context, pgURL, name string) (string, func(context.Context) error, error) {
	if !validIdent(name) {
		return "", nil, fmt.Errorf("schema name %q: use lowercase letters, digits and _", name)
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", nil, fmt.Errorf("postgres url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name) // pgx sends unknown parameters as run-time settings
	u.RawQuery = q.Encode()
	drop := func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
}

func validIdent(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
