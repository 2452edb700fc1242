package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

type saleList []string

func (s saleList) SaleIDs() []string { return s }

// fixture is one sale with a single SKU "a", in Redis and Postgres, and the
// stores the writer works with, built directly.
type fixture struct {
	env    *testenv.Env
	rdb    *redis.Client
	redis  *checkout.Store
	ledger *ledger.Store
	sale   string
}

// newFixture creates the sale with stock units in Postgres and loads Redis
// with redisStock units (equal to stock unless a test wants drift).
func newFixture(t *testing.T, stock, redisStock int) *fixture {
	t.Helper()
	env := testenv.New(t)
	ctx := context.Background()
	opts, err := redis.ParseURL(env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := ledger.Migrate(ctx, env.DB); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	f := &fixture{env: env, rdb: rdb, redis: checkout.NewStore(rdb, checkout.NewKeys(env.Prefix), 0),
		ledger: ledger.New(env.DB), sale: "w-" + testenv.RandomHex(3)}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := f.ledger.CreateSale(ctx, ledger.Sale{
		ID: f.sale, Name: "Sale", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), HoldTTL: 10 * time.Minute, PerAccountLimit: 1,
		SKUs: []ledger.SKU{{SKU: "a", Name: "A", PriceMinor: 100, Currency: "INR", Stock: stock}},
	}); err != nil {
		t.Fatalf("CreateSale = %v", err)
	}
	rs := int64(redisStock)
	if _, err := f.redis.Load(ctx, f.sale, "e1", map[string]intent.Stock{"a": {Total: rs, Available: rs}}); err != nil {
		t.Fatalf("Load = %v", err)
	}
	// The group a writer makes when it takes the lease, made now so the
	// tests can read the pending list before any writer has run.
	if err := f.redis.EnsureGroup(ctx, f.sale); err != nil {
		t.Fatalf("EnsureGroup = %v", err)
	}
	return f
}

// reserve takes n units in Redis for accounts u0..u(n-1); every one must be created.
func (f *fixture) reserve(t *testing.T, n int) []string {
	t.Helper()
	r := checkout.NewReserver(f.redis, checkout.ReserverOptions{})
	defer r.Close()
	ids := make([]string, n)
	for i := range n {
		res, err := r.Reserve(context.Background(), checkout.ReserveRequest{
			Sale: f.sale, SKU: "a", Account: fmt.Sprintf("u%d", i), TokenID: fmt.Sprintf("jti-%d", i),
			IdempotencyKey: "k", HoldTTL: 10 * time.Minute,
		})
		if err != nil || res.Outcome != checkout.Created {
			t.Fatalf("Reserve(u%d) = %+v, %v; want created", i, res, err)
		}
		ids[i] = res.ReservationID
	}
	return ids
}

// writer builds a writer over the fixture's stores with its own registry.
func (f *fixture) writer(consumer string, claimIdle time.Duration) (*Writer, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	w := NewWriter(f.redis, f.ledger, saleList{f.sale}, WriterOptions{
		Consumer: consumer, BatchSize: 10, Block: 50 * time.Millisecond, ClaimIdle: claimIdle,
		Retry: 20 * time.Millisecond, Discover: 50 * time.Millisecond,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	return w, reg
}

// run starts w and returns its cancel function and a channel closed when
// Run has returned; t.Cleanup stops it too.
func run(t *testing.T, w *Writer) (context.CancelFunc, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	return cancel, runCtx(t, w, ctx, cancel)
}

func runCtx(t *testing.T, w *Writer, ctx context.Context, cancel context.CancelFunc) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done
}

func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Run did not return within 10 s", what)
	}
}

// metric reads a counter of reg, by name and optional result label.
func metric(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := result == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					match = true
				}
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func (f *fixture) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	if err := f.env.DB.QueryRow(context.Background(), query, f.sale).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f *fixture) pending(t *testing.T) int64 {
	t.Helper()
	p, err := f.rdb.XPending(context.Background(), f.redis.Keys().Intents(f.sale), checkout.WriterGroup).Result()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	return p.Count
}

func (f *fixture) stock(t *testing.T) (intent.Stock, intent.Stock) {
	t.Helper()
	ctx := context.Background()
	db, err := f.ledger.Inventory(ctx, f.sale)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := f.redis.Inventory(ctx, f.sale, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	return db["a"], rs["a"]
}

// waitApplied polls until n intents are applied and nothing is pending.
func (f *fixture) waitApplied(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, fmt.Sprintf("%d intents applied, 0 pending", n), func() bool {
		return f.count(t, `SELECT count(*) FROM applied_intents WHERE sale_id = $1`) == n && f.pending(t) == 0
	})
}

// checkExactlyOnce asserts that the stream's n reserves are in Postgres once
// each and that Redis and Postgres agree.
func (f *fixture) checkExactlyOnce(t *testing.T, n int) {
	t.Helper()
	if got := f.rdb.XLen(context.Background(), f.redis.Keys().Intents(f.sale)).Val(); got != int64(n) {
		t.Errorf("XLEN intents = %d, want %d", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM applied_intents WHERE sale_id = $1`); got != n {
		t.Errorf("applied_intents rows = %d, want %d (the stream's length)", got, n)
	}
	if got := f.count(t, `SELECT count(DISTINCT reservation_id) FROM reservations WHERE sale_id = $1 AND status = 'held'`); got != n {
		t.Errorf("held reservations in Postgres = %d, want %d", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM reservations WHERE sale_id = $1`); got != n {
		t.Errorf("reservation rows = %d, want %d", got, n)
	}
	db, rs := f.stock(t)
	if db.Held != int64(n) || db.Available+db.Held+db.Sold != db.Total {
		t.Errorf("Postgres inventory = %+v, want held %d", db, n)
	}
	if rs.Available != db.Available || rs.Held != db.Held || rs.Sold != db.Sold || rs.Total != db.Total {
		t.Errorf("Redis %+v and Postgres %+v differ with nothing pending; want no drift", rs, db)
	}
	if p := f.pending(t); p != 0 {
		t.Errorf("XPENDING = %d entries, want 0", p)
	}
}

// A writer that dies between its commit and its acknowledgement leaves a
// committed batch in its pending list. Whoever picks the batch up again,
// the same consumer after a restart or another one by XAUTOCLAIM, finds it
// already applied: every intent counts exactly once.
func TestWriterKilledAfterCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		consumer  string
		claimIdle time.Duration
	}{
		{"restart under the same name", "w1", time.Minute},
		{"claimed by another writer", "w2", 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const n = 45
			f := newFixture(t, 100, 100)
			f.reserve(t, n)

			w1, _ := f.writer("w1", time.Minute)
			var commits atomic.Int32
			ctx1, cancel1 := context.WithCancel(context.Background())
			w1.afterCommit = func(context.Context) {
				commits.Add(1)
				cancel1() // killed right after the commit, before the XACK
			}
			done1 := runCtx(t, w1, ctx1, cancel1)
			waitDone(t, done1, "killed writer")
			if got := commits.Load(); got != 1 {
				t.Fatalf("commits before the kill = %d, want 1", got)
			}
			if got := f.count(t, `SELECT count(*) FROM applied_intents WHERE sale_id = $1`); got != 10 {
				t.Fatalf("applied intents after the kill = %d, want the first batch, 10", got)
			}
			if got := f.pending(t); got != 10 {
				t.Fatalf("XPENDING after the kill = %d, want the committed but unacknowledged 10", got)
			}

			w2, reg := f.writer(c.consumer, c.claimIdle)
			run(t, w2)
			f.waitApplied(t, n)
			f.checkExactlyOnce(t, n)
			if got := metric(t, reg, "flashgate_writer_intents_total", "duplicate"); got != 10 {
				t.Errorf("intents the second writer found already applied = %v, want 10", got)
			}
			if got := metric(t, reg, "flashgate_writer_intents_total", "applied"); got != n-10 {
				t.Errorf("intents the second writer applied = %v, want %d", got, n-10)
			}
		})
	}
}

// A writer whose transaction fails commits nothing: its batch stays pending
// and is applied once when a writer (the same after a restart, or another
// by XAUTOCLAIM) takes it up again.
func TestWriterKilledBeforeCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		consumer  string
		claimIdle time.Duration
	}{
		{"restart under the same name", "w1", time.Minute},
		{"claimed by another writer", "w2", 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const n = 25
			f := newFixture(t, 100, 100)
			f.reserve(t, n)
			ctx := context.Background()
			// Every stock change fails inside the transaction, after the
			// batch's intent ids and reservation rows were written.
			if _, err := f.env.DB.Exec(ctx, `
				CREATE FUNCTION fail_apply() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected failure'; END $$;
				CREATE TRIGGER fail_apply BEFORE UPDATE ON inventory FOR EACH ROW EXECUTE FUNCTION fail_apply();`); err != nil {
				t.Fatal(err)
			}
			w1, reg1 := f.writer("w1", time.Minute)
			cancel1, done1 := run(t, w1)
			testenv.Eventually(t, 10*time.Second, "the writer failing a batch twice", func() bool {
				return metric(t, reg1, "flashgate_writer_batch_failures_total", "") >= 2
			})
			cancel1()
			waitDone(t, done1, "failing writer")
			if got := f.count(t, `SELECT count(*) FROM applied_intents WHERE sale_id = $1`); got != 0 {
				t.Errorf("applied intents after failed batches = %d, want 0 (nothing committed)", got)
			}
			if got := f.count(t, `SELECT count(*) FROM reservations WHERE sale_id = $1`); got != 0 {
				t.Errorf("reservation rows after failed batches = %d, want 0", got)
			}
			if db, _ := f.stock(t); db.Available != 100 || db.Held != 0 {
				t.Errorf("Postgres inventory after failed batches = %+v, want untouched", db)
			}
			if got := f.pending(t); got != 10 {
				t.Errorf("XPENDING after failed batches = %d, want the batch in hand, 10", got)
			}
			if _, err := f.env.DB.Exec(ctx, `DROP TRIGGER fail_apply ON inventory`); err != nil {
				t.Fatal(err)
			}

			w2, reg := f.writer(c.consumer, c.claimIdle)
			run(t, w2)
			f.waitApplied(t, n)
			f.checkExactlyOnce(t, n)
			if got := metric(t, reg, "flashgate_writer_intents_total", "applied"); got != n {
				t.Errorf("intents the second writer applied = %v, want %d", got, n)
			}
			if got := metric(t, reg, "flashgate_writer_intents_total", "duplicate"); got != 0 {
				t.Errorf("intents the second writer found already applied = %v, want 0", got)
			}
		})
	}
}

// When Redis counted more units than Postgres has, Postgres has the last
// word: the writer refuses the excess, in stream order, and cancels those
// holds in Redis without returning their units.
func TestWriterCancelsWhatPostgresRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5, 8)
	ids := f.reserve(t, 8)
	w, reg := f.writer("w1", time.Minute)
	run(t, w)
	f.waitApplied(t, 8)

	ctx := context.Background()
	testenv.Eventually(t, 10*time.Second, "3 reserves refused", func() bool {
		return metric(t, reg, "flashgate_writer_refused_total", "") >= 3
	})
	if got := metric(t, reg, "flashgate_writer_refused_total", ""); got != 3 {
		t.Errorf("refused reserves = %v, want 3", got)
	}
	for i, id := range ids {
		want := intent.Held
		if i >= 5 {
			want = intent.Cancelled
		}
		r, err := f.redis.Reservation(ctx, f.sale, id)
		if err != nil || r.Status != want {
			t.Errorf("Redis reservation %d = %+v, %v; want %s", i, r, err, want)
		}
		row, err := f.ledger.Reservation(ctx, id)
		if err != nil || row.Status != want {
			t.Errorf("Postgres reservation %d = %+v, %v; want %s", i, row, err, want)
		}
		if i >= 5 {
			if n := f.rdb.HExists(ctx, f.redis.Keys().Account(f.sale, fmt.Sprintf("u%d", i)), "res").Val(); n {
				t.Errorf("account u%d still names a live hold after its reserve was refused", i)
			}
			if _, err := f.rdb.ZScore(ctx, f.redis.Keys().Holds(f.sale), id).Result(); err != redis.Nil {
				t.Errorf("refused hold %d still in the expiry index (err %v)", i, err)
			}
		}
	}
	db, rs := f.stock(t)
	if db != (intent.Stock{Total: 5, Held: 5}) {
		t.Errorf("Postgres inventory = %+v, want total 5, held 5", db)
	}
	if rs != (intent.Stock{Total: 8, Held: 5}) {
		t.Errorf("Redis inventory = %+v, want total 8, available 0, held 5 (the phantom units are gone, not returned)", rs)
	}
}

// One intent Postgres refuses for good does not hold back the sale: the
// writer applies the others, parks that one with its reason, and goes on.
func TestWriterParksAnIntentPostgresRefusesForGood(t *testing.T) {
	t.Parallel()
	const n = 6
	f := newFixture(t, 100, 100)
	f.reserve(t, n)
	ctx := context.Background()
	// Postgres refuses the reservation of u3, and only that one.
	if _, err := f.env.DB.Exec(ctx, `
		CREATE FUNCTION refuse_u3() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.account_id = 'u3' THEN RAISE EXCEPTION 'u3 is refused'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_u3 BEFORE INSERT ON reservations FOR EACH ROW EXECUTE FUNCTION refuse_u3();`); err != nil {
		t.Fatal(err)
	}
	w, reg := f.writer("w1", time.Minute)
	run(t, w)
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the writer settling: nothing pending, %d applied", n), func() bool {
		return f.pending(t) == 0 && f.count(t, `SELECT count(*) FROM applied_intents WHERE sale_id = $1`) == n
	})
	if got := metric(t, reg, "flashgate_writer_parked_total", ""); got != 1 {
		t.Errorf("parked intents = %v, want 1", got)
	}
	if got := f.count(t, `SELECT count(*) FROM parked_intents WHERE sale_id = $1 AND reason LIKE '%u3 is refused%'`); got != 1 {
		t.Errorf("parked_intents rows for u3 = %d, want 1", got)
	}
	if got := f.count(t, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND status = 'held'`); got != n-1 {
		t.Errorf("held reservations = %d, want %d (all but u3)", got, n-1)
	}
	if db, _ := f.stock(t); db.Held != n-1 || db.Available != 100-(n-1) {
		t.Errorf("Postgres inventory = %+v, want held %d", db, n-1)
	}
}
