package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// RecordGrants writes granted reserves to the reserve journal in one
// statement (one commit, so a whole pipeline of reserves shares one fsync).
// A grant already journaled is left as it is, so repeats are harmless. A
// grant numbered in an epoch that is no longer its sale's (a rebuild moved
// on while it was in flight) is not written: its id is returned in stale,
// and its hold is not to be promised. A sequence number journaled twice in
// one epoch (a Redis that lost grants and numbers again) fails the write.
func (s *Store) RecordGrants(ctx context.Context, grants []intent.Grant) (stale []string, err error) {
	if len(grants) == 0 {
		return nil, nil
	}
	defer s.observe(opRecordGrants, time.Now())
	n := len(grants)
	var (
		ids, sales, skus, accounts, idems, tokens, epochs = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		seqs             = make([]int64, n)
		expires, created = make([]time.Time, n), make([]time.Time, n)
	)
	for i, g := range grants {
		ids[i], sales[i], skus[i], accounts[i] = g.ReservationID, g.Sale, g.SKU, g.Account
		idems[i], tokens[i], epochs[i], seqs[i] = g.IdempotencyKey, g.TokenID, g.Epoch, g.Seq
		expires[i], created[i] = g.ExpiresAt, g.CreatedAt
	}
	// The sales' rows are read FOR SHARE: a rebuild that moves an epoch
	// (an UPDATE of the row) waits for journal writes in flight, and a
	// write that waited for it sees the new epoch.
	//
	// Two writes of the same grant at once (a reserve and its replay both
	// making the hold durable) race past ON CONFLICT (reservation_id): the
	// second waits on the first's sequence entry, not yet committed, and
	// fails on reserve_journal_by_sequence, which ON CONFLICT does not
	// cover. Written again, it finds the grant committed and does nothing;
	// a sequence truly journaled twice fails every time. (A batch may meet
	// the race once per grant in it: a few tries.)
	for try := 0; try < 3; try++ {
		stale, err = s.recordGrants(ctx, ids, sales, skus, accounts, idems, tokens, epochs, seqs, expires, created)
		if !isSequenceTaken(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("journal %d reserves: %w", n, err)
	}
	return stale, nil
}

// isSequenceTaken reports a grant's sequence number already journaled in
// its epoch (reserve_journal_by_sequence).
func isSequenceTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" /* unique_violation */ && pgErr.ConstraintName == "reserve_journal_by_sequence"
}

func (s *Store) recordGrants(ctx context.Context, ids, sales, skus, accounts, idems, tokens, epochs []string, seqs []int64,
	expires, created []time.Time) (stale []string, err error) {
	err = s.pool.QueryRow(ctx, `WITH cur AS (
			SELECT sale_id, redis_epoch FROM sales WHERE sale_id = ANY($2::text[]) FOR SHARE),
		g AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
				$8::bigint[], $9::timestamptz[], $10::timestamptz[])
			AS g(reservation_id, sale_id, sku, account_id, idempotency_key, token_id, epoch, seq, expires_at, created_at)),
		ins AS (
			INSERT INTO reserve_journal
				(reservation_id, sale_id, sku, account_id, idempotency_key, token_id, epoch, seq, expires_at, created_at)
			SELECT g.* FROM g JOIN cur ON cur.sale_id = g.sale_id AND cur.redis_epoch = g.epoch
			ON CONFLICT (reservation_id) DO NOTHING)
		SELECT coalesce(array_agg(g.reservation_id), '{}') FROM g
			LEFT JOIN cur ON cur.sale_id = g.sale_id AND cur.redis_epoch = g.epoch WHERE cur.sale_id IS NULL`,
		ids, sales, skus, accounts, idems, tokens, epochs, seqs, expires, created).Scan(&stale)
	return stale, err
}

// Journaled reports whether the journal holds a reservation.
func (s *Store) Journaled(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM reserve_journal WHERE reservation_id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("read journal of reservation %s: %w", id, err)
	}
	return ok, nil
}

const selectGrants = `SELECT j.reservation_id, j.sale_id, j.sku, j.account_id, j.idempotency_key, j.token_id,
	j.epoch, j.seq, j.expires_at, j.created_at FROM reserve_journal j`

// selectUnappliedGrants reads journaled grants with no reservation row,
// each with the later of its expiry and its order's grace.
const selectUnappliedGrants = `SELECT j.reservation_id, j.sale_id, j.sku, j.account_id, j.idempotency_key, j.token_id,
	j.epoch, j.seq, greatest(j.expires_at, o.hold_until), j.created_at
	FROM reserve_journal j LEFT JOIN orders o USING (reservation_id)`

func scanGrants(rows pgx.Rows) ([]intent.Grant, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (intent.Grant, error) {
		var g intent.Grant
		err := row.Scan(&g.ReservationID, &g.Sale, &g.SKU, &g.Account, &g.IdempotencyKey, &g.TokenID,
			&g.Epoch, &g.Seq, &g.ExpiresAt, &g.CreatedAt)
		g.ExpiresAt, g.CreatedAt = g.ExpiresAt.UTC(), g.CreatedAt.UTC()
		return g, err
	})
}

// Grants reads every journaled reserve of a sale, in the order granted:
// the burned admission tokens and idempotency keys a rebuild puts back.
func (s *Store) Grants(ctx context.Context, sale string) ([]intent.Grant, error) {
	rows, err := s.pool.Query(ctx, selectGrants+` WHERE j.sale_id = $1 ORDER BY j.created_at, j.seq`, sale)
	if err != nil {
		return nil, fmt.Errorf("read journal of sale %s: %w", sale, err)
	}
	out, err := scanGrants(rows)
	if err != nil {
		return nil, fmt.Errorf("read journal of sale %s: %w", sale, err)
	}
	return out, nil
}

// UnappliedGrants reads the journaled reserves of a sale that the ledger
// has no reservation for: the holds Redis granted and then lost with their
// intents before the order writer applied them.
func (s *Store) UnappliedGrants(ctx context.Context, sale string) ([]intent.Grant, error) {
	rows, err := s.pool.Query(ctx, selectUnappliedGrants+` WHERE j.sale_id = $1
		AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.reservation_id = j.reservation_id)
		ORDER BY j.created_at, j.seq`, sale)
	if err != nil {
		return nil, fmt.Errorf("read unapplied journal of sale %s: %w", sale, err)
	}
	out, err := scanGrants(rows)
	if err != nil {
		return nil, fmt.Errorf("read unapplied journal of sale %s: %w", sale, err)
	}
	return out, nil
}

// replayBatch bounds the intents one replay transaction applies.
const replayBatch = 500

// Replay applies to the ledger the journaled reserves it never got, as the
// order writer would have, and says which it restored and which Postgres
// refused (recorded cancelled, with the reason, so their shoppers'
// reservations answer honestly). A grant whose hold has run out by now is
// restored as expired, taking no unit: it must not beat a later live hold
// to the stock.
func (s *Store) Replay(ctx context.Context, sale string, now time.Time) (restored, refused []intent.Intent, err error) {
	grants, err := s.UnappliedGrants(ctx, sale)
	if err != nil {
		return nil, nil, err
	}
	for len(grants) > 0 {
		n := min(len(grants), replayBatch)
		var batch, reserves []intent.Intent
		for _, g := range grants[:n] {
			in := g.Intent()
			reserves = append(reserves, in)
			batch = append(batch, in)
			if g.ExpiresAt.Before(now) {
				// A release that comes first records the reservation
				// expired, and its reserve then changes nothing.
				batch = append(batch, intent.Intent{ID: intent.JournalIDPrefix + "expire:" + g.ReservationID,
					Kind: intent.Expire, ReservationID: g.ReservationID, Account: g.Account, SKU: g.SKU,
					IdempotencyKey: g.IdempotencyKey, ExpiresAt: g.ExpiresAt, At: g.ExpiresAt})
			}
		}
		grants = grants[n:]
		applied, err := s.Apply(ctx, sale, batch)
		if err != nil {
			return restored, refused, fmt.Errorf("replay journal of sale %s: %w", sale, err)
		}
		no := map[string]bool{}
		for _, r := range applied.Refused {
			no[r.Intent.ReservationID] = true
			refused = append(refused, r.Intent)
		}
		for _, in := range reserves {
			if !no[in.ReservationID] {
				restored = append(restored, in)
			}
		}
	}
	return restored, refused, nil
}

// RedisEpoch reads the epoch the origin last wrote to Redis for a sale (""
// when none was written yet), the replication id of the Redis server it was
// written to, and the highest sequence journaled in the epoch.
func (s *Store) RedisEpoch(ctx context.Context, sale string) (epoch, replid string, journalSeq int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT coalesce(s.redis_epoch, ''), coalesce(s.redis_replid, ''),
		coalesce((SELECT max(j.seq) FROM reserve_journal j WHERE j.sale_id = s.sale_id AND j.epoch = s.redis_epoch), 0)
		FROM sales s WHERE s.sale_id = $1`, sale).Scan(&epoch, &replid, &journalSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", 0, fmt.Errorf("sale %s: %w", sale, ErrNotFound)
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("read redis epoch of sale %s: %w", sale, err)
	}
	return epoch, replid, journalSeq, nil
}

// SetRedisEpoch records the epoch about to be written to Redis for a sale,
// and the replication id of that Redis server. With onlyIfNone it records
// them only when the sale has no epoch yet and reports whether it did.
func (s *Store) SetRedisEpoch(ctx context.Context, sale, epoch, replid string, onlyIfNone bool) (bool, error) {
	q := `UPDATE sales SET redis_epoch = $2, redis_replid = nullif($3, '') WHERE sale_id = $1`
	if onlyIfNone {
		q += ` AND redis_epoch IS NULL`
	}
	tag, err := s.pool.Exec(ctx, q, sale, epoch, replid)
	if err != nil {
		return false, fmt.Errorf("set redis epoch of sale %s: %w", sale, err)
	}
	return tag.RowsAffected() == 1, nil
}

// LossKind says how an origin found that Redis had lost a sale's state.
type LossKind string

const (
	// LossStateMissing: Redis holds no epoch for the sale (restarted
	// empty, flushed, or failed over to an empty replica).
	LossStateMissing LossKind = "state_missing"
	// LossEpochForeign: Redis holds an epoch the origin did not write.
	LossEpochForeign LossKind = "epoch_foreign"
	// LossSequenceBehind: Redis numbered fewer reserves than the journal
	// holds (a failover to a replica that had not caught up).
	LossSequenceBehind LossKind = "sequence_behind"
	// LossServerReplaced: another Redis server (a new replication id)
	// holds the sale's epoch: a replica was promoted, or the server
	// restarted from its files. It may lack the last writes, so the sale
	// is rebuilt from Postgres; restored says whether any hold was missing.
	LossServerReplaced LossKind = "server_replaced"
)

// Loss is one time Redis was found to have lost a sale's state, and what
// the rebuild that followed restored.
type Loss struct {
	ID         int64     `json:"id"`
	Sale       string    `json:"-"`
	DetectedAt time.Time `json:"detected_at"`
	Kind       LossKind  `json:"kind"`
	Epoch      string    `json:"epoch"`
	RedisEpoch string    `json:"redis_epoch"`
	RedisSeq   int64     `json:"redis_seq"`
	JournalSeq int64     `json:"journal_seq"`
	// Restored are journaled holds the rebuild put back; Lost are those
	// Postgres could not take back (cancelled, with the reason, so their
	// shoppers see it). Both stay zero until the rebuild is done.
	Restored  int        `json:"restored"`
	Lost      int        `json:"lost"`
	RebuiltAt *time.Time `json:"rebuilt_at,omitempty"`
}

// RecordLoss writes a detected loss and returns its id. While an earlier
// loss of the same sale and epoch is not rebuilt yet (its rebuild could not
// finish), that one is returned instead, with fresh false.
func (s *Store) RecordLoss(ctx context.Context, l Loss) (id int64, fresh bool, err error) {
	err = s.pool.QueryRow(ctx, `WITH open AS (
			SELECT loss_id FROM redis_losses WHERE sale_id = $1 AND epoch = $3 AND rebuilt_at IS NULL
			ORDER BY loss_id DESC LIMIT 1),
		ins AS (
			INSERT INTO redis_losses (sale_id, kind, epoch, redis_epoch, redis_seq, journal_seq)
			SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM open) RETURNING loss_id)
		SELECT loss_id, true FROM ins UNION ALL SELECT loss_id, false FROM open`,
		l.Sale, string(l.Kind), l.Epoch, l.RedisEpoch, l.RedisSeq, l.JournalSeq).Scan(&id, &fresh)
	if err != nil {
		return 0, false, fmt.Errorf("record redis loss of sale %s: %w", l.Sale, err)
	}
	return id, fresh, nil
}

// FinishLoss records what the rebuild after a loss restored and lost.
func (s *Store) FinishLoss(ctx context.Context, id int64, restored, lost int) error {
	if _, err := s.pool.Exec(ctx, `UPDATE redis_losses SET restored = restored + $2, lost = lost + $3, rebuilt_at = now()
		WHERE loss_id = $1`, id, restored, lost); err != nil {
		return fmt.Errorf("finish redis loss %d: %w", id, err)
	}
	return nil
}

// Losses reads a sale's recorded losses, newest first.
func (s *Store) Losses(ctx context.Context, sale string) ([]Loss, error) {
	rows, err := s.pool.Query(ctx, `SELECT loss_id, sale_id, detected_at, kind, epoch, redis_epoch, redis_seq,
		journal_seq, restored, lost, rebuilt_at FROM redis_losses WHERE sale_id = $1 ORDER BY loss_id DESC`, sale)
	if err != nil {
		return nil, fmt.Errorf("read redis losses of sale %s: %w", sale, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Loss, error) {
		var l Loss
		err := row.Scan(&l.ID, &l.Sale, &l.DetectedAt, &l.Kind, &l.Epoch, &l.RedisEpoch, &l.RedisSeq,
			&l.JournalSeq, &l.Restored, &l.Lost, &l.RebuiltAt)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read redis losses of sale %s: %w", sale, err)
	}
	return out, nil
}

// BrokenHolds counts a sale's reservations that were granted and then
// refused by Postgres (cancelled for want of stock, or because the account
// held another): promises Redis made that the ledger could not keep, by the
// order writer or by a rebuild's replay. It should always be 0.
func (s *Store) BrokenHolds(ctx context.Context, sale string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE sale_id = $1
		AND status = 'cancelled' AND cancel_reason IN ('no_stock', 'account_has_live')`, sale).Scan(&n); err != nil {
		return 0, fmt.Errorf("count broken holds of sale %s: %w", sale, err)
	}
	return n, nil
}
