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
	// LastUnitAt is when the last available unit was reserved (seconds).
	LastUnitAt float64 `json:"last_unit_at_s"`
	// ReservesPerS is the holds granted (201s) per second, from the first
	// to the last.
	ReservesPerS float64 `json:"reserves_per_s"`

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

	Fairness    Fairness    `json:"fairness"`
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
	Bots           int     `json:"bots"`           // bot accounts
	BotIPs         int     `json:"bot_ips"`        // addresses they share
	HoldTTLS       int     `json:"hold_ttl_s"`
	MaxDurationS   float64 `json:"max_duration_s"`
	MaxRequests    int     `json:"max_requests"`

	// UniformBurst spreads the burst evenly over BurstS (a steady rate, as
	// the capacity sweep asks) instead of densest at the open.
	UniformBurst bool `json:"uniform_burst,omitempty"`
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
	// a place.
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
	BotUnits            int     `json:"bot_units"` // units the bot cohort held or bought
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
