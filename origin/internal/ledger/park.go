package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// IsPermanent reports whether Postgres refused a statement in a way that
// retrying cannot change (a constraint, a bad value), as opposed to being
// unreachable, overloaded, or losing a serialization race.
func IsPermanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "55", "57", "58", "XX":
		// connection, transaction rollback, resources, lock, operator
		// intervention, system and internal errors: worth a retry
		return false
	}
	return true
}

// Park sets an intent aside that Postgres refuses for good, recording why,
// and marks it applied so it never blocks or changes the ledger. It returns
// false when the intent had been applied or parked already.
func (s *Store) Park(ctx context.Context, sale string, in intent.Intent, reason string) (bool, error) {
	var parked bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO applied_intents (sale_id, intent_id, kind, reservation_id) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, sale, in.ID, string(in.Kind), in.ReservationID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		parked = true
		_, err = tx.Exec(ctx, `INSERT INTO parked_intents (sale_id, intent_id, kind, body, reason) VALUES ($1, $2, $3, $4, $5)`,
			sale, in.ID, string(in.Kind), in, reason)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("park intent %s of sale %s: %w", in.ID, sale, err)
	}
	return parked, nil
}
