package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// defaultScaling is the crowd sizes make bench-scaling plays
// (deploy/local/scaling.sh).
const defaultScaling = "20000,100000"

// parseSizes reads "20000,100000" into crowd sizes, smallest first.
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number of shoppers", f)
		}
		if slices.Contains(sizes, n) {
			return nil, fmt.Errorf("size %d given twice", n)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return sizes, nil
}

// scalingCommand is how the scaling run was started, for the report: make
// bench-scaling passes -scaling with the default sizes, then SCALING_FLAGS.
func scalingCommand(args []string) string {
	if len(args) < 2 || args[0] != "-scaling" || args[1] != defaultScaling {
		return "bin/crowd " + strings.Join(args, " ")
	}
	if rest := args[2:]; len(rest) > 0 {
		return "make bench-scaling SCALING_FLAGS='" + strings.Join(rest, " ") + "'"
	}
	return "make bench-scaling"
}

// scalingNotes say how the sizes were made comparable.
func scalingNotes(o options) []string {
	notes := []string{
		"Each size is a fresh flashgate sale, then the naive baseline's sale reset (both tables truncated, the same stock), " +
			"smallest crowd first; the scenario is the same but for the number of shoppers, so the stock, the admission rate, " +
			"the bots and how long the crowd may run are the same at every size.",
		"The CPU figures are the run's own processes over the time the crowd ran: its Redis and Postgres by their ports, " +
			"the edge, origin, sandbox gateway and naive server by name; work another client asks of the same Redis or " +
			"Postgres meanwhile counts too.",
	}
	if !o.Naive {
		notes = append(notes, "The naive baseline was not run (-naive=false).")
	}
	return notes
}

// runScaling plays each size — flashgate, then the naive baseline — and
// writes scaling.md and scaling.json into o.Out, with the one-line verdict
// on stdout. A run that fails ends it; what was measured until then is
// still written.
func runScaling(ctx context.Context, o options, command string, stdout io.Writer) error {
	sc := crowdreport.Scaling{Command: command, Started: time.Now(), Scenario: o.Scenario, Notes: scalingNotes(o)}
	sc.Scenario.Shoppers = 0 // each size's own
	runErr := scalingSizes(ctx, o, &sc)
	sc.Wall = time.Since(sc.Started).Seconds()
	if len(sc.Sizes) == 0 {
		return runErr
	}
	if err := writeScaling(o.Out, sc); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprint(stdout, crowdreport.ScalingSummary(sc))
	benchreport.PrintPath(stdout, filepath.Join(o.Out, "scaling.md"))
	return runErr
}

func scalingSizes(ctx context.Context, o options, sc *crowdreport.Scaling) error {
	pg := o.postgresCounters(ctx, sc)
	if pg != nil {
		defer pg.Close(context.Background())
	}
	for i, n := range o.Scaling {
		c := o.Config
		c.Shoppers = n
		c.SaleID = fmt.Sprintf("scaling-%d-%d", time.Now().Unix(), n) // a fresh sale per size
		o.Progress("scaling size %d of %d: %d shoppers, %d units at %g/s", i+1, len(o.Scaling), n, c.Stock, c.RatePerS)
		sz := crowdreport.Size{Shoppers: n, Postgres: map[string]crowdreport.PostgresActivity{}}

		metricsBefore, err := o.originMetrics(ctx)
		if err != nil {
			sc.Notes = append(sc.Notes, fmt.Sprintf("The origin's /metrics could not be read before the %d-shopper run: %v", n, err))
		}
		pgBefore := pg.read(ctx)
		fg, err := crowdsim.Run(ctx, c)
		if err != nil {
			return fmt.Errorf("%d shoppers: flashgate: %w", n, err)
		}
		fg.Command = sc.Command
		sz.Flashgate = fg
		pg.add(ctx, sz.Postgres, "flashgate", pgBefore)
		metricsAfter, err := o.originMetrics(ctx)
		if err != nil {
			sc.Notes = append(sc.Notes, fmt.Sprintf("The origin's /metrics could not be read after the %d-shopper run: %v", n, err))
		}
		if metricsBefore != nil && metricsAfter != nil {
			sz.Origin = originCounts(metricsBefore, metricsAfter)
		}

		if o.Naive {
			pgBefore := pg.read(ctx)
			nv, err := crowdsim.RunNaive(ctx, c, o.PostgresURL)
			if err != nil {
				sc.Sizes = append(sc.Sizes, sz)
				return fmt.Errorf("%d shoppers: naive: %w", n, err)
			}
			nv.Command = sc.Command
			sz.Naive = nv
			pg.add(ctx, sz.Postgres, "naive", pgBefore)
		}
		sc.Sizes = append(sc.Sizes, sz)
		for _, d := range crowdreport.Designs {
			if r := sz.Result(d); r != nil {
				o.Progress("  %s at %d shoppers: crowd ran %.1f s, %d requests; CPU origin %.1f s, naive server %.1f s, postgres %.1f s, edge %.1f s",
					d, n, r.CrowdS, r.Requests, r.CPU["origin"], r.CPU["naive server"], r.CPU["postgres"], r.CPU["edge"])
			}
		}
	}
	return nil
}

// originMetrics reads the origin's /metrics (its admin listener).
func (o options) originMetrics(ctx context.Context) (procstat.Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return procstat.FetchMetrics(ctx, &http.Client{}, o.OriginAdminURL+"/metrics", o.AdminToken)
}

// originSeries are the origin's histograms a scaling run counts, with the
// label that tells their series apart and the kind the report names.
var originSeries = []struct{ kind, metric, label string }{
	{"route", "flashgate_origin_request_seconds", "route"},
	{"postgres op", "flashgate_origin_postgres_seconds", "op"},
	{"redis script", "flashgate_origin_redis_script_seconds", "script"},
	{"gateway call", "flashgate_origin_gateway_seconds", "call"},
}

// originCounts is how many observations each origin histogram's series
// made between two scrapes, by its label's value (added up over the other
// labels: status, outcome); a series seen in neither scrape is absent, one
// that did not move counts 0.
func originCounts(before, after procstat.Scrape) []crowdreport.OriginCount {
	var out []crowdreport.OriginCount
	for _, se := range originSeries {
		var values []string
		for _, s := range after[se.metric] {
			if v := s.Labels[se.label]; v != "" && !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
		slices.Sort(values)
		for _, v := range values {
			if h, ok := procstat.Delta(before, after, se.metric, map[string]string{se.label: v}); ok {
				out = append(out, crowdreport.OriginCount{Kind: se.kind, Name: v, Count: int(math.Round(h.Count))})
			}
		}
	}
	return out
}

// pgCounters reads the run's database's counters from pg_stat_database
// on one connection of its own; a nil *pgCounters reads nothing.
type pgCounters struct {
	conn  *pgx.Conn
	notes *[]string // where a failed reading says so, once
	said  bool
}

// postgresCounters connects to o.PostgresURL for pg_stat_database; nil
// (with a note) when there is no URL or no connection.
func (o options) postgresCounters(ctx context.Context, sc *crowdreport.Scaling) *pgCounters {
	if o.PostgresURL == "" {
		sc.Notes = append(sc.Notes, "Postgres's own counters were not read: no Postgres URL (FLASHGATE_POSTGRES_URL).")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, o.PostgresURL)
	if err != nil {
		sc.Notes = append(sc.Notes, fmt.Sprintf("Postgres's own counters were not read: %v", err))
		return nil
	}
	return &pgCounters{conn: conn, notes: &sc.Notes}
}

func (p *pgCounters) Close(ctx context.Context) { _ = p.conn.Close(ctx) }

// read is the database's counters so far; nil when they could not be
// read. Each reading is a statement of its own, so it sees the counters as
// they are now, not a snapshot cached in a transaction.
func (p *pgCounters) read(ctx context.Context) *crowdreport.PostgresActivity {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var a crowdreport.PostgresActivity
	err := p.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_returned + tup_fetched,
		tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&a.Transactions, &a.RowsRead, &a.RowsWritten)
	if err != nil {
		if !p.said {
			*p.notes = append(*p.notes, fmt.Sprintf("Postgres's own counters could not be read: %v", err))
			p.said = true
		}
		return nil
	}
	return &a
}

// add puts what the counters moved by since before into into[design].
func (p *pgCounters) add(ctx context.Context, into map[string]crowdreport.PostgresActivity, design string, before *crowdreport.PostgresActivity) {
	after := p.read(ctx)
	if before == nil || after == nil {
		return
	}
	into[design] = crowdreport.PostgresActivity{
		Transactions: after.Transactions - before.Transactions,
		RowsRead:     after.RowsRead - before.RowsRead,
		RowsWritten:  after.RowsWritten - before.RowsWritten,
	}
}

// writeScaling writes scaling.json and scaling.md into dir.
func writeScaling(dir string, sc crowdreport.Scaling) error {
	return benchreport.WriteFiles(dir, map[string]func(io.Writer) error{
		"scaling.json": func(w io.Writer) error { return crowdreport.WriteScalingJSON(w, sc) },
		"scaling.md":   func(w io.Writer) error { return crowdreport.WriteScalingMarkdown(w, sc) },
	})
}
