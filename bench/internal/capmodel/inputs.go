package capmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
)

// DateLayout is how a figure's date is written.
const DateLayout = "2006-01-02 15:04 UTC"

// Figure is one measured input with where it came from.
type Figure struct {
	Value float64 `json:"value"`
	// Measured is what the source says, in its words, and how Value
	// follows from it (a midpoint, a quotient).
	Measured string `json:"measured"`
	Command  string `json:"command,omitempty"` // the command that measured it; empty for a rule read from the code
	Date     string `json:"date,omitempty"`    // when it was measured, in DateLayout; empty where the source does not say (or for a rule read from the code)
	Source   string `json:"source"`            // where it is recorded: a section of docs/BENCHMARKS.md, a report, a file
}

// Time is the figure's date; ok false when it has none that parses.
func (f Figure) Time() (t time.Time, ok bool) {
	t, err := time.Parse(DateLayout, f.Date)
	return t, err == nil
}

// CostFigures are Costs with their provenance.
type CostFigures struct {
	EdgeJoin             Figure `json:"edge_join_us"`
	EdgePoll             Figure `json:"edge_poll_us"`
	EdgeSoldOut          Figure `json:"edge_sold_out_us"`
	EdgeProxied          Figure `json:"edge_proxied_us"`
	RedisJoin            Figure `json:"redis_join_us"`
	RedisReserve         Figure `json:"redis_reserve_us"`
	RedisBytesPerShopper Figure `json:"redis_bytes_per_shopper"`
	RedisBestJoins       Figure `json:"redis_best_joins_per_s"`
	OriginReserve        Figure `json:"origin_reserve_us"`
	PostgresReserve      Figure `json:"postgres_reserve_us"`
	OriginUnit           Figure `json:"origin_unit_us"`
	PostgresUnit         Figure `json:"postgres_unit_us"`
	ProxiedPerUnit       Figure `json:"proxied_per_unit"`
	WriterIntents        Figure `json:"writer_intents_per_s"`
	IntentsPerUnit       Figure `json:"intents_per_unit"`
	JoinsPerArrival      Figure `json:"joins_per_arrival"`
	CDNFetches           Figure `json:"cdn_fetches_per_cache_per_s"`
}

// Row is one figure as the document's table names it.
type Row struct {
	Label string
	Unit  string // after the value: "µs", "B", "/s", or "" for a count
	Fig   *Figure
}

// Rows are the cost figures in the document's order.
func (f *CostFigures) Rows() []Row {
	return []Row{
		{"edge CPU per join", "µs", &f.EdgeJoin},
		{"edge CPU per status poll (waiting, admitted or sold out)", "µs", &f.EdgePoll},
		{"edge CPU per sold-out reserve (409 from the snapshot)", "µs", &f.EdgeSoldOut},
		{"edge CPU per request passed to the origin", "µs", &f.EdgeProxied},
		{"Redis CPU per join (per queued shopper)", "µs", &f.RedisJoin},
		{"Redis memory per queued shopper", "B", &f.RedisBytesPerShopper},
		{"most joins a second one Redis has taken", "/s", &f.RedisBestJoins},
		{"Redis CPU per reserve", "µs", &f.RedisReserve},
		{"origin CPU per reserve", "µs", &f.OriginReserve},
		{"Postgres CPU per reserve (journal row)", "µs", &f.PostgresReserve},
		{"origin CPU per unit sold, everything in it", "µs", &f.OriginUnit},
		{"Postgres CPU per unit sold, everything in it", "µs", &f.PostgresUnit},
		{"requests passed to the origin per unit sold", "", &f.ProxiedPerUnit},
		{"order writer, one hot SKU", "/s", &f.WriterIntents},
		{"stream intents per unit sold", "", &f.IntentsPerUnit},
		{"joins per arriving shopper", "", &f.JoinsPerArrival},
		{"snapshot fetches per CDN cache", "/s", &f.CDNFetches},
	}
}

// Costs are the figures' values.
func (f CostFigures) Costs() Costs {
	return Costs{
		EdgeJoinMicros: f.EdgeJoin.Value, EdgePollMicros: f.EdgePoll.Value, EdgeSoldOutMicros: f.EdgeSoldOut.Value,
		EdgeProxiedMicros: f.EdgeProxied.Value, RedisJoinMicros: f.RedisJoin.Value, RedisReserveMicros: f.RedisReserve.Value,
		RedisBytesPerShopper: f.RedisBytesPerShopper.Value, RedisBestJoinsPerS: f.RedisBestJoins.Value,
		OriginReserveMicros: f.OriginReserve.Value, PostgresReserveMicros: f.PostgresReserve.Value,
		OriginUnitMicros: f.OriginUnit.Value, PostgresUnitMicros: f.PostgresUnit.Value, ProxiedPerUnit: f.ProxiedPerUnit.Value,
		WriterIntentsPerS: f.WriterIntents.Value, IntentsPerUnit: f.IntentsPerUnit.Value, JoinsPerArrival: f.JoinsPerArrival.Value,
		CDNFetchesPerCachePerS: f.CDNFetches.Value,
	}
}

// PageFigures are Page with where each rule is written.
type PageFigures struct {
	SnapshotPeriodS Figure `json:"snapshot_period_s"`
	FilesPerArrival Figure `json:"files_per_arrival"`
	MinPollS        Figure `json:"min_poll_s"`
	MaxPollS        Figure `json:"max_poll_s"`
	FarPollMinS     Figure `json:"far_poll_min_s"`
}

// Rows are the page's rules in the document's order.
func (p *PageFigures) Rows() []Row {
	return []Row{
		{"a page re-reads the sale snapshot (through the CDN) every", "s", &p.SnapshotPeriodS},
		{"page files each arrival loads (through the CDN)", "", &p.FilesPerArrival},
		{"shortest poll interval told to a waiting shopper", "s", &p.MinPollS},
		{"far back in line, a poll every (from)", "s", &p.FarPollMinS},
		{"far back in line, a poll every (to); the cap", "s", &p.MaxPollS},
	}
}

// Page is the rules' values.
func (p PageFigures) Page() Page {
	return Page{SnapshotPeriodS: p.SnapshotPeriodS.Value, FilesPerArrival: p.FilesPerArrival.Value,
		MinPollS: p.MinPollS.Value, MaxPollS: p.MaxPollS.Value, FarPollMinS: p.FarPollMinS.Value}
}

// Choice is a value the plan chooses, with the reason.
type Choice struct {
	Value float64 `json:"value"`
	Why   string  `json:"why"`
}

// PlanChoices are Plan with the reasons.
type PlanChoices struct {
	Headroom           Choice `json:"headroom"`
	EdgeCoresPerNode   Choice `json:"edge_cores_per_node"`
	OriginCoresPerNode Choice `json:"origin_cores_per_node"`
	MinNodes           Choice `json:"min_nodes"`
	CDNCaches          Choice `json:"cdn_caches"`
}

// Plan is the choices' values.
func (p PlanChoices) Plan() Plan {
	return Plan{Headroom: p.Headroom.Value, EdgeCoresPerNode: p.EdgeCoresPerNode.Value,
		OriginCoresPerNode: p.OriginCoresPerNode.Value, MinNodes: int(p.MinNodes.Value), CDNCaches: p.CDNCaches.Value}
}

// SeedInput is a Seed with the seed document it comes from.
type SeedInput struct {
	Name          string  `json:"name"`
	Shoppers      float64 `json:"shoppers"`
	WindowS       float64 `json:"window_s"`
	Stock         float64 `json:"stock"`
	AdmissionPerS float64 `json:"admission_per_s,omitempty"` // 0: stock / window
	Source        string  `json:"source"`
}

// Seed is the input as a Seed.
func (s SeedInput) Seed() Seed {
	return Seed{Name: s.Name, Shoppers: s.Shoppers, WindowS: s.WindowS, Stock: s.Stock, AdmissionPerS: s.AdmissionPerS}
}

// EdgeCheckInput is an EdgeCheck with its provenance.
type EdgeCheckInput struct {
	Name          string  `json:"name"`
	AddedRequests float64 `json:"added_requests"`
	AddedJoins    float64 `json:"added_joins"`
	AddedEdgeCPUS float64 `json:"added_edge_cpu_s"`
	Primary       bool    `json:"primary,omitempty"`
	Measured      string  `json:"measured"`
	Command       string  `json:"command"`
	Date          string  `json:"date"`
	Source        string  `json:"source"`
}

// Check is the input as an EdgeCheck.
func (e EdgeCheckInput) Check() EdgeCheck {
	return EdgeCheck{Name: e.Name, AddedRequests: e.AddedRequests, AddedJoins: e.AddedJoins, AddedEdgeCPUS: e.AddedEdgeCPUS, Primary: e.Primary}
}

// CheckoutCheckInput is a CheckoutCheck with its provenance.
type CheckoutCheckInput struct {
	Name         string  `json:"name"`
	Stock        float64 `json:"stock"`
	MeasuredCPUS float64 `json:"measured_cpu_s"`
	Measured     string  `json:"measured"`
	Command      string  `json:"command"`
	Date         string  `json:"date"`
	Source       string  `json:"source"`
}

// Check is the input as a CheckoutCheck.
func (c CheckoutCheckInput) Check() CheckoutCheck {
	return CheckoutCheck{Name: c.Name, Stock: c.Stock, MeasuredCPUS: c.MeasuredCPUS}
}

// Inputs are everything the model is computed from, as
// docs/capacity-inputs.json holds them.
type Inputs struct {
	About         string             `json:"about"`
	Costs         CostFigures        `json:"costs"`
	Page          PageFigures        `json:"page"`
	Plan          PlanChoices        `json:"plan"`
	Seeds         []SeedInput        `json:"seeds"`
	EdgeChecks    []EdgeCheckInput   `json:"edge_checks"`
	CheckoutCheck CheckoutCheckInput `json:"checkout_check"`
}

// Validate reports what is wrong with in: the model's own checks, one
// primary edge check, and a date in DateLayout on every figure that has one.
func (in *Inputs) Validate() error {
	errs := []error{in.Costs.Costs().Validate(), in.Page.Page().Validate(), in.Plan.Plan().Validate()}
	if len(in.Seeds) == 0 {
		errs = append(errs, errors.New("no seeds"))
	}
	for _, s := range in.Seeds {
		errs = append(errs, s.Seed().Validate())
	}
	primaries := 0
	for _, e := range in.EdgeChecks {
		if e.Primary {
			primaries++
		}
		if !(e.AddedEdgeCPUS != 0) || e.AddedJoins < 0 || e.AddedRequests < 0 {
			errs = append(errs, fmt.Errorf("edge check %q: want a measured CPU and no negative counts", e.Name))
		}
	}
	if primaries != 1 {
		errs = append(errs, fmt.Errorf("edge checks: %d marked primary, want 1", primaries))
	}
	if c := in.CheckoutCheck; !(c.Stock > 0) || !(c.MeasuredCPUS > 0) {
		errs = append(errs, errors.New("checkout check: stock and measured CPU must be positive"))
	}
	for _, r := range in.Costs.Rows() {
		if _, ok := r.Fig.Time(); !ok && r.Fig.Date != "" {
			errs = append(errs, fmt.Errorf("cost %q: date %q is not %q", r.Label, r.Fig.Date, DateLayout))
		}
	}
	return errors.Join(errs...)
}

// PrimaryCheck is the edge check marked primary.
func (in *Inputs) PrimaryCheck() EdgeCheckInput {
	for _, e := range in.EdgeChecks {
		if e.Primary {
			return e
		}
	}
	return EdgeCheckInput{}
}

// DecodeInputs reads inputs from JSON, refusing unknown fields, and
// validates them.
func DecodeInputs(b []byte) (*Inputs, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var in Inputs
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("capacity inputs: %w", err)
	}
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("capacity inputs: %w", err)
	}
	return &in, nil
}

// EncodeInputs writes in as indented JSON, as the checked-in file is.
func EncodeInputs(in *Inputs) ([]byte, error) {
	var b bytes.Buffer
	if err := benchreport.WriteJSON(&b, in); err != nil {
		return nil, fmt.Errorf("capacity inputs: %w", err)
	}
	return b.Bytes(), nil
}
