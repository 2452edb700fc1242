package sales

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// fixture is a Service over the test's own Redis prefix and Postgres
// schema, with no order writer running: intents stay pending until a test
// says otherwise.
type fixture struct {
	*Service
	env      *testenv.Env
	store    *checkout.Store
	ledger   *ledger.Store
	reserver *checkout.Reserver
	registry *prometheus.Registry
	now      time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.New(t)
	ctx := context.Background()
	if err := ledger.Migrate(ctx, env.DB); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	opts, err := redis.ParseURL(env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	f := &fixture{env: env, store: checkout.NewStore(rdb, checkout.NewKeys(env.Prefix), time.Hour), ledger: ledger.New(env.DB),
		registry: prometheus.NewRegistry(), now: time.Now().UTC().Truncate(time.Second)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.reserver = checkout.NewReserver(f.store, checkout.ReserverOptions{Journal: f.ledger})
	t.Cleanup(f.reserver.Close)
	f.Service = New(f.store, f.ledger, catalog.New(f.ledger, quiet, 0), f.reserver,
		Options{CheckEvery: time.Second, MaxHoldsPerAccount: 2}, quiet, f.registry)
	return f
}

// openSale is a sale that started a minute ago with one SKU "a" of stock units.
func (f *fixture) openSale(id string, stock int) ledger.Sale {
	return ledger.Sale{ID: id, Name: "Sale " + id, StartsAt: f.now.Add(-time.Minute), EndsAt: f.now.Add(time.Hour),
		HoldTTL: 10 * time.Minute, PerAccountLimit: 1,
		SKUs: []ledger.SKU{{SKU: "a", Name: "A", PriceMinor: 100, Currency: "INR", Stock: stock}}}
}

func (f *fixture) create(t *testing.T, sale ledger.Sale) {
	t.Helper()
	if created, err := f.Create(context.Background(), sale); err != nil || !created {
		t.Fatalf("Create(%s) = %v, %v; want created", sale.ID, created, err)
	}
}

func (f *fixture) reserve(t *testing.T, sale, account string) string {
	t.Helper()
	res, err := f.reserver.Reserve(context.Background(), checkout.ReserveRequest{Sale: sale, SKU: "a", Account: account,
		TokenID: "jti-" + account, IdempotencyKey: "k-" + account, HoldTTL: 10 * time.Minute})
	if err != nil || res.Outcome != checkout.Created {
		t.Fatalf("Reserve(%s) = %+v, %v; want created", account, res, err)
	}
	return res.ReservationID
}

func (f *fixture) books(t *testing.T, sale string) (Books, SKUBooks) {
	t.Helper()
	b, err := f.Books(context.Background(), sale)
	if err != nil || len(b.SKUs) != 1 {
		t.Fatalf("Books(%s) = %+v, %v", sale, b, err)
	}
	return b, b.SKUs[0]
}

// counter reads a counter the service registered: the one whose label is
// label, or the only one when label is "".
func (f *fixture) counter(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestCreateLoadsRedisOnceAndRefusesAnotherDefinition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sale := f.openSale("s1", 5)
	f.create(t, sale)
	b, k := f.books(t, "s1")
	if want := (Counts{Available: 5}); k.Redis != want || k.DB != want || k.Drift != (Counts{}) || k.Total != 5 {
		t.Errorf("books after Create = %+v, want 5 available in Redis and Postgres, no drift", k)
	}
	if b.Epoch == "" || b.RedisEpoch != b.Epoch {
		t.Errorf("epochs after Create: postgres %q, redis %q; want the same, set", b.Epoch, b.RedisEpoch)
	}
	if created, err := f.Create(ctx, sale); err != nil || created {
		t.Errorf("Create(same definition) = %v, %v; want not created, no error", created, err)
	}
	if again, _ := f.books(t, "s1"); again.RedisEpoch != b.RedisEpoch {
		t.Errorf("a repeated Create moved the epoch from %q to %q", b.RedisEpoch, again.RedisEpoch)
	}
	other := sale
	other.Name = "Another sale"
	if _, err := f.Create(ctx, other); !errors.Is(err, ledger.ErrSaleExists) {
		t.Errorf("Create(another definition, same id) = %v, want ledger.ErrSaleExists", err)
	}
	if _, err := f.Books(ctx, "nope"); !errors.Is(err, catalog.ErrUnknownSale) {
		t.Errorf("Books(unknown sale) = %v, want catalog.ErrUnknownSale", err)
	}
}

// The books count an intent Postgres has not applied yet as pending, not as
// drift.
func TestBooksCountPendingIntentsApartFromDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(t, f.openSale("s1", 5))
	f.reserve(t, "s1", "u1")
	_, k := f.books(t, "s1")
	switch {
	case k.Redis != (Counts{Available: 4, Held: 1}), k.DB != (Counts{Available: 5}):
		t.Errorf("books = redis %+v db %+v, want redis 4 available 1 held, db 5 available", k.Redis, k.DB)
	case k.Pending != (Counts{Available: -1, Held: 1}) || k.PendingIntents != 1:
		t.Errorf("pending = %+v (%d intents), want -1 available +1 held, 1 intent", k.Pending, k.PendingIntents)
	case k.Drift != (Counts{}):
		t.Errorf("drift = %+v, want none", k.Drift)
	}
}

func TestBooksSaySinceWhenSoldOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(t, f.openSale("s1", 2))
	held := f.reserve(t, "s1", "u1")
	if _, k := f.books(t, "s1"); k.LastZeroAt != nil || k.ReturnedAt != nil {
		t.Fatalf("a unit left: last zero at %v, returned at %v; want neither", k.LastZeroAt, k.ReturnedAt)
	}
	f.reserve(t, "s1", "u2")
	_, k := f.books(t, "s1")
	if k.LastZeroAt == nil || time.Since(*k.LastZeroAt).Abs() > 5*time.Second {
		t.Fatalf("the last unit taken: last zero at %v, want about now", k.LastZeroAt)
	}
	zero := *k.LastZeroAt
	if n, err := f.store.Cancel(context.Background(), "s1", []checkout.Hold{{ID: held, SKU: "a", Account: "u1", ReturnUnit: true}}); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	if _, k := f.books(t, "s1"); k.LastZeroAt == nil || !k.LastZeroAt.Equal(zero) || !k.FirstZeroAt.Equal(zero) || k.ReturnedAt == nil || k.ReturnedAt.Before(zero) {
		t.Errorf("a unit back: last zero at %v, returned at %v; want the zero kept, returned since", k.LastZeroAt, k.ReturnedAt)
	}
}

func TestSnapshotStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 1))
	at := func(now time.Time) Snapshot {
		t.Helper()
		f.opts.Clock = clock.NewFake(now)
		snap, err := f.Snapshot(ctx, "s1")
		if err != nil {
			t.Fatalf("Snapshot = %v", err)
		}
		return snap
	}
	if s := at(f.now.Add(-2 * time.Minute)); s.Status != Upcoming {
		t.Errorf("status before the start = %s, want %s", s.Status, Upcoming)
	}
	if s := at(f.now); s.Status != Open || s.SoldOut || s.Stock["a"].Available != 1 {
		t.Errorf("snapshot while open = %+v, want open with 1 available", s)
	}
	f.reserve(t, "s1", "u1")
	if s := at(f.now); s.Status != SoldOut || !s.SoldOut || s.Final {
		t.Errorf("snapshot with the only unit held = %+v, want sold_out, not final (the hold may come back)", s)
	}
	if s := at(f.now.Add(2 * time.Hour)); s.Status != Ended {
		t.Errorf("status after the end = %s, want %s", s.Status, Ended)
	}
	if _, err := f.Snapshot(ctx, "nope"); !errors.Is(err, catalog.ErrUnknownSale) {
		t.Errorf("Snapshot(unknown sale) = %v, want catalog.ErrUnknownSale", err)
	}
}

func TestReservationWhereverItStands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 5))
	id := f.reserve(t, "s1", "u1")
	if r, err := f.Reservation(ctx, id); err != nil || r.ID != id || r.Account != "u1" || r.Status != intent.Held {
		t.Errorf("Reservation(live) = %+v, %v; want u1's held reservation", r, err)
	}
	if r, err := f.AccountReservation(ctx, "u1", id); err != nil || r.ID != id {
		t.Errorf("AccountReservation(owner) = %+v, %v", r, err)
	}
	for name, lookup := range map[string]func() error{
		"another account's": func() error { _, err := f.AccountReservation(ctx, "u2", id); return err },
		"an unknown id":     func() error { _, err := f.Reservation(ctx, "r_0123456789abcdef_s1"); return err },
		"an id without a sale": func() error {
			_, err := f.Reservation(ctx, "nonsense")
			return err
		},
	} {
		if err := lookup(); !errors.Is(err, ErrUnknownReservation) {
			t.Errorf("Reservation(%s) = %v, want ErrUnknownReservation", name, err)
		}
	}
	// Redis loses the hold before Postgres applied it: the journal still
	// has it, so it is "not now", not "no such reservation".
	if err := f.env.Redis.Del(ctx, f.store.Keys().Reservation("s1", id)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Reservation(ctx, id); !errors.Is(err, ErrRestoring) {
		t.Errorf("Reservation(journaled, lost by redis) = %v, want ErrRestoring", err)
	}
}

// A Redis that lost a sale entirely (a hold it granted included) is found
// out by the check, reported, and rebuilt from Postgres and the journal.
func TestCheckRestoresASaleRedisLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 5))
	f.create(t, f.openSale("s2", 3))
	id := f.reserve(t, "s1", "u1")
	if _, err := testenv.LoseKeys(ctx, f.env.Redis, f.env.Prefix+"{s:s1}"); err != nil {
		t.Fatal(err)
	}
	if s, err := f.Snapshot(ctx, "s1"); err != nil || s.Stock["a"].Available != 5 || s.SoldOut {
		t.Errorf("Snapshot with the sale gone from redis = %+v, %v; want postgres's 5 available, never sold out", s, err)
	}
	if err := f.CheckCurrent(ctx, 0); err != nil {
		t.Fatalf("CheckCurrent = %v", err)
	}
	b, k := f.books(t, "s1")
	if want := (Counts{Available: 4, Held: 1}); k.Redis != want || k.DB != want || k.Drift != (Counts{}) {
		t.Errorf("books after the check = redis %+v db %+v drift %+v, want 4 available 1 held in both", k.Redis, k.DB, k.Drift)
	}
	if len(b.Losses) != 1 || b.Losses[0].Kind != ledger.LossStateMissing || b.Losses[0].Restored != 1 || b.Losses[0].RebuiltAt == nil || b.Restored != 1 {
		t.Errorf("losses = %+v (restored %d), want one state_missing, rebuilt, 1 hold restored", b.Losses, b.Restored)
	}
	if got := f.counter(t, "flashgate_redis_losses_total", string(ledger.LossStateMissing)); got != 1 {
		t.Errorf("flashgate_redis_losses_total{kind=state_missing} = %v, want 1", got)
	}
	if got := f.counter(t, "flashgate_reservations_restored_total", ""); got != 1 {
		t.Errorf("flashgate_reservations_restored_total = %v, want 1", got)
	}
	if r, err := f.Reservation(ctx, id); err != nil || r.Status != intent.Held {
		t.Errorf("Reservation(restored) = %+v, %v; want held", r, err)
	}
	if b2, _ := f.books(t, "s2"); len(b2.Losses) != 0 {
		t.Errorf("the sale redis kept has losses %+v, want none", b2.Losses)
	}
	// Nothing is lost any more: a second check finds nothing to do.
	if err := f.CheckCurrent(ctx, 0); err != nil {
		t.Fatalf("CheckCurrent again = %v", err)
	}
	if b, _ := f.books(t, "s1"); len(b.Losses) != 1 {
		t.Errorf("losses after a second check = %d, want still 1", len(b.Losses))
	}
}

func TestRebuildOnRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.create(t, f.openSale("s1", 5))
	// Redis "forgets" two sold units.
	if err := f.env.Redis.HSet(ctx, f.store.Keys().Inventory("s1", "a"), "available", 3, "sold", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if _, k := f.books(t, "s1"); k.Drift != (Counts{Available: -2, Sold: 2}) {
		t.Fatalf("drift before the rebuild = %+v, want -2 available +2 sold", k.Drift)
	}
	// The caller's context is only lent: a rebuild outlives its request's budget.
	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()
	b, err := f.Rebuild(short, "s1")
	if err != nil || len(b.SKUs) != 1 || b.SKUs[0].Redis != (Counts{Available: 5}) || b.SKUs[0].Drift != (Counts{}) {
		t.Fatalf("Rebuild = %+v, %v; want redis back to 5 available, no drift", b, err)
	}

	token, err := f.store.BeginRebuild(ctx, "s1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.store.EndRebuild(ctx, "s1", token) }()
	_, err = f.Rebuild(ctx, "s1")
	if !errors.Is(err, ErrRebuildRunning) || errors.Is(err, checkout.ErrRebuildInProgress) {
		t.Errorf("Rebuild while another runs = %v, want ErrRebuildRunning (and not the shoppers' try-again)", err)
	}
	if _, err := f.Rebuild(ctx, "nope"); !errors.Is(err, catalog.ErrUnknownSale) {
		t.Errorf("Rebuild(unknown sale) = %v, want catalog.ErrUnknownSale", err)
	}
}
