package sales

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

func TestWatchedSales(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sale := func(id string, starts, ends time.Duration) ledger.Sale {
		return ledger.Sale{ID: id, StartsAt: now.Add(starts), EndsAt: now.Add(ends)}
	}
	ids := func(sales []ledger.Sale) []string {
		out := []string{}
		for _, s := range sales {
			out = append(out, s.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		all  []ledger.Sale
		want []string
	}{
		{"none", nil, []string{}},
		{"open", []ledger.Sale{sale("open", -time.Minute, time.Hour)}, []string{"open"}},
		{"starting within the hour", []ledger.Sale{sale("soon", 30*time.Minute, 2*time.Hour)}, []string{"soon"}},
		{"starting in exactly an hour", []ledger.Sale{sale("edge", time.Hour, 2*time.Hour)}, []string{"edge"}},
		{"starting later", []ledger.Sale{sale("later", time.Hour+time.Second, 2*time.Hour)}, []string{}},
		{"ended within the hour", []ledger.Sale{sale("just-ended", -2*time.Hour, -30*time.Minute)}, []string{"just-ended"}},
		{"ended exactly an hour ago", []ledger.Sale{sale("edge", -2*time.Hour, -time.Hour)}, []string{}},
		{"ended long ago", []ledger.Sale{sale("old", -3*time.Hour, -2*time.Hour)}, []string{}},
		{"newest start first, then id", []ledger.Sale{
			sale("b", -2*time.Hour, time.Hour), sale("a", -2*time.Hour, time.Hour), sale("c", -time.Minute, time.Hour),
		}, []string{"c", "a", "b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(watched(c.all, now)); !slices.Equal(got, c.want) {
				t.Errorf("watched = %v, want %v", got, c.want)
			}
		})
	}

	// More open sales than maxWatched: the newest are watched.
	var many []ledger.Sale
	for i := range maxWatched + 5 {
		many = append(many, sale(fmt.Sprintf("s%02d", i), -time.Duration(i+1)*time.Minute, time.Hour))
	}
	got := ids(watched(many, now))
	if len(got) != maxWatched || got[0] != "s00" || got[maxWatched-1] != fmt.Sprintf("s%02d", maxWatched-1) {
		t.Errorf("watched of %d open sales = %v, want the %d newest, s00 first", len(many), got, maxWatched)
	}
}

// up is a dependency that answers, or fails with err.
func up(name string, err error) Dependency {
	return Dependency{Name: name, Ping: func(context.Context) error { return err }}
}

// gather collects c once through a pedantic registry (which checks every
// metric against its description) and returns each series' value, keyed
// as the text exposition writes it: name{label="value",...}, labels sorted.
func gather(t *testing.T, c *Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	out := map[string]float64{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := fam.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// saleSeries are the series of sale s1 with SKU "a" as the collector
// reports them: redis and postgres counters (available, held, sold), drift,
// pending intents, lag and overdue holds, both dependencies up, no errors.
func saleSeries(redis, postgres, drift Counts, pending int, lag float64, overdue int) map[string]float64 {
	out := map[string]float64{
		`flashgate_origin_dependency_up{dependency="postgres"}`: 1,
		`flashgate_origin_dependency_up{dependency="redis"}`:    1,
		`flashgate_sale_books_errors_total{sale="s1"}`:          0,
		`flashgate_sale_pending_intents{sale="s1"}`:             float64(pending),
		`flashgate_sale_writer_lag_seconds{sale="s1"}`:          lag,
		`flashgate_sale_overdue_holds{sale="s1"}`:               float64(overdue),
	}
	for _, b := range []struct {
		book string
		c    Counts
	}{{"redis", redis}, {"postgres", postgres}} {
		out[`flashgate_sale_units{book="`+b.book+`",sale="s1",sku="a",state="available"}`] = float64(b.c.Available)
		out[`flashgate_sale_units{book="`+b.book+`",sale="s1",sku="a",state="held"}`] = float64(b.c.Held)
		out[`flashgate_sale_units{book="`+b.book+`",sale="s1",sku="a",state="sold"}`] = float64(b.c.Sold)
	}
	out[`flashgate_sale_drift_units{sale="s1",sku="a",state="available"}`] = float64(drift.Available)
	out[`flashgate_sale_drift_units{sale="s1",sku="a",state="held"}`] = float64(drift.Held)
	out[`flashgate_sale_drift_units{sale="s1",sku="a",state="sold"}`] = float64(drift.Sold)
	return out
}

func diff(got, want map[string]float64) string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("missing %s (want %v)", k, v))
		} else if g != v {
			out = append(out, fmt.Sprintf("%s = %v, want %v", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("unexpected %s = %v", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// The collector reports the books as Books has them: with no order writer
// running, two reserves are pending intents (no drift), aged from the
// oldest one's stream id; a hold long past its expiry is overdue; a
// change made to Redis behind the origin's back is drift.
func TestCollectorReportsTheBooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 5))
	u1, u2 := f.reserve(t, "s1", "u1"), f.reserve(t, "s1", "u2")
	msgs, err := f.env.Redis.XRange(ctx, f.store.Keys().Intents("s1"), "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("intents stream = %v, %v; want two entries", msgs, err)
	}
	oldest, err := checkout.EntryTime(msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	f.opts.Clock = clock.NewFake(oldest.Add(7500 * time.Millisecond))
	c := NewCollector(f.Service, up("redis", nil), up("postgres", nil))

	redisBook, postgresBook := Counts{Available: 3, Held: 2}, Counts{Available: 5}
	if d := diff(gather(t, c), saleSeries(redisBook, postgresBook, Counts{}, 2, 7.5, 0)); d != "" {
		t.Errorf("with two intents pending:\n%s", d)
	}
	if b, err := f.Books(ctx, "s1"); err != nil || b.WriterLagSeconds != 7.5 {
		t.Errorf("ledger answer's writer_lag_s = %+v, %v; want 7.5", b.WriterLagSeconds, err)
	}

	// In the expiry index, u1's hold expired 11 s ago and u2's 5 s ago
	// (by Redis's clock, this machine's): only u1's is overdue.
	now := time.Now()
	if n, err := f.env.Redis.ZAddXX(ctx, f.store.Keys().Holds("s1"),
		redis.Z{Score: float64(now.Add(-11 * time.Second).UnixMilli()), Member: u1},
		redis.Z{Score: float64(now.Add(-5 * time.Second).UnixMilli()), Member: u2}).Result(); err != nil || n != 0 {
		t.Fatalf("ZADD XX = %d, %v; want both holds moved, none added", n, err)
	}
	if n, err := f.env.Redis.ZCard(ctx, f.store.Keys().Holds("s1")).Result(); err != nil || n != 2 {
		t.Fatalf("holds index = %d, %v; want both holds", n, err)
	}
	if d := diff(gather(t, c), saleSeries(redisBook, postgresBook, Counts{}, 2, 7.5, 1)); d != "" {
		t.Errorf("with u1's hold overdue:\n%s", d)
	}

	// Three units appear in Redis that no intent explains.
	if err := f.env.Redis.HIncrBy(ctx, f.store.Keys().Inventory("s1", "a"), "available", 3).Err(); err != nil {
		t.Fatal(err)
	}
	if d := diff(gather(t, c), saleSeries(Counts{Available: 6, Held: 2}, postgresBook, Counts{Available: 3}, 2, 7.5, 1)); d != "" {
		t.Errorf("with 3 units added to redis:\n%s", d)
	}
}

// Books that cannot be read count an error and leave their gauges out: all
// sales' while a dependency does not answer, one sale's when only its
// books fail. A sale no longer watched takes its error count away.
func TestCollectorLeavesOutBooksItCannotRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 5))
	f.create(t, f.openSale("s2", 5))
	down := errors.New("connection refused")

	c := NewCollector(f.Service, up("redis", down), up("postgres", nil))
	for i := 1; i <= 2; i++ {
		want := map[string]float64{
			`flashgate_origin_dependency_up{dependency="postgres"}`: 1,
			`flashgate_origin_dependency_up{dependency="redis"}`:    0,
			`flashgate_sale_books_errors_total{sale="s1"}`:          float64(i),
			`flashgate_sale_books_errors_total{sale="s2"}`:          float64(i),
		}
		if d := diff(gather(t, c), want); d != "" {
			t.Errorf("scrape %d with redis down:\n%s", i, d)
		}
	}

	// Redis answers, but s2's inventory key is not a hash: s2's books
	// fail, s1's are reported.
	c = NewCollector(f.Service, up("redis", nil), up("postgres", nil))
	if err := f.env.Redis.Set(ctx, f.store.Keys().Inventory("s2", "a"), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	want := saleSeries(Counts{Available: 5}, Counts{Available: 5}, Counts{}, 0, 0, 0)
	want[`flashgate_sale_books_errors_total{sale="s2"}`] = 1
	if d := diff(gather(t, c), want); d != "" {
		t.Errorf("with s2's books unreadable:\n%s", d)
	}

	// Both sales ended over an hour ago: nothing is watched, and their
	// error counts are gone.
	f.opts.Clock = clock.NewFake(f.now.Add(3 * time.Hour))
	got := gather(t, c)
	if keys := slices.Sorted(maps.Keys(got)); len(keys) != 2 || !strings.HasPrefix(keys[0], "flashgate_origin_dependency_up") ||
		!strings.HasPrefix(keys[1], "flashgate_origin_dependency_up") {
		t.Errorf("series once no sale is watched = %v, want the two dependency_up only", keys)
	}
}

// Scrapes may run at once: none loses another's error count.
func TestCollectorConcurrentScrapes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(t, f.openSale("s1", 5))
	c := NewCollector(f.Service, up("redis", errors.New("connection refused")), up("postgres", nil))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	const scrapes = 8
	var wg sync.WaitGroup
	errs := make(chan error, scrapes)
	for range scrapes {
		wg.Go(func() {
			_, err := reg.Gather()
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Gather = %v", err)
		}
	}
	if got := gather(t, c)[`flashgate_sale_books_errors_total{sale="s1"}`]; got != scrapes+1 {
		t.Errorf("books errors after %d concurrent scrapes and one more = %v, want %d", scrapes, got, scrapes+1)
	}
}
