package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/internal/envflag"
)

type options struct {
	crowdsim.Config
	PostgresURL     string
	Naive           bool
	Ceiling         bool
	CeilingShoppers int
	Out             string
	// Sweep are the capacity sweep's burst rates (shoppers/s), lowest
	// first; nil for the standard run.
	Sweep []float64
	// SweepMax bounds the sweep's steps beyond the rates given: while
	// flashgate holds at the top one, the sweep doubles the rate up to
	// SweepMax (0: only the rates given), so its capacity is measured, not
	// only bounded below.
	SweepMax float64
	// SweepRetries is how many more times a sweep run goes when the
	// simulator lagged in it.
	SweepRetries int
	// SweepRefine is how many times, after the rates above, the sweep
	// plays each design halfway between its highest rate held and its
	// lowest missed: doubling finds a capacity to a factor of two, two
	// refinements to a quarter of it (0: none).
	SweepRefine int
	// Scaling are the scaling law's crowd sizes (shoppers), smallest
	// first; nil for the standard run.
	Scaling []int
	// CPUProfile, when set, is where the simulator's own CPU profile goes
	// (CPUProfile.crowd.pprof): where the load generator spends its core.
	CPUProfile string
	// Compare plays the autotune comparison (make bench-autotune) instead
	// of the standard run: the scenario with the origin's admission
	// controller on (Config.Autotune), then at a fixed rate too high and
	// too low, CompareRounds times, beside the capacity.
	Compare       bool
	CompareRounds int
	// TooHighPerS and TooLowPerS are the comparison's fixed rates
	// (admissions/s); 0: 3× and a quarter of the capacity.
	TooHighPerS, TooLowPerS float64
	// CapacityPerS is the stack's holds granted per second with admission
	// unthrottled, measured before; 0: the comparison measures it first
	// (the ceiling run, CeilingShoppers).
	CapacityPerS float64
	// AutotunePeriod is FLASHGATE_AUTOTUNE_PERIOD as the stack was given
	// it, for the comparison's report ("": unset).
	AutotunePeriod string
	// DefenceModes are the standard run's runs of the same scenario, each
	// with the defences against bots switched so (crowdsim.DefencesOff,
	// crowdsim.DefencesOn): make bench runs off, then on. Empty: one run
	// with the stack's defences as they are.
	DefenceModes []string
}

// benchFlags are the flags make bench (deploy/local/crowd.sh) gives before
// CROWD_FLAGS: the smart cohort beside the hammering one, and the scenario
// run with the defences off, then on.
const benchFlags = "-smart-bots 1000 -defences off,on -device-bits 14"

func loadOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	o := options{Config: crowdsim.Config{Scenario: crowdsim.DefaultScenario()}, Naive: true, CeilingShoppers: 20_000, SweepRetries: 2, CompareRounds: 1}
	fs := flag.NewFlagSet("crowd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Through envflag: its secrets never become defaults, so -h and a
	// mistyped flag print none of them.
	env := envflag.New(fs)
	o.EdgeURL, o.EdgeAdminURL = "http://127.0.0.1:8080", "http://127.0.0.1:8081"
	o.OriginAdminURL, o.GatewayURL = "http://127.0.0.1:9091", "http://127.0.0.1:9300"
	var secret string
	env.String(&o.EdgeURL, "edge-url", "FLASHGATE_CROWD_EDGE_URL", "the edge's public URL")
	env.String(&o.FarEdgeURL, "far-edge-url", "FLASHGATE_CROWD_FAR_EDGE_URL", "a second region's edges (its CDN): -far-share of the shoppers go there and the report splits them by region")
	env.String(&o.EdgeAdminURL, "edge-admin-url", "FLASHGATE_CROWD_EDGE_ADMIN_URL", "the edge's admin URL")
	env.String(&o.OriginAdminURL, "origin-admin-url", "FLASHGATE_CROWD_ORIGIN_ADMIN_URL", "the origin's admin URL")
	env.String(&o.GatewayURL, "gateway-url", "FLASHGATE_GATEWAY_URL", "the sandbox payment gateway")
	env.Secret(&o.AdminToken, "admin-token", "FLASHGATE_ADMIN_TOKEN", "admin bearer token of both tiers")
	env.Secret(&o.GatewayToken, "gateway-control-token", "FLASHGATE_GATEWAY_CONTROL_TOKEN", "the sandbox gateway's control token, which its pay route takes")
	env.Secret(&secret, "user-token-secret", "FLASHGATE_USER_TOKEN_SECRET", "the shop's HS256 user-token secret; shoppers' tokens are minted with it")
	env.Secret(&o.PostgresURL, "postgres-url", "FLASHGATE_POSTGRES_URL", "Postgres for the naive baseline's tables")
	env.String(&o.NaiveURL, "naive-url", "FLASHGATE_CROWD_NAIVE_URL", "a naive baseline server of its own (bench/naiveserver), reset before each naive run; empty: one inside this process on -postgres-url")
	var sweep, scaling string
	sc := &o.Scenario
	fs.IntVar(&o.Conns, "conns", 2048, "connections from the simulated shoppers (their CDN) to each region's edges")
	fs.Float64Var(&o.FarShare, "far-share", 0.5, "share of the shoppers (not the bots) who shop through -far-edge-url")
	fs.IntVar(&sc.Shoppers, "shoppers", sc.Shoppers, "shoppers in the crowd")
	fs.IntVar(&sc.Stock, "stock", sc.Stock, "units on sale")
	fs.Float64Var(&sc.RatePerS, "rate", sc.RatePerS, "admissions per second (0: unthrottled)")
	fs.Float64Var(&sc.PreQueueS, "pre-queue", sc.PreQueueS, "seconds before the start over which the pre-queue arrives")
	fs.Float64Var(&sc.PreQueueShare, "pre-queue-share", sc.PreQueueShare, "share of shoppers who come early")
	fs.Float64Var(&sc.BurstS, "burst", sc.BurstS, "seconds of the burst at the open")
	fs.Float64Var(&sc.BurstShare, "burst-share", sc.BurstShare, "share of shoppers in the burst")
	fs.Float64Var(&sc.TailS, "tail", sc.TailS, "seconds over which the rest arrive after the burst")
	fs.Float64Var(&sc.PayProbability, "pay", sc.PayProbability, "probability that a shopper with a hold pays")
	fs.Float64Var(&sc.ImpatientShare, "impatient", sc.ImpatientShare, "share of shoppers who poll at twice the pace they are told (at most once a second)")
	fs.Float64Var(&sc.StayShare, "stay", sc.StayShare, "share who keep waiting after a sold-out that is not final")
	fs.Float64Var(&sc.PageRefreshS, "page-refresh", sc.PageRefreshS, "seconds between a waiting page's snapshot reloads (through the CDN; 0: never)")
	fs.BoolVar(&sc.PageWatch, "page-watch", sc.PageWatch, "each of those reloads is a watch (?at=), held at the edge until its second ends or the sale has news (false: plain reads, as before issue 31)")
	fs.Float64Var(&sc.ReactionS, "reaction", sc.ReactionS, "an honest shopper's mean seconds from its turn to pressing Buy (each 0.5–1.5× it; 0: at once)")
	cohortFlags(fs, "bot", "the hammering cohort", &sc.Hammering)
	cohortFlags(fs, "smart-bot", "the smart cohort", &sc.Smart)
	var defences string
	d := &o.Defences
	fs.StringVar(&defences, "defences", "", "run the scenario once per mode in this list, the defences against bots (a proof of work on every join, "+
		"the edge's tarpit, one paid unit per payment instrument) switched so: off, on, or off,on (make bench); empty: one run, the stack's defences as they are")
	fs.IntVar(&d.ChallengeBits, "challenge-bits", 4, "the proof of work the edge asks of every join with the defences on (real solutions, on the simulator's core)")
	fs.IntVar(&d.DeviceBits, "device-bits", 17, "the proof of work's difficulty at which a device's solving time is modelled (production's)")
	fs.Float64Var(&d.PhoneHashesPerS, "phone-hash-rate", 150_000, "a phone's hashes per second, for honest shoppers and bots without server CPUs")
	fs.Float64Var(&d.ServerHashesPerS, "server-hash-rate", 3_000_000, "a server core's hashes per second, for bots with server CPUs")
	fs.IntVar(&sc.HoldTTLS, "hold-ttl", sc.HoldTTLS, "the sale's hold time in seconds (short, so unpaid holds return within the run)")
	fs.Float64Var(&sc.MaxDurationS, "max-duration", sc.MaxDurationS, "seconds after the start at which the crowd is stopped")
	fs.IntVar(&sc.MaxRequests, "max-requests", sc.MaxRequests, "requests after which the crowd is stopped")
	fs.Float64Var(&o.Autotune.MinRatePerS, "autotune-min", 0, "hand the sale's admission rate to the origin's controller (origin/internal/autotune), "+
		"starting at -rate: the lowest rate it may set (admissions/s; with -autotune-max)")
	fs.Float64Var(&o.Autotune.MaxRatePerS, "autotune-max", 0, "the highest admission rate the origin's controller may set (admissions/s; 0 with -autotune-min 0: autotune off)")
	fs.BoolVar(&o.Compare, "autotune-compare", false, "the autotune comparison (make bench-autotune) instead of the standard run: the capacity "+
		"(a ceiling run, unless -capacity), then the same crowd (see autotuneScenario; scenario flags change it, -shoppers and -stock 0 "+
		"size it from the capacity) with autotune between -autotune-min and -autotune-max from -rate (0: the rate too low), at -too-high-rate, "+
		"and at -too-low-rate, each a fresh sale, -compare-rounds times; no naive baseline")
	fs.Float64Var(&o.TooHighPerS, "too-high-rate", 0, "the comparison's fixed rate too high (admissions/s; 0: 3× the capacity)")
	fs.Float64Var(&o.TooLowPerS, "too-low-rate", 0, "the comparison's fixed rate too low (admissions/s; 0: a quarter of the capacity)")
	fs.Float64Var(&o.CapacityPerS, "capacity", 0, "the comparison's capacity, holds granted per second with admission unthrottled, measured before (0: measure it first)")
	fs.IntVar(&o.CompareRounds, "compare-rounds", o.CompareRounds, "how many rounds of its three runs the comparison plays, interleaved")
	var seed int64
	fs.Int64Var(&seed, "seed", 1, "seed of the crowd's randomness")
	fs.BoolVar(&o.Naive, "naive", o.Naive, "also run the naive baseline under the same crowd")
	fs.BoolVar(&o.Ceiling, "ceiling", o.Ceiling, "also run with admission unthrottled to find the stack's reserves per second")
	fs.IntVar(&o.CeilingShoppers, "ceiling-shoppers", o.CeilingShoppers, "shoppers (and units) of the ceiling run")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write the simulator's own CPU profile, the whole run, to `path`.crowd.pprof")
	fs.StringVar(&o.Out, "out", "", "report folder (default .data/crowd/<time>, .data/capacity/<time> for -sweep, .data/scaling/<time> for -scaling)")
	fs.StringVar(&sweep, "sweep", "", "comma-separated burst arrival rates (shoppers/s), e.g. "+defaultSweep+
		": the capacity sweep (make bench-capacity) instead of the standard run; its steps start from the sweep's scenario "+
		"(see capacityScenario), which the scenario flags given change, and -shoppers is the rate times -burst")
	fs.IntVar(&o.SweepRetries, "sweep-retries", o.SweepRetries, "how many more times a sweep run goes when the simulator lagged in it")
	fs.IntVar(&o.SweepRefine, "sweep-refine", 2, "after the rates swept, how many times to play each design halfway between its highest rate held and its lowest missed")
	fs.Float64Var(&o.SweepMax, "sweep-max", 64_000, "while flashgate holds at the sweep's top rate, double it up to this (shoppers/s; 0: only the rates given)")
	fs.StringVar(&scaling, "scaling", "", "comma-separated crowd sizes (shoppers), e.g. "+defaultScaling+
		": the scaling law (make bench-scaling) instead of the standard run; at each size the standard scenario as the "+
		"scenario flags set it, with -shoppers the size, a fresh sale, and the naive baseline (-naive)")
	if err := env.Parse(args, getenv); err != nil {
		return options{}, err
	}
	if sweep != "" {
		var err error
		if o.Sweep, err = parseRates(sweep); err != nil {
			return options{}, fmt.Errorf("-sweep: %w", err)
		}
		// The scenario flags given apply to the sweep's scenario: parse
		// them again over it (the first pass has checked them).
		o.Scenario = capacityScenario()
		_ = fs.Parse(args)
		sc.Shoppers = max(1, int(math.Round(o.Sweep[0]*sc.BurstS)))
	}
	if o.Compare {
		// As with -sweep: the scenario flags given apply to the
		// comparison's scenario.
		o.Scenario = autotuneScenario()
		_ = fs.Parse(args)
		o.Naive = false
		o.AutotunePeriod = getenv("FLASHGATE_AUTOTUNE_PERIOD")
	}
	if scaling != "" {
		var err error
		if o.Scaling, err = parseSizes(scaling); err != nil {
			return options{}, fmt.Errorf("-scaling: %w", err)
		}
		sc.Shoppers = o.Scaling[0]
	}
	if defences != "" {
		var err error
		if o.DefenceModes, err = parseModes(defences); err != nil {
			return options{}, fmt.Errorf("-defences: %w", err)
		}
	}
	o.Seed = uint64(seed)
	o.UserSecret = []byte(secret)
	switch {
	case o.AdminToken == "":
		return options{}, errors.New("the admin token is required (FLASHGATE_ADMIN_TOKEN)")
	case o.GatewayToken == "" && sc.PayProbability > 0:
		return options{}, errors.New("paying on the sandbox gateway takes its control token (FLASHGATE_GATEWAY_CONTROL_TOKEN), or -pay 0")
	case secret == "":
		return options{}, errors.New("the user-token secret is required (FLASHGATE_USER_TOKEN_SECRET)")
	case o.Naive && o.PostgresURL == "" && o.NaiveURL == "":
		return options{}, errors.New("the naive baseline needs FLASHGATE_POSTGRES_URL or a naive server (-naive-url), or -naive=false")
	case sc.Shoppers < 0 || sc.Stock < 0 || !o.Compare && (sc.Shoppers == 0 || sc.Stock == 0):
		return options{}, errors.New("shoppers and stock must be positive (0 sizes them from the capacity with -autotune-compare)")
	case o.FarShare <= 0 || o.FarShare >= 1:
		return options{}, errors.New("-far-share must be between 0 and 1")
	case o.SweepRefine < 0 || o.SweepRefine > 5:
		return options{}, errors.New("-sweep-refine must be 0 to 5")
	case o.SweepRetries < 0:
		return options{}, errors.New("-sweep-retries must not be negative")
	case o.SweepMax < 0 || o.SweepMax > 1e6:
		return options{}, errors.New("-sweep-max must be 0 (off) to 1,000,000 shoppers/s")
	case o.Scaling != nil && (o.Sweep != nil || o.Ceiling):
		return options{}, errors.New("-scaling is a run of its own: not with -sweep or -ceiling")
	case o.DefenceModes != nil && (o.Sweep != nil || o.Scaling != nil):
		return options{}, errors.New("-defences is the standard run's: not with -sweep or -scaling")
	case o.Compare && (o.Sweep != nil || o.Scaling != nil || o.DefenceModes != nil):
		return options{}, errors.New("-autotune-compare is a run of its own: not with -sweep, -scaling or -defences")
	case o.Compare && !o.Autotune.On():
		return options{}, errors.New("-autotune-compare needs the controller's bounds: -autotune-min and -autotune-max")
	case o.Compare && (o.CompareRounds < 1 || o.TooHighPerS < 0 || o.TooLowPerS < 0 || o.CapacityPerS < 0 || sc.RatePerS < 0):
		return options{}, errors.New("-compare-rounds must be positive, -too-high-rate, -too-low-rate, -capacity and -rate not negative")
	}
	// The comparison's starting rate may come from the capacity: only its
	// bounds are known now.
	if err := o.Autotune.ValidBounds(); err != nil {
		return options{}, err
	}
	if !o.Compare {
		if err := o.Autotune.Validate(sc.RatePerS); err != nil {
			return options{}, err
		}
	}
	if err := o.Defences.Validate(); err != nil {
		return options{}, err
	}
	for _, c := range []crowdsim.BotCohort{sc.Hammering, sc.Smart} {
		if err := validCohort(c); err != nil {
			return options{}, err
		}
	}
	for _, u := range []string{o.EdgeURL, o.FarEdgeURL, o.EdgeAdminURL, o.OriginAdminURL, o.GatewayURL, o.PostgresURL, o.NaiveURL} {
		if u != "" && !loopback(u) {
			return options{}, fmt.Errorf("load only ever targets 127.0.0.1 or localhost, not %s", u)
		}
	}
	// The CPU table counts the run's own Redis and Postgres (make bench's
	// run.sh names them), not every such server on the machine.
	o.Services = procstat.Services{RedisPort: portOf(getenv("FLASHGATE_REDIS_URL")), PostgresPort: portOf(o.PostgresURL)}
	if o.Out == "" {
		kind := "crowd"
		switch {
		case o.Sweep != nil:
			kind = "capacity"
		case o.Scaling != nil:
			kind = "scaling"
		case o.Compare:
			kind = "autotune"
		}
		o.Out = filepath.Join(".data", kind, time.Now().UTC().Format("20060102-150405"))
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, err := loadOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	o.Progress = func(format string, a ...any) {
		fmt.Fprintf(stderr, "crowd: "+format+"\n", a...)
	}
	stopProfile, err := procstat.StartCPUProfile(o.CPUProfile, "crowd")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	if o.Sweep != nil {
		return runSweep(ctx, o, sweepCommand(args), stdout)
	}
	if o.Scaling != nil {
		return runScaling(ctx, o, scalingCommand(args), stdout)
	}
	if o.Compare {
		return runComparison(ctx, o, autotuneCommand(args), stdout, crowdsim.Run)
	}
	var runs crowdreport.Runs
	fg, err := runDefences(ctx, o, command(args), &runs, crowdsim.Run)
	if err != nil {
		return err
	}
	if o.Naive {
		nv, err := crowdsim.RunNaive(ctx, o.Config, o.PostgresURL)
		if err != nil {
			return err
		}
		nv.Command = fg.Command
		runs.Naive = nv
	}
	if o.Ceiling {
		c := o.Config
		c.SaleID, c.Defences.Mode, c.Autotune = "", "", crowdsim.Autotune{}
		c.Scenario = ceilingScenario(o.Scenario, o.CeilingShoppers)
		ceil, err := crowdsim.Run(ctx, c)
		if err != nil {
			return err
		}
		ceil.Mode, ceil.Command = "ceiling", fg.Command
		runs.Ceiling = ceil
	}
	if err := writeReport(o.Out, runs); err != nil {
		return err
	}
	fmt.Fprint(stdout, crowdreport.Summary(runs))
	benchreport.PrintPath(stdout, filepath.Join(o.Out, "report.md"))
	return nil
}

// writeReport writes report.json, report.md and the charts into dir.
func writeReport(dir string, runs crowdreport.Runs) error {
	charts, err := crowdreport.WriteCharts(dir, runs)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	return benchreport.WriteFiles(dir, map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error { return crowdreport.WriteJSON(w, runs) },
		"report.md":   func(w io.Writer) error { return crowdreport.WriteMarkdown(w, runs, charts) },
	})
}

// portOf is a redis:// or postgres:// URL's port, its scheme's default when
// it names none, 0 when there is no URL.
func portOf(raw string) int {
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch u.Scheme {
	case "redis", "rediss":
		return 6379
	case "postgres", "postgresql":
		return 5432
	}
	return 0
}

// loopback reports whether a URL (http or postgres) names this machine.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		return true
	}
	return false
}

// runDefences plays the scenario with play (crowdsim.Run) once per defence
// mode, in order (once, the stack's defences as they are, without any),
// each a fresh sale with the same crowd: the first run is runs.Flashgate, a
// second runs.Defended. It returns the first.
func runDefences(ctx context.Context, o options, command string, runs *crowdreport.Runs,
	play func(context.Context, crowdsim.Config) (*crowdsim.Result, error)) (*crowdsim.Result, error) {
	modes := o.DefenceModes
	if len(modes) == 0 {
		modes = []string{""}
	}
	for i, mode := range modes {
		c := o.Config
		c.Defences.Mode = mode
		if i > 0 {
			c.SaleID = "" // a sale of its own
		}
		r, err := play(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("defences %s: %w", cmp.Or(mode, "as they are"), err)
		}
		r.Command = command
		if i == 0 {
			runs.Flashgate = *r
		} else {
			runs.Defended = r
		}
	}
	return &runs.Flashgate, nil
}

// parseModes reads "off,on" into defence modes, in order: each off or on,
// at most once.
func parseModes(s string) ([]string, error) {
	var modes []string
	for _, f := range strings.Split(s, ",") {
		m := strings.TrimSpace(f)
		if m != crowdsim.DefencesOff && m != crowdsim.DefencesOn {
			return nil, fmt.Errorf("%q is neither off nor on", f)
		}
		if slices.Contains(modes, m) {
			return nil, fmt.Errorf("%s given twice", m)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// cohortFlags binds a bot cohort's flags: prefix+"s" its accounts, then
// prefix+"-ips", "-pre-queue" and so on its tactics (crowdsim.BotCohort).
func cohortFlags(fs *flag.FlagSet, prefix, what string, c *crowdsim.BotCohort) {
	fs.IntVar(&c.Accounts, prefix+"s", c.Accounts, what+": bot accounts (0: no such cohort)")
	fs.IntVar(&c.Addresses, prefix+"-ips", c.Addresses, what+": addresses its accounts share, in one /24 (0: an address each, a /24 each, as residential proxies give)")
	fs.BoolVar(&c.PreQueue, prefix+"-pre-queue", c.PreQueue, what+": join at the pre-queue's start (false: at the open)")
	fs.IntVar(&c.PollMS, prefix+"-poll-ms", c.PollMS, what+": poll every this many ms whatever the edge says (0: as told, by poll_after_ms and Retry-After)")
	fs.BoolVar(&c.InstantReserve, prefix+"-instant-reserve", c.InstantReserve, what+": reserve within milliseconds of admission (false: a person's reaction, -reaction)")
	fs.BoolVar(&c.ShareTokens, prefix+"-share-tokens", c.ShareTokens, what+": hand each admission token to another account of the cohort, which reserves with it too")
	fs.IntVar(&c.AccountsPerInstrument, prefix+"-per-instrument", c.AccountsPerInstrument, what+": accounts paying with one payment instrument (the gateway's payer)")
	fs.BoolVar(&c.ServerCPU, prefix+"-server-cpu", c.ServerCPU, what+": solve proofs of work at a server core's hash rate (false: a phone's)")
}

// validCohort refuses tactics the simulator cannot play.
func validCohort(c crowdsim.BotCohort) error {
	switch {
	case c.Accounts < 0:
		return fmt.Errorf("%s cohort: accounts must not be negative", c.Name)
	case c.Addresses < 0 || c.Addresses > 254:
		return fmt.Errorf("%s cohort: shared addresses are 0 (one each) to 254 (one /24)", c.Name)
	case c.PollMS < 0:
		return fmt.Errorf("%s cohort: poll interval must not be negative", c.Name)
	case c.AccountsPerInstrument < 0:
		return fmt.Errorf("%s cohort: accounts per instrument must not be negative", c.Name)
	}
	return nil
}

// command is how this run was started, for the report: make bench passes
// benchFlags first, then CROWD_FLAGS.
func command(args []string) string {
	if len(args) == 0 {
		return "bin/crowd"
	}
	joined := strings.Join(args, " ")
	if rest, ok := strings.CutPrefix(joined, benchFlags); ok && (rest == "" || rest[0] == ' ') {
		if rest = strings.TrimSpace(rest); rest == "" {
			return "make bench"
		}
		return "make bench CROWD_FLAGS='" + rest + "'"
	}
	return "bin/crowd " + joined
}

// ceilingScenario: as many units as shoppers, all arriving at the open,
// admitted as fast as they come, nobody paying: what limits is the reserve
// path end to end.
func ceilingScenario(base crowdsim.Scenario, shoppers int) crowdsim.Scenario {
	sc := base
	sc.Shoppers, sc.Stock, sc.RatePerS = shoppers, shoppers, 0
	sc.PreQueueS, sc.PreQueueShare, sc.BurstS, sc.BurstShare, sc.TailS = 0.5, 0, 2, 1, 0
	sc.PayProbability, sc.ImpatientShare, sc.StayShare, sc.PageRefreshS, sc.ReactionS = 0, 0, 0, 0, 0
	sc.Hammering.Accounts, sc.Smart.Accounts = 0, 0
	sc.MaxDurationS = 45
	return sc
}
