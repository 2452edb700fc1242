package reservebench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate/bench/internal/drive"
	"github.com/flashgate/flashgate/bench/internal/originside"
)

// Report is what one run measured; its JSON form is the -json output.
type Report struct {
	Machine Machine       `json:"machine"`
	Prefix  string        `json:"redis_prefix"`
	Script  *ScriptReport `json:"script,omitempty"`
	HTTP    *HTTPReport   `json:"http,omitempty"`
	Cleanup struct {
		RedisKeys int `json:"redis_keys_deleted"`
	} `json:"cleanup"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Redis      string `json:"redis"`
	Postgres   string `json:"postgres"`
	// LoadAverage is the 1, 5 and 15 minute load average at the start: other
	// work on the machine shows up here, and in lower figures.
	LoadAverage string `json:"load_average,omitempty"`
}

// Timing is one timed run of calls.
type Timing struct {
	Calls      int            `json:"calls"`
	Seconds    float64        `json:"seconds"`
	PerSecond  float64        `json:"per_second"`
	P50Millis  float64        `json:"p50_ms"`
	P99Millis  float64        `json:"p99_ms"`
	MaxMillis  float64        `json:"max_ms"`
	Answers    map[string]int `json:"answers"` // by outcome or HTTP status
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	CPU        CPU            `json:"cpu"`
}

func newTiming(r drive.Result, name func(int) string, cpu CPU) Timing {
	out := Timing{CPU: cpu,
		Calls: r.Calls, Seconds: r.Elapsed.Seconds(), PerSecond: r.PerSecond(),
		P50Millis: millis(r.P50), P99Millis: millis(r.P99), MaxMillis: millis(r.Max),
		Answers: map[string]int{}, Errors: r.Errors,
	}
	for l, n := range r.Labels {
		out.Answers[name(l)] = n
	}
	if r.Err != nil {
		out.FirstError = r.Err.Error()
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ScriptReport is the script path.
type ScriptReport struct {
	Workers        int                 `json:"workers"`
	Reserves       int                 `json:"reserves"`
	Warmup         int                 `json:"warmup"`
	Primed         bool                `json:"primed"` // an untimed redis-benchmark pass ran first
	ScriptSHA1     string              `json:"script_sha1"`
	Runs           []ScriptRun         `json:"runs"`            // one per Reserver setting and round
	RedisBenchmark []RedisBenchmarkRun `json:"redis_benchmark"` // one per round
	Ratio          float64             `json:"ratio"`           // the first setting's, median over rounds
	Goal           float64             `json:"goal"`
}

// ScriptRun is checkout.Reserver with one setting.
type ScriptRun struct {
	Round int `json:"round"`
	originside.ReserverOptions
	Timing
	Created int     `json:"created"`
	Other   int     `json:"other"` // every other outcome, errors included
	Ratio   float64 `json:"ratio"` // to redis-benchmark in the same round
}

// RedisBenchmarkRun is redis-benchmark with the same script and stock key.
type RedisBenchmarkRun struct {
	Round     int      `json:"round"`
	Args      []string `json:"args"`
	Requests  int      `json:"requests"`
	Clients   int      `json:"clients"`
	Pipeline  int      `json:"pipeline"`
	PerSecond float64  `json:"per_second"`
	P50Millis float64  `json:"p50_ms"`
	P99Millis float64  `json:"p99_ms"`
	Created   int      `json:"created"` // units the run took from the stock key
	Other     int      `json:"other"`
	CPU       CPU      `json:"cpu"` // Bench is redis-benchmark's own
}

// HTTPReport is the HTTP path.
type HTTPReport struct {
	Conns         int         `json:"conns"`
	Requests      int         `json:"requests"`
	Warmup        int         `json:"warmup"`
	OriginWorkers bool        `json:"origin_workers"`
	Rounds        []HTTPRound `json:"rounds"`
	Ratio         float64     `json:"ratio"` // median over rounds
	Goal          float64     `json:"goal"`
}

// HTTPRound is both servers, one after the other, with the same requests.
type HTTPRound struct {
	Round  int     `json:"round"`
	Origin HTTPRun `json:"origin"`
	Bare   HTTPRun `json:"bare"`
	Ratio  float64 `json:"ratio"`
}

// HTTPRun is one server under the load generator.
type HTTPRun struct {
	Addr string `json:"addr"`
	Timing
	Created int `json:"status_201"`
	Other   int `json:"other"` // every other status, errors included
}

// WriteTable writes the report for people.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "reservebench: %d CPUs (GOMAXPROCS %d), %s, Redis %s, Postgres %s, load average %s\n",
		m.CPUs, m.GOMAXPROCS, m.Go, m.Redis, m.Postgres, m.LoadAverage)
	if s := r.Script; s != nil && len(s.RedisBenchmark) > 0 {
		primed := "Redis not primed"
		if s.Primed {
			primed = "Redis primed by an untimed pass"
		}
		fmt.Fprintf(&b, "\nScript path: reserve.lua (sha1 %.12s), %d reserves per run after %d warm-up, each a new shopper; %s\n",
			s.ScriptSHA1, s.Reserves, s.Warmup, primed)
		t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(t, "round\tpath\tpipelines\tmax batch\treserves/s\tp50 ms\tp99 ms\tcreated\tother\tclient CPU\tRedis CPU\tper read\tforeign/s\tratio\t")
		for _, rb := range s.RedisBenchmark {
			for _, run := range s.Runs {
				if run.Round != rb.Round {
					continue
				}
				fmt.Fprintf(t, "%d\tReserver, %d goroutines\t%d\t%d\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%s\t%.0f\t%.2f\t\n",
					run.Round, s.Workers, run.Pipelines, run.MaxBatch, run.PerSecond, run.P50Millis, run.P99Millis,
					run.Created, run.Other, run.CPU.Bench, run.CPU.Redis, perRead(run.Calls, run.CPU),
					run.CPU.RedisForeign, run.Ratio)
			}
			fmt.Fprintf(t, "%d\tredis-benchmark -c %d\t-P %d\t\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%s\t%.0f\t1.00\t\n",
				rb.Round, rb.Clients, rb.Pipeline, rb.PerSecond, rb.P50Millis, rb.P99Millis, rb.Created, rb.Other,
				rb.CPU.Bench, rb.CPU.Redis, perRead(rb.Requests, rb.CPU),
				rb.CPU.RedisForeign)
		}
		if err := t.Flush(); err != nil {
			return err
		}
		for _, run := range s.Runs {
			if run.Errors > 0 {
				fmt.Fprintf(&b, "  round %d, %d x %d: %d errors, first: %s\n", run.Round, run.Pipelines, run.MaxBatch, run.Errors, run.FirstError)
			}
			if run.Other > 0 {
				fmt.Fprintf(&b, "  round %d, %d x %d: outcomes %s\n", run.Round, run.Pipelines, run.MaxBatch, answers(run.Answers))
			}
		}
		fmt.Fprintln(&b, "CPU: cores busy during the timed run (1.00 = one core; Redis uses at most one); client is this process or redis-benchmark.")
		fmt.Fprintln(&b, "per read: reserves per read event in Redis, the pipelining it saw. other: every outcome but created, errors included.")
		fmt.Fprintln(&b, "foreign/s: commands per second Redis ran for other clients meanwhile; Redis CPU includes them.")
		fmt.Fprintf(&b, "Reserver / redis-benchmark: %.2f (%s; goal >= %.2f: %s)\n", s.Ratio, medianOf(len(s.RedisBenchmark)), s.Goal, verdict(s.Ratio, s.Goal))
	}
	if h := r.HTTP; h != nil && len(h.Rounds) > 0 {
		work := "order writer and sweeper stopped"
		if h.OriginWorkers {
			work = "order writer and sweeper running"
		}
		fmt.Fprintf(&b, "\nHTTP path: POST /v1/sales/{sale}/reserve, %d connections, %d requests per server after %d warm-up (%s)\n",
			h.Conns, h.Requests, h.Warmup, work)
		t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(t, "round\tserver\treq/s\tp50 ms\tp99 ms\t201\tother\tprocess CPU\tRedis CPU\tforeign/s\tratio\t")
		for _, round := range h.Rounds {
			for _, row := range []struct {
				name string
				run  HTTPRun
			}{{"origin (app.New, public handler)", round.Origin}, {"bare fasthttp handler", round.Bare}} {
				fmt.Fprintf(t, "%d\t%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%.0f\t%.2f\t\n", round.Round, row.name,
					row.run.PerSecond, row.run.P50Millis, row.run.P99Millis, row.run.Created, row.run.Other,
					row.run.CPU.Bench, row.run.CPU.Redis, row.run.CPU.RedisForeign,
					row.run.PerSecond/round.Bare.PerSecond)
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
		for _, round := range h.Rounds {
			for _, run := range []HTTPRun{round.Origin, round.Bare} {
				if run.Other > 0 {
					fmt.Fprintf(&b, "  round %d, %s answered %s; first error: %s\n", round.Round, run.Addr, answers(run.Answers), run.FirstError)
				}
			}
		}
		fmt.Fprintln(&b, "process CPU: this process, which runs the server and the load generator; Redis CPU: redis-server,")
		fmt.Fprintln(&b, "which meanwhile ran foreign/s commands per second for other clients.")
		fmt.Fprintf(&b, "origin / bare: %.2f (%s; goal >= %.2f: %s)\n", h.Ratio, medianOf(len(h.Rounds)), h.Goal, verdict(h.Ratio, h.Goal))
	}
	fmt.Fprintf(&b, "\ncleanup: %d Redis keys under %s unlinked\n", r.Cleanup.RedisKeys, r.Prefix)
	_, err := io.WriteString(w, b.String())
	return err
}

func medianOf(rounds int) string {
	if rounds == 1 {
		return "1 round"
	}
	return fmt.Sprintf("median of %d rounds", rounds)
}

// perRead is calls per Redis read event: how much pipelining Redis saw.
func perRead(calls int, cpu CPU) string {
	if cpu.RedisReads <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(calls)/float64(cpu.RedisReads))
}

func verdict(ratio, goal float64) string {
	if ratio >= goal {
		return "met"
	}
	return "NOT met"
}

func answers(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
