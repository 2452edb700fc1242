package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrInvalidState: a change's before or after is JSON that Postgres's
// jsonb does not take (a \u0000 in a string, a number beyond numeric).
var ErrInvalidState = errors.New("ledger: before or after is not JSON the ledger can keep")

// AdminChange is one admin change other than a sale's admission settings
// (table admin_changes), as kept for the ops dashboard: who made it, when,
// what, and the state before and after as the edge sent it.
type AdminChange struct {
	ID    int64
	At    time.Time
	Actor string
	What  string // 'defences', 'tarpit_release', or either with '_failed' when it did not land
	// Before and After are JSON values; nil (SQL NULL, JSON null) when
	// there is none.
	Before, After json.RawMessage
}

// RecordAdminChange keeps c (its ID and At are the ledger's) and returns
// it as kept. ErrInvalidState when Postgres refuses its before or after.
func (s *Store) RecordAdminChange(ctx context.Context, c AdminChange) (AdminChange, error) {
	row := s.pool.QueryRow(ctx, `INSERT INTO admin_changes (actor, what, before, after) VALUES ($1, $2, $3, $4)
		RETURNING id, at`, c.Actor, c.What, jsonOrNull(c.Before), jsonOrNull(c.After))
	if err := row.Scan(&c.ID, &c.At); err != nil {
		var pgErr *pgconn.PgError
		// Class 22, data exception: the value, not the database, is at fault.
		if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
			return AdminChange{}, fmt.Errorf("record admin change %s: %w: %s", c.What, ErrInvalidState, pgErr.Message)
		}
		return AdminChange{}, fmt.Errorf("record admin change %s: %w", c.What, err)
	}
	c.At = c.At.UTC()
	return c, nil
}

// AdminChanges reads up to limit admin changes, newest first.
func (s *Store) AdminChanges(ctx context.Context, limit int) ([]AdminChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, what, before, after
		FROM admin_changes ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("admin changes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AdminChange, error) {
		var c AdminChange
		err := row.Scan(&c.ID, &c.At, &c.Actor, &c.What, &c.Before, &c.After)
		c.At = c.At.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin changes: %w", err)
	}
	return out, nil
}

// jsonOrNull is v as a jsonb parameter: SQL NULL for none, or JSON null.
func jsonOrNull(v json.RawMessage) any {
	if t := bytes.TrimSpace(v); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return v
}
