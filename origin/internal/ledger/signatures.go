package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SignatureKeep is how long a taken signature's row outlives its until (by
// Postgres's clock): so long as every origin's clock is within it of the
// database's, none takes the signature again after its row is gone.
const SignatureKeep = 5 * time.Minute

// signaturePurge bounds the expired rows one TakeSignature deletes: more
// than it inserts, so the table holds little beyond the signatures of the
// last tolerance and SignatureKeep.
const signaturePurge = 64

// TakeSignature records a signed request's signature (key), which its
// verifier takes until until, and reports whether it is fresh: false means
// an origin sharing this database took it before (a replay). It deletes a
// few rows expired SignatureKeep ago on the way, skipping any another
// call is deleting.
func (s *Store) TakeSignature(ctx context.Context, key string, until time.Time) (fresh bool, err error) {
	defer s.observe(opTakeSignature, time.Now())
	err = s.pool.QueryRow(ctx, `WITH expired AS (
			SELECT signature FROM line_signatures WHERE until < now() - make_interval(secs => $3)
			ORDER BY until LIMIT $4 FOR UPDATE SKIP LOCKED
		), purged AS (
			DELETE FROM line_signatures WHERE signature IN (SELECT signature FROM expired)
		)
		INSERT INTO line_signatures (signature, until) VALUES ($1, $2)
		ON CONFLICT (signature) DO NOTHING
		RETURNING true`, key, until, SignatureKeep.Seconds(), signaturePurge).Scan(&fresh)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take signature: %w", err)
	}
	return true, nil
}
