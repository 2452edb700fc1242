package crowdsim

import "time"

// Result is everything one run measured: the stack's run and the naive
// baseline's have the same shape, so one report shows them side by side.
// Times are seconds since the run's zero (the sale's start) unless named
// otherwise; latencies are milliseconds.
type Result struct {
	Mode     string    `json:"mode"` // "flashgate" or "naive"
	Scenario Scenario  `json:"scenario"`
	Machine  string    `json:"machine"` // CPU model and count, Go version
	Command  string    `json:"command"` // how the run was started
	Started  time.Time `json:"started"`
	Wall     float64   `json:"wall_s"` // how long the run took

	Stock    int `json:"stock"`
	Sold     int `json:"sold"`     // paid units (flashgate) or successful buys (naive), per the ledger
	Held     int `json:"held"`     // units still held at the end (flashgate)
	Oversold int `json:"oversold"` // max(0, sold + held - stock, units the shoppers saw paid - stock); must be 0

	// Endpoints are per-endpoint request statistics, by endpoint name.
	Endpoints []Endpoint `json:"endpoints"`
	// Fates are the shoppers' outcomes: how long from when each started
	// (its first click, as the simulator sent it) to knowing its fate.
	Fates Fates `json:"fates"`
	// Timeline is one point per second of the run.
	Timeline []Second `json:"timeline"`
	// Totals over the run.
	Requests     int        `json:"requests"`
	Answered     int        `json:"answered"`   // requests that got any HTTP answer
	Status4xx    int        `json:"status_4xx"` // of which 4xx (429s included)
	Status5xx    int        `json:"status_5xx"` // of which 5xx; must be 0 for flashgate
	Timeouts     int        `json:"timeouts"`   // requests the client gave up on
	Transport    int        `json:"transport_errors"`
	PeakRPS      float64    `json:"peak_rps"`     // requests per second, best second
	AnsweredRPS  float64    `json:"answered_rps"` // requests sent during the burst and answered below 500, per second of the burst
	BurstP99Ms   float64    `json:"burst_p99_ms"` // p99 latency of every request while the burst lasted
	BurstWindowS [2]float64 `json:"burst_window_s"`

	// SoldOutNotice: how long after the last unit went shoppers still in
	// line heard "sold out" (flashgate only).
	SoldOutNotice Dist `json:"sold_out_notice"`
	// SoldOutNews times the sold-out from the source (flashgate only; nil
	// when the ledger has no zero of some SKU's count).
	SoldOutNews *SoldOutNews `json:"sold_out_news,omitempty"`
	// LastUnitAt is when the last available unit was reserved (seconds).
	LastUnitAt float64 `json:"last_unit_at_s"`
	// ReservesPerS is the holds granted (201s) per second, from the first
	// to the last.
	ReservesPerS float64 `json:"reserves_per_s"`
	// Admission is the sale's admission rate over the run and the changes
	// recorded for it (flashgate runs; nil for the naive baseline).
	Admission *Admission `json:"admission,omitempty"`

	// CPU is the CPU seconds each process group used while the crowd ran
	// (read from /proc): where the machine's cores went.
	CPU map[string]float64 `json:"cpu_s,omitempty"`
	// CPUs is the CPUs each process group was allowed to run on (its
	// affinity, from /proc): the run's pinning, as the report states it.
	CPUs map[string]string `json:"cpus,omitempty"`
	// Nice is each process group's nice value: the run's priorities (the
	// checkout below the waiting room, FLASHGATE_CHECKOUT_NICE).
	Nice map[string]string `json:"nice,omitempty"`
	// CrowdS is how long the crowd ran, for reading CPU against.
	CrowdS float64 `json:"crowd_s"`
	// StartLag is how late the simulator set shoppers going after their
	// planned click (seconds): its own lag on a busy machine.
	StartLag Dist `json:"start_lag"`
	// SchedWait is the p50 and p99 (ms) of how long the simulator's
	// goroutines waited to run while the crowd ran (the Go runtime's
	// /sched/latencies): reading a reply late adds that to its latency.
	SchedWait [2]float64 `json:"sched_wait_ms"`
	// CoreLoopMs is how long a fixed loop took on each CPU (by number)
	// before the crowd and after it (CoreSpeeds): ~70 ms on a quick core of
	// this machine; much more means the VM's core was slow under the run —
	// or busy: the loop shares the core with whatever still runs there (the
	// naive baseline's Postgres working off its backlog took it to 487 ms),
	// so it is a hint, read beside the simulator's own waits.
	CoreLoopMs [2]map[string]float64 `json:"core_loop_ms"`

	// Regions splits the shoppers by the region they shopped through, when
	// the run had two (Config.FarEdgeURL); empty otherwise.
	Regions []Region `json:"regions,omitempty"`

	// Stages are where the time of each path's requests went: the client's
	// view beside the services' own histograms, read over the crowd (see
	// Stage); empty when neither tier's /metrics could be read.
	Stages []Stage `json:"stages,omitempty"`

	Fairness Fairness `json:"fairness"`
	// Bots splits the crowd into the honest shoppers and the bot cohorts
	// (flashgate runs; empty for the naive baseline).
	Bots        Bots        `json:"bots"`
	Ledger      []LedgerSKU `json:"ledger,omitempty"`
	InvariantOK bool        `json:"invariant_ok"`
	// Notes are sentences the report prints as they are (what was bounded,
	// what was cut short, what to read with care).
	Notes []string `json:"notes,omitempty"`
}

// Scenario is what was asked of the crowd.
type Scenario struct {
	Shoppers       int     `json:"shoppers"`
	Stock          int     `json:"stock"`
	RatePerS       float64 `json:"rate_per_s"` // admission rate; 0 = unthrottled
	PreQueueS      float64 `json:"pre_queue_s"`
	PreQueueShare  float64 `json:"pre_queue_share"`
	BurstS         float64 `json:"burst_s"`
	BurstShare     float64 `json:"burst_share"`
	TailS          float64 `json:"tail_s"`
	PayProbability float64 `json:"pay_probability"`
	ImpatientShare float64 `json:"impatient_share"`
	StayShare      float64 `json:"stay_share"`     // of those told "sold out, units may come back", who keep waiting
	PageRefreshS   float64 `json:"page_refresh_s"` // how often a waiting shopper's page re-reads the snapshot (through the CDN)
	// PageWatch: each of those reads is a watch (?at=), held at the edge
	// until its second ends or the sale has news, so the page hears news
	// as it comes (docs/API.md); false: plain reads, news at the next.
	PageWatch bool `json:"page_watch"`
	// ReactionS is an honest shopper's mean time from "It's your turn" to
	// pressing Buy (each takes 0.5 to 1.5 times it, evenly); 0 presses at
	// once. Bots that reserve at once (BotCohort.InstantReserve) skip it.
	ReactionS float64 `json:"reaction_s"`
	// Hammering and Smart are the two bot cohorts beside the honest crowd,
	// each with its tactics; a cohort of no accounts is not there.
	Hammering    BotCohort `json:"hammering"`
	Smart        BotCohort `json:"smart"`
	HoldTTLS     int       `json:"hold_ttl_s"`
	MaxDurationS float64   `json:"max_duration_s"`
	MaxRequests  int       `json:"max_requests"`

	// UniformBurst spreads the burst evenly over BurstS (a steady rate, as
	// the capacity sweep asks) instead of densest at the open.
	UniformBurst bool `json:"uniform_burst,omitempty"`
}

// BotAccounts is the bot accounts of every cohort.
func (sc Scenario) BotAccounts() int { return sc.Hammering.Accounts + sc.Smart.Accounts }

// Cohorts are the scenario's bot cohorts that have accounts, hammering
// first, each with its name ("hammering", "smart" when the scenario gives
// none).
func (sc Scenario) Cohorts() []BotCohort {
	var out []BotCohort
	for _, c := range []struct {
		name string
		c    BotCohort
	}{{"hammering", sc.Hammering}, {"smart", sc.Smart}} {
		if c.c.Accounts <= 0 {
			continue
		}
		if c.c.Name == "" {
			c.c.Name = c.name
		}
		out = append(out, c.c)
	}
	return out
}

// BotCohort is one operator's bot accounts and the tactics they share.
// The zero tactics are a person's: an address each, arriving at the open,
// polling as told, a human's reaction before Buy, an admission token
// used by its own account only, a payment instrument each, a phone's CPU.
type BotCohort struct {
	Name     string `json:"name"`     // as the report calls it
	Accounts int    `json:"accounts"` // 0: no such cohort
	// Addresses is how many client addresses (X-Forwarded-For) the
	// accounts share, all in one /24, round robin; 0 gives every account
	// an address of its own, each in a /24 of its own (residential
	// proxies; up to 8,192 accounts a cohort).
	Addresses int `json:"addresses"`
	// PreQueue: every account joins in the first 200 ms of the pre-queue;
	// otherwise in the first 200 ms after the open.
	PreQueue bool `json:"pre_queue"`
	// PollMS: polls (and retries a refusal) every PollMS milliseconds,
	// whatever the edge says; 0 waits as told (poll_after_ms, Retry-After)
	// and, like the page, watches the snapshot for its turn and the draw.
	PollMS int `json:"poll_ms"`
	// InstantReserve: reserves within milliseconds of admission, without a
	// person's reaction (Scenario.ReactionS).
	InstantReserve bool `json:"instant_reserve"`
	// ShareTokens: an admitted account also hands its admission token to
	// the cohort's next account, which tries to reserve with it at the
	// same moment (with its own user token and address). The edge binds
	// admission tokens to their account: what happens is counted
	// (SharedTokens).
	ShareTokens bool `json:"share_tokens"`
	// AccountsPerInstrument is how many accounts pay with one payment
	// instrument (the payer the sandbox gateway's pay is told); 0 or 1:
	// one each.
	AccountsPerInstrument int `json:"accounts_per_instrument"`
	// ServerCPU: solves proofs of work at a server core's hash rate,
	// otherwise at a phone's (Defences).
	ServerCPU bool `json:"server_cpu"`
}

// Bots is what each bot cohort got beside the honest shoppers who arrived
// when it did, and what the run's defences cost the honest shoppers.
type Bots struct {
	// Defences are the defences the run asked for and what the stack made
	// of them.
	Defences Defences `json:"defences"`
	// Groups are the honest shoppers and each bot cohort, each split by
	// arrival class (pre-queue, later): the fairness table's rows.
	Groups []Group `json:"groups,omitempty"`
	// HonestAnswerP99 is the p99 time from the click to an honest answer
	// over the honest shoppers set going (bots left out), in seconds, as
	// Fates.AnswerP99 counts it.
	HonestAnswerP99 float64 `json:"honest_answer_p99_s"`
	// TarpitEntries is how many entries the edge's tarpit listed at the
	// end (since the run began), matched to a shopper or not; -1 when the
	// list could not be read.
	TarpitEntries int `json:"tarpit_entries"`
}

// Group is one row of the fairness table: the accounts of one cohort (the
// honest shoppers, or a bot cohort) that arrived in one class.
type Group struct {
	Cohort   string `json:"cohort"`    // "honest" or the bot cohort's name
	Bot      bool   `json:"bot"`       // a bot cohort
	PreQueue bool   `json:"pre_queue"` // arrived before the start; otherwise at the open or later
	Accounts int    `json:"accounts"`  // set going
	Held     int    `json:"held"`      // accounts that held a unit (won the race for one)
	Paid     int    `json:"paid"`      // units they paid for, as their orders said
	// Instruments is how many payment instruments paid for at least one
	// unit; MaxPaidPerInstrument and MeanPaidPerInstrument are over them.
	Instruments           int     `json:"instruments"`
	MaxPaidPerInstrument  int     `json:"max_paid_per_instrument"`
	MeanPaidPerInstrument float64 `json:"mean_paid_per_instrument"`
	// Challenged is how many accounts solved a proof of work for their
	// join (and waited their device's time for it): the challenge the sale
	// snapshot published, or a personal one a 403 challenge_required asked
	// for — what the proof of work cost, whatever the join then answered.
	Challenged int `json:"challenged"`
	// ChallengeRequired is how many accounts had a join answered 403
	// challenge_required (a second join, after a personal challenge): with
	// the published challenge, those whose solution the edge refused (too
	// old, the difficulty raised, a low-trust account) or who joined with
	// none.
	ChallengeRequired int `json:"challenge_required"`
	Tarpitted         int `json:"tarpitted"` // accounts the edge's tarpit listed, by account or address
	// SharedTokens is what came of the admission tokens the cohort's
	// accounts handed on; nil when they handed none.
	SharedTokens *SharedTokens `json:"shared_tokens,omitempty"`
}

// WinRate is the share of the group's accounts that held a unit.
func (g Group) WinRate() float64 {
	if g.Accounts == 0 {
		return 0
	}
	return float64(g.Held) / float64(g.Accounts)
}

// SharedTokens counts the reserves one account made with another's
// admission token, by answer.
type SharedTokens struct {
	Tried int `json:"tried"`
	// Refused: 401 or 403 at the edge or the origin (the token is not the
	// account's).
	Refused int `json:"refused"`
	// OwnersHold: 200, the existing hold of the token's own account.
	OwnersHold int `json:"owners_hold"`
	// ExtraHolds: 201, a new hold with another account's token (must be 0).
	ExtraHolds int `json:"extra_holds"`
	// Other: sold out, refusals for load, errors, silence.
	Other int `json:"other"`
}

// Endpoint is one endpoint's requests.
type Endpoint struct {
	Name     string         `json:"name"`
	Count    int            `json:"count"`
	ByStatus map[string]int `json:"by_status"` // "202", "429", ..., "timeout", "error"
	P50Ms    float64        `json:"p50_ms"`
	P99Ms    float64        `json:"p99_ms"`
	MaxMs    float64        `json:"max_ms"`
}

// Dist is a distribution's summary (seconds unless the field says ms).
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	// CDF is (value, share ≤ value) at up to 50 points, for charts.
	CDF [][2]float64 `json:"cdf,omitempty"`
}

// Fates splits shoppers by outcome.
type Fates struct {
	Reserved  Dist `json:"reserved"` // arrival → held a unit (flashgate) or bought (naive)
	SoldOut   Dist `json:"sold_out"` // arrival → told sold out
	Paid      int  `json:"paid"`
	Abandoned int  `json:"abandoned"` // held and walked away (the unit returns after the hold)
	Unknown   int  `json:"unknown"`   // no fate before the run's end (gave up, errors)
	// Answered is every shopper who got an honest answer — "you are in
	// line" (with a place and a wait), "you have it" or "sold out", not an
	// error or silence — and AnswerP99 their p99 time from the click to
	// the first such answer; the seeds ask for 2 s.
	Answered  int     `json:"answered"`
	AnswerP99 float64 `json:"answer_p99_s"`
}

// Second is one second of the run.
type Second struct {
	T           float64 `json:"t"`
	Requests    int     `json:"requests"`
	Status5xx   int     `json:"status_5xx"`
	Errors      int     `json:"errors"` // timeouts and transport errors
	QueueLength int64   `json:"queue_length"`
	NowServing  int64   `json:"now_serving"`
	Available   int64   `json:"available"`
	SoldOut     float64 `json:"sold_out"` // the share of the second's snapshot samples that said sold out
	P99Ms       float64 `json:"p99_ms"`
	// Endpoints splits the second's requests by endpoint: what the
	// services were asked for when, and how long each kind took.
	Endpoints map[string]SecondEndpoint `json:"endpoints,omitempty"`
	// CPU is the cores each process group used in this second (1 = one
	// core busy the whole second), read from /proc once a second.
	CPU map[string]float64 `json:"cpu,omitempty"`
}

// SecondEndpoint is one endpoint's requests sent in a second.
type SecondEndpoint struct {
	Requests int     `json:"requests"`
	P99Ms    float64 `json:"p99_ms"` // of those answered
}

// Region is what the shoppers of one region saw: the far region's pay the
// distance to the home region's Redis and origins on every join and reserve
// (docs/REGIONS.md says once each, and no more).
type Region struct {
	Name     string `json:"name"`     // "home" or "far"
	EdgeURL  string `json:"edge_url"` // where its shoppers were sent
	Shoppers int    `json:"shoppers"` // launched
	Answered int    `json:"answered"` // of which had an honest answer
	// Answer: click → first honest answer ("in line", "you have it", "sold
	// out"), as Fates.AnswerP99 counts it (silence counts until the end).
	Answer Dist `json:"answer"`
	// Join: the join's round trip, its retries included, for those who got
	// a place: from the first join sent (after the published challenge's
	// solve, when the snapshot had one) to the answer with the place, a
	// personal challenge's solve and second join included.
	Join Dist `json:"join"`
	// Reserve: the round trip of the reserve that got a hold (201 or the
	// repeat's 200).
	Reserve Dist `json:"reserve"`
	// Admitted: click → first status answer "admitted".
	Admitted Dist `json:"admitted"`
	// SoldOutNotice: as Result.SoldOutNotice, for this region's shoppers.
	SoldOutNotice Dist `json:"sold_out_notice"`
}

// Fairness is how closely admission followed arrival.
type Fairness struct {
	// Correlations are never NaN: too few pairs, or no variation, give 0.
	// RankCorrelation is Spearman's rho between the order in which shoppers
	// who arrived after the start sent their join and their place in the
	// admission order (the queue position the cursor admits by).
	RankCorrelation float64 `json:"rank_correlation"`
	Compared        int     `json:"compared"`
	// ObservedCorrelation: the same against the time each admitted shopper
	// first saw "admitted" — position order as the shoppers experienced it,
	// blurred by their polling interval.
	ObservedCorrelation float64 `json:"observed_correlation"`
	ObservedCompared    int     `json:"observed_compared"`
	BotUnits            int     `json:"bot_units"` // units the bot cohorts held or bought
	BotShare            float64 `json:"bot_share"` // of the stock
	BotAccounts         int     `json:"bot_accounts"`
}

// LedgerSKU is one SKU's final ledger, Redis and Postgres.
type LedgerSKU struct {
	SKU      string   `json:"sku"`
	Total    int64    `json:"total"`
	Redis    [3]int64 `json:"redis"` // available, held, sold
	Postgres [3]int64 `json:"postgres"`
	Drift    [3]int64 `json:"drift"`
	Pending  int      `json:"pending_intents"`
}

// Stage is one stage of a path's requests, in milliseconds: the client's
// round trip from every request the simulator timed, or a service's stage
// from its own histogram, the difference of scrapes before and after the
// crowd, with p50 and p99 interpolated inside buckets (as Prometheus's
// histogram_quantile does).
type Stage struct {
	Path string `json:"path"` // "reserve", "order", "order read", "join", "status"
	Name string `json:"name"` // "client: reserve", "edge: reserve handler", ...
	// Source is "client" or the series read: metric{label="value"}, added
	// up over the labels not named.
	Source string  `json:"source"`
	Count  int     `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
}
