package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redisserver"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// scrape reads GET /metrics on the admin listener once and returns every
// series by its exposition name ("name{label=...}"). Unlike metric, it
// tells a series at 0 from one left out, which the books' gauges are when
// they cannot be read.
func scrape(t *testing.T, o *origintest.Origin) map[string]float64 {
	t.Helper()
	status, body := o.DoAdmin(t, origintest.Request{Method: "GET", Path: "/metrics", Token: origintest.AdminToken})
	if status != 200 {
		t.Fatalf("GET /metrics = %d", status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// saleBooks are the series of one sale's books on SKU sku-1, as the
// origin exposes them.
type saleBooks struct {
	redis, postgres, drift origintest.Counts
	pending, overdue       float64
	lagAtMost              float64 // the lag is checked to be in [0, lagAtMost]
}

// checkBooks fails t unless the scrape has sale's series as want says.
func checkBooks(t *testing.T, got map[string]float64, sale string, want saleBooks) {
	t.Helper()
	check := func(series string, v float64) {
		t.Helper()
		if g, ok := got[series]; !ok || g != v {
			t.Errorf("%s = %v (reported: %v), want %v", series, g, ok, v)
		}
	}
	for _, b := range []struct {
		book string
		c    origintest.Counts
	}{{"redis", want.redis}, {"postgres", want.postgres}} {
		for state, v := range map[string]int64{"available": b.c.Available, "held": b.c.Held, "sold": b.c.Sold} {
			check(fmt.Sprintf(`flashgate_sale_units{book=%q,sale=%q,sku="sku-1",state=%q}`, b.book, sale, state), float64(v))
		}
	}
	for state, v := range map[string]int64{"available": want.drift.Available, "held": want.drift.Held, "sold": want.drift.Sold} {
		check(fmt.Sprintf(`flashgate_sale_drift_units{sale=%q,sku="sku-1",state=%q}`, sale, state), float64(v))
	}
	check(fmt.Sprintf(`flashgate_sale_pending_intents{sale=%q}`, sale), want.pending)
	check(fmt.Sprintf(`flashgate_sale_overdue_holds{sale=%q}`, sale), want.overdue)
	lag := fmt.Sprintf(`flashgate_sale_writer_lag_seconds{sale=%q}`, sale)
	if g, ok := got[lag]; !ok || g < 0 || g > want.lagAtMost {
		t.Errorf("%s = %v (reported: %v), want within [0, %v]", lag, g, ok, want.lagAtMost)
	}
}

// The origin's /metrics carries a sale's books as its ledger answer does:
// both books' units, no drift once the order writer has applied every
// intent (none pending, no lag), no overdue hold until one's expiry is long
// past (the origin's own sweeper is held off; run by hand, it clears it),
// and drift when Redis is changed behind the origin's back.
func TestSaleMetricsShowTheBooks(t *testing.T) {
	t.Parallel()
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env, func(c *app.Config) { c.SweepInterval = time.Hour })
	sale := "metrics-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 5, 600))
	ids := map[string]string{}
	for _, account := range []string{"alice", "bob"} {
		s, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, account), "sku-1", "k-"+account)
		if s != 201 {
			t.Fatalf("Reserve(%s) = %d %+v, want 201", account, s, r)
		}
		ids[account] = r.ReservationID
	}
	applied := func(held int64) {
		t.Helper()
		o.WaitLedger(t, sale, 15*time.Second, func(l map[string]origintest.LedgerSKU) bool {
			return l["sku-1"].PendingIntents == 0 && l["sku-1"].DB.Held == held
		})
	}
	applied(2)
	got := scrape(t, o)
	twoHeld := origintest.Counts{Available: 3, Held: 2}
	checkBooks(t, got, sale, saleBooks{redis: twoHeld, postgres: twoHeld})
	for series, want := range map[string]float64{
		`flashgate_origin_dependency_up{dependency="redis"}`:     1,
		`flashgate_origin_dependency_up{dependency="postgres"}`:  1,
		`flashgate_sale_books_errors_total{sale="` + sale + `"}`: 0,
	} {
		if g, ok := got[series]; !ok || g != want {
			t.Errorf("%s = %v (reported: %v), want %v", series, g, ok, want)
		}
	}

	// The sweeper falls behind: alice's hold expired 11 s ago.
	ctx := context.Background()
	keys := o.App.Checkout.Keys()
	expired := time.Now().Add(-11 * time.Second).UnixMilli()
	if err := env.Redis.HSet(ctx, keys.Reservation(sale, ids["alice"]), "expires_ms", expired).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := env.Redis.ZAddXX(ctx, keys.Holds(sale), redis.Z{Score: float64(expired), Member: ids["alice"]}).Result(); err != nil || n != 0 {
		t.Fatalf("ZADD XX = %d, %v; want alice's hold moved", n, err)
	}
	checkBooks(t, scrape(t, o), sale, saleBooks{redis: twoHeld, postgres: twoHeld, overdue: 1})
	if n := o.App.Sweeper.Sweep(ctx); n != 1 {
		t.Fatalf("Sweep = %d, want alice's hold released", n)
	}
	applied(1)
	oneHeld := origintest.Counts{Available: 4, Held: 1}
	checkBooks(t, scrape(t, o), sale, saleBooks{redis: oneHeld, postgres: oneHeld})

	// Three units appear in Redis that no intent explains.
	if err := env.Redis.HIncrBy(ctx, keys.Inventory(sale, "sku-1"), "available", 3).Err(); err != nil {
		t.Fatal(err)
	}
	checkBooks(t, scrape(t, o), sale, saleBooks{redis: origintest.Counts{Available: 7, Held: 1}, postgres: oneHeld,
		drift: origintest.Counts{Available: 3}})
}

// An origin whose Redis is gone reports it down, and counts an error for
// each sale's books instead of reporting them, scrape after scrape.
func TestSaleMetricsWithoutRedis(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("this test runs a redis-server of its own (redis-server on PATH): %v", err)
	}
	t.Cleanup(srv.Kill)
	env := origintest.NewEnv(t)
	o := origintest.StartOrigin(t, env, func(c *app.Config) { c.RedisURL = srv.URL })
	sale := "nordis-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 5, 600))
	units := `flashgate_sale_units{book="redis",sale="` + sale + `",sku="sku-1",state="available"}`
	redisUp := `flashgate_origin_dependency_up{dependency="redis"}`
	postgresUp := `flashgate_origin_dependency_up{dependency="postgres"}`
	errs := `flashgate_sale_books_errors_total{sale="` + sale + `"}`
	if got := scrape(t, o); got[units] != 5 || got[redisUp] != 1 || got[errs] != 0 {
		t.Fatalf("before redis stops: %s = %v, %s = %v, %s = %v; want 5, 1, 0", units, got[units], redisUp, got[redisUp], errs, got[errs])
	}

	srv.Kill()
	for i := 1; i <= 2; i++ {
		got := scrape(t, o)
		for series, want := range map[string]float64{redisUp: 0, postgresUp: 1, errs: float64(i)} {
			if g, ok := got[series]; !ok || g != want {
				t.Errorf("scrape %d without redis: %s = %v (reported: %v), want %v", i, series, g, ok, want)
			}
		}
		for series := range got {
			if strings.HasPrefix(series, "flashgate_sale_") && strings.Contains(series, `sale="`+sale+`"`) && series != errs {
				t.Errorf("scrape %d without redis reports %s = %v; want the sale's gauges left out", i, series, got[series])
			}
		}
	}
}
