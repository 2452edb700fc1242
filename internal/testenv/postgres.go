package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CreateSchema creates the schema name in the database of pgURL and returns
// a URL whose connections work in that schema (search_path), and a function
// that drops it with everything in it. name must be lowercase letters,
// digits and _, not starting with a digit.
func CreateSchema(ctx context.Context, pgURL, name string) (schemaURL string, drop func(context.Context) error, err error) {
	if !validIdent(name) {
		return "", nil, fmt.Errorf("schema name %q: use lowercase letters, digits and _", name)
	}
	schemaURL, err = withSearchPath(pgURL, name)
	if err != nil {
		return "", nil, fmt.Errorf("postgres url: %w", err)
	}
	if err := exec(ctx, pgURL, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	drop = func(ctx context.Context) error {
		if err := exec(ctx, pgURL, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	return schemaURL, drop, nil
}

// exec runs one statement on a connection of its own.
func exec(ctx context.Context, pgURL, sql string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// EnsureDatabase creates the database that rawURL names, if it is missing,
// through the server's postgres database. Test binaries of several packages
// may race to create it; losing that race is fine.
func EnsureDatabase(ctx context.Context, rawURL string) error {
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
	defer conn.Close(context.WithoutCancel(ctx))
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

// schemaName makes a schema name from a test's name and a random suffix:
// lowercase letters, digits and _, short enough for Postgres (63 bytes).
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
