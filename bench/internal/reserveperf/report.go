package reserveperf

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/bench/internal/reservescript"
)

// Report is what one run measured; its JSON form is the -json output.
type Report struct {
	Machine    benchreport.Machine `json:"machine"`
	Prefix     string              `json:"redis_prefix"`
	Script     *ScriptReport       `json:"script,omitempty"`
	Durability *DurabilityReport   `json:"durability,omitempty"`
	HTTP       *HTTPReport         `json:"http,omitempty"`
	Peers      *PeersReport        `json:"peers,omitempty"`
	Cleanup    struct {
		RedisKeys int `json:"redis_keys_deleted"`
	} `json:"cleanup"`
}

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
	reservescript.ReserverOptions
	benchreport.Timing
	Created int     `json:"created"`
	Other   int     `json:"other"` // every other outcome, errors included
	Ratio   float64 `json:"ratio"` // to redis-benchmark in the same round
}

// RedisBenchmarkRun is redis-benchmark with the same script and stock key.
type RedisBenchmarkRun struct {
	Round     int            `json:"round"`
	Args      []string       `json:"args"`
	Requests  int            `json:"requests"`
	Clients   int            `json:"clients"`
	Pipeline  int            `json:"pipeline"`
	PerSecond float64        `json:"per_second"`
	P50Millis float64        `json:"p50_ms"`
	P99Millis float64        `json:"p99_ms"`
	Created   int            `json:"created"` // units the run took from the stock key
	Other     int            `json:"other"`
	CPU       procstat.Usage `json:"cpu"` // Process is redis-benchmark's own
}

// DurabilityReport is the durability options (issue 9), each run by the
// Reserver with the headline setting against redis-servers of the run's own.
type DurabilityReport struct {
	Workers           int                           `json:"workers"`
	Reserves          int                           `json:"reserves"`
	Warmup            int                           `json:"warmup"`
	Primed            bool                          `json:"primed"` // each server had an untimed pass first
	Reserver          reservescript.ReserverOptions `json:"reserver"`
	WaitTimeoutMillis float64                       `json:"wait_timeout_ms"`
	Dir               string                        `json:"dir"`     // where the servers kept their files (AOF included)
	Servers           map[string]string             `json:"servers"` // each server's settings beyond port, bind, dir and logfile
	Runs              []DurabilityRun               `json:"runs"`    // one per option and round
	Options           []DurabilityOption            `json:"options"` // one per option, medians over rounds
}

// DurabilityRun is one option in one round.
type DurabilityRun struct {
	Round  int    `json:"round"`
	Option string `json:"option"`
	Server string `json:"server"` // plain, aof or primary (with a replica)
	benchreport.Timing
	Created   int     `json:"created"`
	Other     int     `json:"other"`               // every other outcome, errors included
	Journaled int     `json:"journaled,omitempty"` // journal rows after the run, warm-up included
	Ratio     float64 `json:"ratio"`               // to none in the same round
}

// DurabilityOption is one option over every round.
type DurabilityOption struct {
	Option    string  `json:"option"`
	About     string  `json:"about"`
	PerSecond float64 `json:"per_second"` // median over rounds
	P50Millis float64 `json:"p50_ms"`     // median of the rounds' p50
	P99Millis float64 `json:"p99_ms"`     // median of the rounds' p99
	Ratio     float64 `json:"ratio"`      // to none, median over rounds
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
	// JournalRatio is the origin (journal on, its default) over the same
	// origin with the journal off, median over rounds; 0 if not measured.
	JournalRatio float64 `json:"journal_ratio,omitempty"`
}

// HTTPRound is every server, one after the other, with the same requests.
type HTTPRound struct {
	Round           int      `json:"round"`
	Origin          HTTPRun  `json:"origin"`
	OriginNoJournal *HTTPRun `json:"origin_no_journal,omitempty"` // the origin with FLASHGATE_RESERVE_JOURNAL=0
	Bare            HTTPRun  `json:"bare"`
	Ratio           float64  `json:"ratio"`
	JournalRatio    float64  `json:"journal_ratio,omitempty"` // origin / origin without the journal
}

// HTTPRun is one server under the load generator.
type HTTPRun struct {
	Addr string `json:"addr"`
	benchreport.Timing
	Created int `json:"status_201"`
	Other   int `json:"other"` // every other status, errors included
}

// PeersReport is the peers phase (issue 31): flashgate's reserve route
// beside the seckill and the pgserializable design, each started fresh in
// every round with Units units and sent the same Accounts shoppers.
type PeersReport struct {
	Units         int         `json:"units"`
	Accounts      int         `json:"accounts"`
	Conns         int         `json:"conns"`
	OriginWorkers bool        `json:"origin_workers"`
	Rounds        []PeerRound `json:"rounds"`
	// SeckillRatio and SerializableRatio are flashgate's attempts per
	// second over each peer's, medians over rounds.
	SeckillRatio      float64 `json:"seckill_ratio"`
	SerializableRatio float64 `json:"serializable_ratio"`
	SeckillGoal       float64 `json:"seckill_goal"`
	SerializableGoal  float64 `json:"serializable_goal"`
	// GuaranteesKept is whether flashgate kept every guarantee in every
	// round (flashgateBroken lists them); a goal is met only then.
	GuaranteesKept bool `json:"guarantees_kept"`
}

// PeerRound is the three designs, one after the other, with the same
// shoppers.
type PeerRound struct {
	Round             int     `json:"round"`
	Flashgate         PeerRun `json:"flashgate"`
	Seckill           PeerRun `json:"seckill"`
	Serializable      PeerRun `json:"pgserializable"`
	SeckillRatio      float64 `json:"seckill_ratio"`      // flashgate / seckill attempts per second
	SerializableRatio float64 `json:"serializable_ratio"` // flashgate / pgserializable attempts per second
}

// PeerRun is one design under the load generator: every shopper's one
// attempt, answered or failed, over the wall time.
type PeerRun struct {
	Design string `json:"design"`
	Addr   string `json:"addr"`
	benchreport.Timing
	Created   int      `json:"status_201"`
	SoldOut   int      `json:"status_409"`
	Failed    int      `json:"status_5xx"`
	Other     int      `json:"other"`               // every other answer, errors included
	Sold      int      `json:"sold"`                // units gone from the stock at the end, by the design's own books
	Journaled int      `json:"journaled,omitempty"` // flashgate: reserve journal rows at the end
	Broken    []string `json:"broken,omitempty"`    // flashgate: guarantees broken; a peer: what voids its run
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
					run.Created, run.Other, run.CPU.Process, run.CPU.Redis, perRead(run.Calls, run.CPU),
					run.CPU.RedisForeign, run.Ratio)
			}
			fmt.Fprintf(t, "%d\tredis-benchmark -c %d\t-P %d\t\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%s\t%.0f\t1.00\t\n",
				rb.Round, rb.Clients, rb.Pipeline, rb.PerSecond, rb.P50Millis, rb.P99Millis, rb.Created, rb.Other,
				rb.CPU.Process, rb.CPU.Redis, perRead(rb.Requests, rb.CPU),
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
				fmt.Fprintf(&b, "  round %d, %d x %d: outcomes %s\n", run.Round, run.Pipelines, run.MaxBatch, benchreport.Counts(run.Answers))
			}
		}
		fmt.Fprintln(&b, "CPU: cores busy during the timed run (1.00 = one core; Redis uses at most one); client is this process or redis-benchmark.")
		fmt.Fprintln(&b, "per read: reserves per read event in Redis, the pipelining it saw. other: every outcome but created, errors included.")
		fmt.Fprintln(&b, "foreign/s: commands per second Redis ran for other clients meanwhile; Redis CPU includes them.")
		fmt.Fprintf(&b, "Reserver / redis-benchmark: %.2f (%s; goal >= %.2f: %s)\n", s.Ratio, medianOf(len(s.RedisBenchmark)), s.Goal, benchreport.Verdict(s.Ratio >= s.Goal))
	}
	if d := r.Durability; d != nil && len(d.Runs) > 0 {
		if err := d.writeTable(&b); err != nil {
			return err
		}
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
			type row struct {
				name string
				run  HTTPRun
			}
			rows := []row{{"origin (app.New, public handler)", round.Origin}}
			if round.OriginNoJournal != nil {
				rows = append(rows, row{"origin, reserve journal off", *round.OriginNoJournal})
			}
			for _, row := range append(rows, row{"bare fasthttp handler", round.Bare}) {
				fmt.Fprintf(t, "%d\t%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%.0f\t%.2f\t\n", round.Round, row.name,
					row.run.PerSecond, row.run.P50Millis, row.run.P99Millis, row.run.Created, row.run.Other,
					row.run.CPU.Process, row.run.CPU.Redis, row.run.CPU.RedisForeign,
					row.run.PerSecond/round.Bare.PerSecond)
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
		for _, round := range h.Rounds {
			runs := []HTTPRun{round.Origin, round.Bare}
			if round.OriginNoJournal != nil {
				runs = append(runs, *round.OriginNoJournal)
			}
			for _, run := range runs {
				if run.Other > 0 {
					fmt.Fprintf(&b, "  round %d, %s answered %s; first error: %s\n", round.Round, run.Addr, benchreport.Counts(run.Answers), run.FirstError)
				}
			}
		}
		fmt.Fprintln(&b, "process CPU: this process, which runs the server and the load generator; Redis CPU: redis-server,")
		fmt.Fprintln(&b, "which meanwhile ran foreign/s commands per second for other clients.")
		fmt.Fprintf(&b, "origin / bare: %.2f (%s; goal >= %.2f: %s)\n", h.Ratio, medianOf(len(h.Rounds)), h.Goal, benchreport.Verdict(h.Ratio >= h.Goal))
		if h.JournalRatio > 0 {
			fmt.Fprintf(&b, "origin / origin with the reserve journal off: %.2f (%s)\n", h.JournalRatio, medianOf(len(h.Rounds)))
		}
	}
	if p := r.Peers; p != nil && len(p.Rounds) > 0 {
		if err := p.writeTable(&b); err != nil {
			return err
		}
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
func perRead(calls int, cpu procstat.Usage) string {
	if cpu.RedisReads <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(calls)/float64(cpu.RedisReads))
}

func (d *DurabilityReport) writeTable(b *strings.Builder) error {
	primed := "servers not primed"
	if d.Primed {
		primed = "each server primed by an untimed pass"
	}
	fmt.Fprintf(b, "\nDurability (issue 9): Reserver, %d goroutines, %d pipelines x %d, %d reserves per run after %d warm-up, on redis-servers of the run's own in %s; %s\n",
		d.Workers, d.Reserver.Pipelines, d.Reserver.MaxBatch, d.Reserves, d.Warmup, d.Dir, primed)
	t := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(t, "round\toption\tserver\treserves/s\tp50 ms\tp99 ms\tcreated\tother\tjournaled\tclient CPU\tRedis CPU\tper read\tratio\t")
	for _, run := range d.Runs {
		journaled := "-"
		if run.Journaled > 0 {
			journaled = fmt.Sprint(run.Journaled)
		}
		fmt.Fprintf(t, "%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%s\t%.2f\t%.2f\t%s\t%.2f\t\n",
			run.Round, run.Option, run.Server, run.PerSecond, run.P50Millis, run.P99Millis, run.Created, run.Other,
			journaled, run.CPU.Process, run.CPU.Redis, perRead(run.Calls, run.CPU), run.Ratio)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, run := range d.Runs {
		if run.Errors > 0 {
			fmt.Fprintf(b, "  round %d, %s: %d errors, first: %s\n", run.Round, run.Option, run.Errors, run.FirstError)
		}
		if run.Other > 0 {
			fmt.Fprintf(b, "  round %d, %s: outcomes %s\n", run.Round, run.Option, benchreport.Counts(run.Answers))
		}
	}
	rounds := 0
	for _, run := range d.Runs {
		rounds = max(rounds, run.Round)
	}
	fmt.Fprintf(b, "Per option (%s; ratio to none in the same round):\n", medianOf(rounds))
	t = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, o := range d.Options {
		fmt.Fprintf(t, "  %s\t%.0f reserves/s\tp50 %.2f ms\tp99 %.2f ms\tratio %.2f\t%s\n", o.Option, o.PerSecond, o.P50Millis, o.P99Millis, o.Ratio, o.About)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(b, "Redis CPU is the server the run used (the primary for replica and wait); journaled: rows in Postgres after the run.")
	fmt.Fprintln(b, "Every server: redis-server bound to 127.0.0.1 with save \"\" and appendonly no, a port and folder of its own; aof adds")
	fmt.Fprintln(b, "appendonly yes and appendfsync always, and the primary has a replica (replicaof) of the same settings.")
	return nil
}

func (p *PeersReport) writeTable(b *strings.Builder) error {
	work := "order writer and sweeper stopped"
	if p.OriginWorkers {
		work = "order writer and sweeper running"
	}
	fmt.Fprintf(b, "\nPeers (issue 31): POST /v1/sales/{sale}/reserve, %d units, %d shoppers each attempting once with an admission token of its own, %d connections; every design started fresh each round (flashgate's %s)\n",
		p.Units, p.Accounts, p.Conns, work)
	t := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(t, "round\tdesign\tattempts/s\tp50 ms\tp99 ms\t201\t409\t5xx\tother\tsold\tprocess CPU\tRedis CPU\tflashgate / it\t")
	names := map[string]string{
		PeerFlashgate:    "flashgate (origin, reserve journal on)",
		PeerSeckill:      "seckill (Redis Lua, no checks)",
		PeerSerializable: "pgserializable (no retry)",
	}
	for _, round := range p.Rounds {
		for _, run := range []PeerRun{round.Flashgate, round.Seckill, round.Serializable} {
			if run.Design == "" {
				continue // the round stopped before this design ran
			}
			ratio := "-"
			if run.PerSecond > 0 && round.Flashgate.PerSecond > 0 {
				ratio = fmt.Sprintf("%.2f", round.Flashgate.PerSecond/run.PerSecond)
			}
			fmt.Fprintf(t, "%d\t%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t\n", round.Round, names[run.Design],
				run.PerSecond, run.P50Millis, run.P99Millis, run.Created, run.SoldOut, run.Failed, run.Other, run.Sold,
				run.CPU.Process, run.CPU.Redis, ratio)
		}
	}
	if err := t.Flush(); err != nil {
		return err
	}
	var broken []string
	for _, round := range p.Rounds {
		for _, run := range []PeerRun{round.Flashgate, round.Seckill, round.Serializable} {
			if run.Failed > 0 || run.Other > 0 {
				fmt.Fprintf(b, "  round %d, %s answered %s", round.Round, run.Design, benchreport.Counts(run.Answers))
				if run.Errors > 0 {
					fmt.Fprintf(b, ", %d failed; first error: %s", run.Errors, run.FirstError)
				}
				fmt.Fprintln(b)
			}
			for _, why := range run.Broken {
				broken = append(broken, fmt.Sprintf("round %d, %s: %s", round.Round, run.Design, why))
			}
		}
	}
	fmt.Fprintln(b, "attempts/s: every answer over the wall time; sold: units gone from the stock at the end, by the design's own books.")
	fmt.Fprintln(b, "seckill checks no account, token or idempotency key; pgserializable answers each transaction Postgres could not")
	fmt.Fprintln(b, "serialize 503 without retrying it: that shopper leaves, and the unit is unsold at the end unless a later one takes it.")
	kept := "kept in every round"
	if !p.GuaranteesKept {
		kept = "BROKEN"
	}
	fmt.Fprintf(b, "flashgate's guarantees (exactly the units answered 201, as many gone from the stock, a journal row per 201,\nno 5xx, every other shopper told sold out): %s\n", kept)
	for _, line := range broken {
		fmt.Fprintf(b, "  %s\n", line)
	}
	rounds := medianOf(len(p.Rounds))
	fmt.Fprintf(b, "flashgate / seckill: %.2f (%s; goal >= %.2f with every guarantee kept: %s)\n",
		p.SeckillRatio, rounds, p.SeckillGoal, benchreport.Verdict(p.GuaranteesKept && p.SeckillRatio >= p.SeckillGoal))
	fmt.Fprintf(b, "flashgate / pgserializable: %.2f (%s; goal >= %.2f with every guarantee kept: %s)\n",
		p.SerializableRatio, rounds, p.SerializableGoal, benchreport.Verdict(p.GuaranteesKept && p.SerializableRatio >= p.SerializableGoal))
	return nil
}

// Measured reports whether r holds any figure.
func (r Report) Measured() bool {
	return r.Script != nil || r.Durability != nil || r.HTTP != nil || r.Peers != nil
}
