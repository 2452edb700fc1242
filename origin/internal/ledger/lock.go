package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Lock is a named lock of this database schema, held by one holder at a
// time: a Postgres session advisory lock, on a connection set apart while
// it is held, so that a holder that dies (its connection closed) lets it
// go.
type Lock struct {
	conn *pgxpool.Conn
	name string
}

// lockKey is a lock's key: the schema's and the name's (tests share one
// database).
const lockKey = `hashtextextended(current_schema() || ':' || $1, 0)`

// Hold takes the named lock if no one holds it; nil (and no error) when
// another does.
func (s *Store) Hold(ctx context.Context, name string) (*Lock, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+lockKey+`)`, name).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		return nil, nil
	}
	return &Lock{conn: conn, name: name}, nil
}

// Held says whether the lock is still held: its connection answers, so its
// session — which holds the lock until it ends — lives. An error means it
// may be gone (Postgres restarted, or ended the session): give it up.
func (l *Lock) Held(ctx context.Context) error {
	if err := l.conn.Ping(ctx); err != nil {
		return fmt.Errorf("lock %s: %w", l.name, err)
	}
	return nil
}

// Unlock lets the lock go.
func (l *Lock) Unlock() {
	// A fresh context: the holder's may have ended. If the unlock fails,
	// the connection is closed, which unlocks.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, l.name); err != nil {
		_ = l.conn.Conn().Close(ctx)
	}
	l.conn.Release()
}

// TryLock takes the named lock for one task, if no one holds it: ok is
// false when another does (Hold, for a lock held across tasks).
func (s *Store) TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error) {
	l, err := s.Hold(ctx, name)
	if err != nil || l == nil {
		return nil, false, err
	}
	return l.Unlock, true, nil
}
