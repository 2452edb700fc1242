package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnknownLine: the sale has no line, or there is no such sale.
var ErrUnknownLine = errors.New("ledger: no such line")

// Line is the durable copy of a sale's waiting line (table sale_lines): what
// the edge restores when Redis loses the line.
type Line struct {
	SaleID          string
	Seed            string // hex, 64 characters
	RatePerSecond   float64
	Paused          bool
	ChallengeBits   int   // proof of work a join needs, in leading zero bits; 0: none
	SettingsVersion int64 // bumped by every settings change
	PreCeiling      int64 // no pre-queue index beyond it was ever handed out
	PostCeiling     int64 // nor any later join beyond it
	ServingCeiling  int64 // nor is the cursor beyond it
	// ServingRaised is the highest serving ceiling raised at this settings
	// version: LowerServing never goes below it.
	ServingRaised int64
	// DrawSize is the pre-queue's size at the start, which the draw
	// permutes; valid when Drawn.
	DrawSize int64
	Drawn    bool
	// Autotune: the rate is set by the controller (origin/internal/autotune)
	// within AutotuneMin and AutotuneMax, until ops set one by hand.
	Autotune                 bool
	AutotuneMin, AutotuneMax float64
	UpdatedAt                time.Time
}

const lineColumns = `sale_id, seed, rate_per_s, paused, challenge_bits, settings_version, pre_ceiling, post_ceiling, serving_ceiling, serving_raised, draw_size, autotune, autotune_min, autotune_max, updated_at`

func scanLine(row pgx.Row) (Line, error) {
	var l Line
	var draw *int64
	err := row.Scan(&l.SaleID, &l.Seed, &l.RatePerSecond, &l.Paused, &l.ChallengeBits, &l.SettingsVersion,
		&l.PreCeiling, &l.PostCeiling, &l.ServingCeiling, &l.ServingRaised, &draw, &l.Autotune, &l.AutotuneMin, &l.AutotuneMax, &l.UpdatedAt)
	if draw != nil {
		l.DrawSize, l.Drawn = *draw, true
	}
	return l, err
}

// Line reads a sale's line, or ErrUnknownLine.
func (s *Store) Line(ctx context.Context, sale string) (Line, error) {
	l, err := scanLine(s.pool.QueryRow(ctx, `SELECT `+lineColumns+` FROM sale_lines WHERE sale_id = $1`, sale))
	if errors.Is(err, pgx.ErrNoRows) {
		return Line{}, fmt.Errorf("line of sale %s: %w", sale, ErrUnknownLine)
	}
	if err != nil {
		return Line{}, fmt.Errorf("line of sale %s: %w", sale, err)
	}
	return l, nil
}

// EnsureLine creates a sale's line with the proposed seed and settings unless
// it exists, and returns the line as stored: the first proposal wins and
// every later caller reads it. ErrUnknownLine when there is no such sale.
func (s *Store) EnsureLine(ctx context.Context, sale, seed string, rate float64, paused bool) (Line, error) {
	_, err := s.pool.Exec(ctx, `INSERT INTO sale_lines (sale_id, seed, rate_per_s, paused) VALUES ($1, $2, $3, $4)
		ON CONFLICT (sale_id) DO NOTHING`, sale, seed, rate, paused)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: no such sale
			return Line{}, fmt.Errorf("line of sale %s: %w", sale, ErrUnknownLine)
		}
		return Line{}, fmt.Errorf("create line of sale %s: %w", sale, err)
	}
	// A statement of its own: under READ COMMITTED it sees a row another
	// caller committed while the insert waited on it.
	return s.Line(ctx, sale)
}

// SettingsChange is a change of a line's admission settings: each field
// that is not nil, made by Actor (who, as the edge names them: the admin
// token, the address, the operator).
type SettingsChange struct {
	RatePerSecond *float64
	Paused        *bool
	ChallengeBits *int
	// Autotune switches the controller on or off; on, it needs the bounds
	// (AutotuneMin, AutotuneMax) given here or kept from before.
	Autotune                 *bool
	AutotuneMin, AutotuneMax *float64
	Actor                    string
	// AtVersion, when set, makes the change only while the line's
	// settings version is still *AtVersion (ErrSettingsChanged otherwise):
	// the controller's change never overrides one ops made meanwhile.
	AtVersion *int64
}

// ErrSettingsChanged: a change made at a settings version no longer in
// force.
var ErrSettingsChanged = errors.New("ledger: the line's settings changed meanwhile")

// AdmissionChange is one change of a sale's admission settings, as kept
// for the ops dashboard: who made it, when, and the settings before and
// after.
type AdmissionChange struct {
	ID              int64
	Sale            string
	At              time.Time
	Actor           string
	SettingsVersion int64 // the line's settings version the change made
	Before, After   AdmissionSettings
}

// AdmissionSettings are the settings ops change.
type AdmissionSettings struct {
	RatePerSecond float64
	Paused        bool
	ChallengeBits int
	Autotune      bool
}

// SetLineSettings makes change to a sale's line and bumps the settings
// version: changes are ordered as they reach the database (the row lock
// serialises racing ones), never by a clock of the edge that sent them.
// settings_at records when, and admission_changes who and from what, in
// the same transaction. No serving raise is taken at the new version yet.
// ErrUnknownLine when the line does not exist.
func (s *Store) SetLineSettings(ctx context.Context, sale string, change SettingsChange) (Line, error) {
	var l Line
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		before, err := scanLine(tx.QueryRow(ctx, `SELECT `+lineColumns+` FROM sale_lines WHERE sale_id = $1 FOR UPDATE`, sale))
		if err != nil {
			return err
		}
		if change.AtVersion != nil && before.SettingsVersion != *change.AtVersion {
			return ErrSettingsChanged
		}
		l, err = scanLine(tx.QueryRow(ctx, `UPDATE sale_lines SET rate_per_s = COALESCE($2, rate_per_s), paused = COALESCE($3, paused),
				challenge_bits = COALESCE($4, challenge_bits), autotune = COALESCE($5, autotune),
				autotune_min = COALESCE($6, autotune_min), autotune_max = COALESCE($7, autotune_max),
				settings_version = settings_version + 1, settings_at = now(), serving_raised = 0, updated_at = now()
			WHERE sale_id = $1
			RETURNING `+lineColumns, sale, change.RatePerSecond, change.Paused, change.ChallengeBits,
			change.Autotune, change.AutotuneMin, change.AutotuneMax))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO admission_changes (sale_id, actor, settings_version,
				rate_before, rate_after, paused_before, paused_after, challenge_bits_before, challenge_bits_after,
				autotune_before, autotune_after)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			sale, change.Actor, l.SettingsVersion, before.RatePerSecond, l.RatePerSecond, before.Paused, l.Paused,
			before.ChallengeBits, l.ChallengeBits, before.Autotune, l.Autotune)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Line{}, fmt.Errorf("settings of sale %s: %w", sale, ErrUnknownLine)
	}
	if err != nil {
		return Line{}, fmt.Errorf("settings of sale %s: %w", sale, err)
	}
	return l, nil
}

// AdmissionChanges reads up to limit of a sale's admission changes, newest
// first.
func (s *Store) AdmissionChanges(ctx context.Context, sale string, limit int) ([]AdmissionChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, sale_id, at, actor, settings_version, rate_before, rate_after,
			paused_before, paused_after, challenge_bits_before, challenge_bits_after, autotune_before, autotune_after
		FROM admission_changes WHERE sale_id = $1 ORDER BY id DESC LIMIT $2`, sale, limit)
	if err != nil {
		return nil, fmt.Errorf("admission changes of sale %s: %w", sale, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AdmissionChange, error) {
		var c AdmissionChange
		err := row.Scan(&c.ID, &c.Sale, &c.At, &c.Actor, &c.SettingsVersion, &c.Before.RatePerSecond, &c.After.RatePerSecond,
			&c.Before.Paused, &c.After.Paused, &c.Before.ChallengeBits, &c.After.ChallengeBits, &c.Before.Autotune, &c.After.Autotune)
		c.At = c.At.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("admission changes of sale %s: %w", sale, err)
	}
	return out, nil
}

// RaiseLine raises a sale's join ceilings to at least the values given
// (never lowers one; 0 leaves it), and its serving ceiling to at least
// serving if the line's settings version is still version (the ceiling was
// sized for those settings), remembering it as raised at that version. It
// returns the line; its settings version says whether the serving raise
// was taken. ErrUnknownLine when the line does not exist.
func (s *Store) RaiseLine(ctx context.Context, sale string, pre, post, serving, version int64) (Line, error) {
	l, err := scanLine(s.pool.QueryRow(ctx, `UPDATE sale_lines SET pre_ceiling = GREATEST(pre_ceiling, $2),
			post_ceiling = GREATEST(post_ceiling, $3),
			serving_ceiling = CASE WHEN settings_version = $5 THEN GREATEST(serving_ceiling, $4) ELSE serving_ceiling END,
			serving_raised = CASE WHEN settings_version = $5 THEN GREATEST(serving_raised, $4) ELSE serving_raised END,
			updated_at = now()
		WHERE sale_id = $1
		RETURNING `+lineColumns, sale, pre, post, serving, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return Line{}, fmt.Errorf("raise line of sale %s: %w", sale, ErrUnknownLine)
	}
	if err != nil {
		return Line{}, fmt.Errorf("raise line of sale %s: %w", sale, err)
	}
	return l, nil
}

// LowerServing takes an edge's report that Redis held serving ceiling
// ceiling at settings version version: while that version is in force the
// serving ceiling comes down to it, never below the highest raise taken at
// that version (whose Redis part may land after the reading), and never
// up. A report of an older version changes nothing. It returns the line.
// ErrUnknownLine when the line does not exist.
func (s *Store) LowerServing(ctx context.Context, sale string, version, ceiling int64) (Line, error) {
	l, err := scanLine(s.pool.QueryRow(ctx, `UPDATE sale_lines SET
			serving_ceiling = CASE WHEN settings_version = $2 THEN LEAST(serving_ceiling, GREATEST($3, serving_raised)) ELSE serving_ceiling END,
			updated_at = now()
		WHERE sale_id = $1
		RETURNING `+lineColumns, sale, version, ceiling))
	if errors.Is(err, pgx.ErrNoRows) {
		return Line{}, fmt.Errorf("lower serving ceiling of sale %s: %w", sale, ErrUnknownLine)
	}
	if err != nil {
		return Line{}, fmt.Errorf("lower serving ceiling of sale %s: %w", sale, err)
	}
	return l, nil
}

// SealDraw records the pre-queue's size at the start unless one is recorded
// already, and returns the line: the first edge to seal wins. ErrUnknownLine
// when the line does not exist.
func (s *Store) SealDraw(ctx context.Context, sale string, size int64) (Line, error) {
	l, err := scanLine(s.pool.QueryRow(ctx, `UPDATE sale_lines SET draw_size = COALESCE(draw_size, $2), updated_at = now()
		WHERE sale_id = $1
		RETURNING `+lineColumns, sale, size))
	if errors.Is(err, pgx.ErrNoRows) {
		return Line{}, fmt.Errorf("seal draw of sale %s: %w", sale, ErrUnknownLine)
	}
	if err != nil {
		return Line{}, fmt.Errorf("seal draw of sale %s: %w", sale, err)
	}
	return l, nil
}

// AutotunedLines reads the lines whose rate the controller sets (Autotune)
// and whose sale is open at now.
func (s *Store) AutotunedLines(ctx context.Context, now time.Time) ([]Line, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+prefixed("l.", lineColumns)+` FROM sale_lines l JOIN sales s USING (sale_id)
		WHERE l.autotune AND s.starts_at <= $1 AND s.ends_at > $1 ORDER BY l.sale_id`, now)
	if err != nil {
		return nil, fmt.Errorf("autotuned lines: %w", err)
	}
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Line, error) { return scanLine(row) })
	if err != nil {
		return nil, fmt.Errorf("autotuned lines: %w", err)
	}
	return lines, nil
}

// prefixed qualifies each column of a comma-separated list with prefix.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
