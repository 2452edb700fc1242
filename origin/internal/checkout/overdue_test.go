package checkout

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Overdue holds are those whose expiry in the index passed more than the
// given while ago, by Redis's clock (this machine's): not those due only
// lately, nor those still running; a sale without holds has none.
func TestOverdueHolds(t *testing.T) {
	t.Parallel()
	s := newStore(t, 3)
	ctx := context.Background()
	now := time.Now()
	if err := s.rdb.ZAdd(ctx, s.keys.Holds("s1"),
		redis.Z{Score: float64(now.Add(-time.Minute).UnixMilli()), Member: "overdue"},
		redis.Z{Score: float64(now.Add(-5 * time.Second).UnixMilli()), Member: "due lately"},
		redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "running"},
	).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sale string
		late time.Duration
		want int64
	}{
		{"s1", 10 * time.Second, 1},
		{"s1", time.Second, 2},
		{"s1", 2 * time.Minute, 0},
		{"no-holds", 10 * time.Second, 0},
	} {
		if n, err := s.OverdueHolds(ctx, c.sale, c.late); err != nil || n != c.want {
			t.Errorf("OverdueHolds(%s, %v) = %d, %v; want %d", c.sale, c.late, n, err, c.want)
		}
	}
}

func TestEntryTime(t *testing.T) {
	t.Parallel()
	if got, err := EntryTime("1712345678901-3"); err != nil || !got.Equal(time.UnixMilli(1712345678901)) {
		t.Errorf("EntryTime(1712345678901-3) = %v, %v; want %v", got, err, time.UnixMilli(1712345678901).UTC())
	}
	for _, id := range []string{"", "1712345678901", "abc-1", "journal:r_1"} {
		if got, err := EntryTime(id); err == nil {
			t.Errorf("EntryTime(%q) = %v, want an error", id, got)
		}
	}
}
