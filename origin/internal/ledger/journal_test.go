package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

func grant(res, account string, seq int64, expires time.Time) intent.Grant {
	return intent.Grant{Sale: "s1", ReservationID: res, Account: account, SKU: "a", IdempotencyKey: "idem-" + res,
		TokenID: "jti-" + res, Epoch: "e1", Seq: seq, ExpiresAt: expires, CreatedAt: expires.Add(-time.Minute)}
}

// A grant is journaled only under its sale's current epoch; one numbered
// in an epoch a rebuild has left, or for a sale the ledger does not have,
// is refused (returned as stale), and a
// sequence number journaled twice in one epoch fails the write.
func TestRecordGrantsKeepsToTheEpoch(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5, 0)
	ctx := context.Background()
	if _, err := s.SetRedisEpoch(ctx, "s1", "e1", "r1", false); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	old := grant("r-old", "u9", 1, later)
	old.Epoch = "e0"
	stale, err := s.RecordGrants(ctx, []intent.Grant{grant("r-1", "u1", 1, later), old, grant("r-2", "u2", 2, later)})
	if err != nil || len(stale) != 1 || stale[0] != "r-old" {
		t.Fatalf("RecordGrants = %v, %v; want r-old stale", stale, err)
	}
	// A grant of a sale the ledger does not have is refused the same way:
	// the statement's own read of sales is the journal's only reference
	// check (there is no foreign key; migration 0008).
	unknown := grant("r-unknown", "u8", 1, later)
	unknown.Sale = "no-such-sale"
	if stale, err := s.RecordGrants(ctx, []intent.Grant{unknown}); err != nil || len(stale) != 1 || stale[0] != "r-unknown" {
		t.Fatalf("RecordGrants(unknown sale) = %v, %v; want r-unknown stale", stale, err)
	}
	if ok, _ := s.Journaled(ctx, "r-unknown"); ok {
		t.Fatalf("r-unknown journaled for a sale the ledger does not have")
	}
	// The same grants again: nothing new, nothing refused.
	if stale, err := s.RecordGrants(ctx, []intent.Grant{grant("r-1", "u1", 1, later)}); err != nil || len(stale) != 0 {
		t.Fatalf("RecordGrants(again) = %v, %v; want nothing stale", stale, err)
	}
	epoch, replid, seq, err := s.RedisEpoch(ctx, "s1")
	if err != nil || epoch != "e1" || replid != "r1" || seq != 2 {
		t.Fatalf("RedisEpoch = %q, %q, %d, %v; want e1, r1, 2", epoch, replid, seq, err)
	}
	// A Redis that numbers again from an older point (it lost grants).
	_, err = s.RecordGrants(ctx, []intent.Grant{grant("r-3", "u3", 2, later)})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("RecordGrants(sequence 2 again) = %v, want a unique violation", err)
	}
	if ok, _ := s.Journaled(ctx, "r-3"); ok {
		t.Fatalf("r-3 journaled despite its reused sequence")
	}
}

// Writes of one grant at once — a reserve and its replays each making the
// hold durable — all succeed, the grant journaled once. A write whose
// check for the reservation came before another's insert, and whose own
// insert came after it, waited on the other's sequence entry and failed
// on reserve_journal_by_sequence, which ON CONFLICT (reservation_id) does
// not cover: its shopper was told to wait for a hold that was theirs.
// Which order the writes take is the scheduler's, so the test writes many
// grants, eight writers each.
func TestRecordGrantsAtOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, 5, 0)
	ctx := context.Background()
	if _, err := s.SetRedisEpoch(ctx, "s1", "e1", "r1", false); err != nil {
		t.Fatal(err)
	}
	const grants, writers = 100, 8
	later := time.Now().Add(time.Hour)
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range grants {
		g := grant(fmt.Sprintf("r-%d", i), fmt.Sprintf("u%d", i), int64(i+1), later)
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				if _, err := s.RecordGrants(ctx, []intent.Grant{g}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			})
		}
		wg.Wait()
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d writes of a grant written at the same time failed, the first: %v", n, grants*writers, firstErr.Load())
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM reserve_journal WHERE sale_id = 's1'`).Scan(&n); err != nil || n != grants {
		t.Fatalf("journal rows = %d (%v), want %d", n, err, grants)
	}
}

// The replay gives the unit to the live hold, not to an older grant whose
// hold ran out meanwhile: that one is restored as expired.
func TestReplayRestoresRunOutHoldsAsExpired(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1, 0)
	ctx := context.Background()
	if _, err := s.SetRedisEpoch(ctx, "s1", "e1", "", false); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ranOut := grant("r-old", "u1", 1, now.Add(-time.Minute))
	live := grant("r-live", "u2", 2, now.Add(time.Minute))
	if _, err := s.RecordGrants(ctx, []intent.Grant{ranOut, live}); err != nil {
		t.Fatal(err)
	}
	restored, refused, err := s.Replay(ctx, "s1", now)
	if err != nil || len(restored) != 2 || len(refused) != 0 {
		t.Fatalf("Replay = %d restored, %d refused, %v; want 2 and 0", len(restored), len(refused), err)
	}
	wantStatus(t, s, "r-old", intent.Expired)
	wantStatus(t, s, "r-live", intent.Held)
	wantStock(t, s, "a", intent.Stock{Total: 1, Held: 1})
	// Nothing left to replay.
	if restored, refused, err := s.Replay(ctx, "s1", now); err != nil || len(restored)+len(refused) != 0 {
		t.Fatalf("Replay(again) = %d, %d, %v; want nothing", len(restored), len(refused), err)
	}
}

// BenchmarkRecordGrants measures the reserve journal's write: batches of
// 256 grants of distinct accounts, each batch one statement and one commit,
// from 4 writers at once (the Reserver's default pipelines). Reported as
// grants per second; go test -run XXX -bench RecordGrants -benchtime 400x ./origin/internal/ledger/
func BenchmarkRecordGrants(b *testing.B) {
	const batch, writers = 256, 4
	s := newStore(b, 1, 0)
	if _, err := s.SetRedisEpoch(b.Context(), "s1", "e1", "", false); err != nil {
		b.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	var next, left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				first := next.Add(batch) - batch
				grants := make([]intent.Grant, batch)
				for j := range grants {
					n := first + int64(j)
					grants[j] = grant(fmt.Sprintf("r%09d", n), fmt.Sprintf("u%09d", n), n+1, later)
				}
				if _, err := s.RecordGrants(context.Background(), grants); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "grants/s")
}
