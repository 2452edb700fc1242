package faults

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// Options of a chaos run.
type Options struct {
	// Scenarios names the scenarios to play; empty: all of them, or the
	// short ones when Short is set.
	Scenarios []string
	// Providers keeps the payment scenarios' plays with these payment
	// providers only (see Select); empty: one play per personality of the
	// sandbox gateway.
	Providers []string
	Short     bool
	// Load is the sale every scenario plays; the zero Load means DefaultLoad.
	Load Load
	// BinDir holds origin, edge and sandboxgateway; "" builds them into the
	// work folder from the module around the working directory.
	BinDir string
	// WorkDir holds the servers' data and logs; "" makes a temporary one,
	// removed afterwards unless Keep is set.
	WorkDir string
	Keep    bool
	// PostgresBin holds initdb and postgres; "" means DefaultPostgresBin.
	PostgresBin string
	// Log reports progress; nil is quiet.
	Log func(format string, args ...any)
	// Parallel is how many scenarios play at once, each on its own stack
	// (0 or 1: one after another, as make chaos plays them so that each
	// sale has the machine to itself). Scenarios that stop Postgres play
	// alone.
	Parallel int
	// SetUp is how long a scenario's harness has, once its stack is up, to
	// create the sale and set its admission before the sale starts; 0
	// means 3 s. Scenarios played at once on a busy machine need longer.
	SetUp time.Duration
}

// Select returns the plays that names (or short) and providers pick, in
// play order. A name picks every play of its scenario; providers (the
// origin's provider names, sandbox, stripe, razorpay, or the sandbox
// gateway's personality names) keep the payment scenarios' plays with those
// providers only, and leave the others alone. Empty names: every scenario,
// or the short ones when short is set; empty providers: all of them.
func Select(names, providers []string, short bool) ([]Scenario, error) {
	all := Scenarios()
	for _, n := range names {
		if !slices.ContainsFunc(all, func(sc Scenario) bool { return sc.Name == n }) {
			return nil, fmt.Errorf("no scenario %q (there are: %s)", n, strings.Join(Names(), ", "))
		}
	}
	for _, p := range providers {
		if !slices.ContainsFunc(all, func(sc Scenario) bool { return sc.Payments && (sc.Provider() == p || sc.Personality == p) }) {
			return nil, fmt.Errorf("no payment provider %q (there are: %s)", p, strings.Join(Providers(), ", "))
		}
	}
	var out []Scenario
	for _, sc := range all {
		switch {
		case len(names) == 0 && short && !sc.Short:
		case len(names) > 0 && !slices.Contains(names, sc.Name):
		case sc.Payments && len(providers) > 0 && !slices.Contains(providers, sc.Provider()) && !slices.Contains(providers, sc.Personality):
		default:
			out = append(out, sc)
		}
	}
	return out, nil
}

// Names lists every scenario's name once.
func Names() []string {
	var out []string
	for _, sc := range Scenarios() {
		if !slices.Contains(out, sc.Name) {
			out = append(out, sc.Name)
		}
	}
	return out
}

// Providers lists the payment providers the payment scenarios play with,
// one per personality of the sandbox gateway.
func Providers() []string {
	var out []string
	for _, p := range sandboxgateway.Personalities() {
		out = append(out, providerOf(p))
	}
	return out
}

// Run plays the chosen scenarios, Options.Parallel at a time, each on a
// stack of its own (fresh Redis, fresh database, the three binaries), in
// one Postgres cluster of the run's own, and returns their results. An
// error means the harness itself could not run (or the context ended
// before every scenario began); a scenario that fails is a Result.
func Run(ctx context.Context, o Options) ([]Result, error) {
	scenarios, err := Select(o.Scenarios, o.Providers, o.Short)
	if err != nil {
		return nil, err
	}
	if o.Load == (Load{}) {
		o.Load = DefaultLoad()
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.PostgresBin == "" {
		o.PostgresBin = DefaultPostgresBin
	}
	dir := o.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "flashgate-chaos-"); err != nil {
			return nil, err
		}
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bins := o.BinDir
	if bins == "" {
		bins = filepath.Join(dir, "bin")
		o.Log("building origin, edge and sandboxgateway into %s", bins)
		if err := buildBinaries(ctx, bins); err != nil {
			return nil, err
		}
	}
	sentinels := sentinelSupport(bins)
	o.Log("starting Postgres (%s) in %s", o.PostgresBin, dir)
	pg, err := newPgCluster(ctx, o.PostgresBin, dir)
	if err != nil {
		return nil, err
	}
	if err := pg.start(ctx); err != nil {
		return nil, err
	}
	defer pg.stop()

	results := make([]Result, len(scenarios))
	play := func(i int) {
		sc := scenarios[i]
		o.Log("scenario %d of %d: %s — %s", i+1, len(scenarios), sc.Label(), sc.What)
		r := runScenario(ctx, o, sc, filepath.Join(dir, sc.slug()), bins, pg, fmt.Sprintf("chaos_%d", i+1), sentinels)
		verdict := "PASS"
		if !r.Pass() {
			verdict = "FAIL: " + strings.Join(r.Failures, "; ")
		}
		o.Log("%s: %s (%.0f s)", sc.Label(), verdict, r.Took.Seconds())
		results[i] = r
	}
	// Scenarios that leave Postgres alone play Parallel at a time; each
	// that stops it plays alone, after them (every one, in order, when
	// Parallel is 1).
	var together, alone []int
	for i, sc := range scenarios {
		if sc.stopsPostgres || o.Parallel <= 1 {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(o.Parallel, 1))
	for _, i := range together {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			play(i)
		})
	}
	wg.Wait()
	for _, i := range alone {
		if ctx.Err() != nil {
			break
		}
		play(i)
		// The scenario has started Postgres again; if that failed, the
		// next ones need it.
		if !pg.proc.Running() {
			if err := pg.start(ctx); err != nil {
				return played(results), fmt.Errorf("postgres did not come back after %s: %w", scenarios[i].Label(), err)
			}
		}
	}
	if done := played(results); len(done) < len(results) {
		return done, ctx.Err() // the context ended before the rest began
	}
	return results, nil
}

// played keeps the results of the scenarios that were played, in order.
func played(results []Result) []Result {
	return slices.DeleteFunc(results, func(r Result) bool { return r.Scenario == "" })
}

// runScenario plays one scenario on a fresh stack.
func runScenario(ctx context.Context, o Options, sc Scenario, dir, bins string, pg *pgCluster, db string, sentinels bool) (r Result) {
	started := time.Now()
	r = Result{Scenario: sc.Label(), What: sc.What, Provider: sc.Provider(), Payments: sc.Payments, Shoppers: o.Load.Shoppers, Stock: o.Load.Stock}
	defer func() {
		r.Took = time.Since(started)
	}()
	harness := func(err error) Result {
		r.Failures = append(r.Failures, "harness: "+err.Error())
		return r
	}
	st, err := startStack(ctx, dir, bins, pg, db, sc.topo, sc.Personality, sentinels)
	if err != nil {
		return harness(fmt.Errorf("start the stack: %w", err))
	}
	defer st.close()
	t, err := newTraffic(o.Load, st, cmp.Or(o.SetUp, 3*time.Second))
	if err != nil {
		return harness(err)
	}
	t.ctx = ctx
	defer t.c.close()
	if err := t.setUp(ctx); err != nil {
		r.Logs = st.logs(20)
		return harness(err)
	}
	if err := t.crowd(); err != nil {
		return harness(err)
	}
	if err := t.lineCrowd(); err != nil {
		return harness(err)
	}

	f := &faultEnv{st: st, t: t}
	faultDone := make(chan error, 1)
	go func() { faultDone <- sc.fault(ctx, f) }()
	probeCtx, stopProbes := context.WithCancel(ctx)
	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		if sleepUntil(probeCtx, t.zero) {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.watchSnapshot(probeCtx)
			}()
			t.runProbes(probeCtx)
			wg.Wait()
		}
	}()
	lineCtx, stopLines := context.WithCancel(ctx)
	linesDone := make(chan struct{})
	go func() {
		defer close(linesDone)
		if sleepUntil(lineCtx, t.zero) {
			t.runLines(lineCtx)
		}
	}()
	sleepUntil(ctx, t.zero)
	t.runShoppers(ctx)
	ferr := <-faultDone
	if ferr != nil {
		r.Failures = append(r.Failures, "fault: "+ferr.Error())
	}
	if f.end.IsZero() {
		f.end = time.Now()
	}
	r.Fault = f.failures
	// The line sales are read for a while after the fault too.
	sleepUntil(ctx, f.end.Add(lineAfter))
	stopLines()
	<-linesDone
	// The probes go on until the stack works again, or for RecoverWithin.
	deadline := f.end.Add(o.Load.RecoverWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, ok := t.recoveredAt(f.end); ok {
			break
		}
		sleepFor(ctx, 200*time.Millisecond)
	}
	stopProbes()
	<-probesDone
	if ctx.Err() != nil {
		return harness(ctx.Err())
	}

	t.collect(ctx, f, &r)
	judge(&r)
	if !r.Pass() {
		r.Logs = st.logs(20)
	}
	return r
}
