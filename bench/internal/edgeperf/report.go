package edgeperf

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// Report is what one run measured; its JSON form is the -json output.
type Report struct {
	Machine  benchreport.Machine `json:"machine"`
	Prefix   string              `json:"redis_prefix"`
	Settings Settings            `json:"settings"`
	Paths    []*Path             `json:"paths,omitempty"`
	// PathsHeap is the process's heap before the paths' node started.
	PathsHeap procstat.Heap `json:"paths_start_heap"`
	Memory    *Memory       `json:"memory,omitempty"`
	Seconds   float64       `json:"seconds"` // wall time of the whole run
	Cleanup   struct {
		RedisKeys int `json:"redis_keys_deleted"`
	} `json:"cleanup"`
}

// Settings are what every path was measured with.
type Settings struct {
	Conns         int     `json:"conns"`
	Requests      int     `json:"requests"`       // timed requests per server per round
	ProxyRequests int     `json:"proxy_requests"` // the same for the proxied reserve
	Warmup        int     `json:"warmup"`
	Rounds        int     `json:"rounds"`
	Limits        string  `json:"limits"`
	Tick          string  `json:"tick"`
	Refresh       string  `json:"snapshot_refresh"`
	PollLine      int     `json:"poll_line"`
	PollAdmitted  float64 `json:"poll_admitted"`
	OriginWorkers bool    `json:"origin_workers"`
}

// Path is one request path of the edge, measured beside the bare handler.
type Path struct {
	Name    string  `json:"name"`
	Request string  `json:"request"`
	Expect  int     `json:"expect_status"`  // the status every edge answer should have
	Goal    float64 `json:"goal,omitempty"` // edge / bare; 0: reported only
	Rounds  []Round `json:"rounds"`
	Ratio   float64 `json:"ratio"` // edge / bare, median over rounds
	// CPUBoundRatio is the edge's, median over rounds (see ServerRun).
	CPUBoundRatio float64 `json:"cpu_bound_ratio"`
	// OriginRatio (proxied reserve only) is the origin alone / bare, and
	// EdgeOverOrigin the edge in front of it / the origin alone.
	OriginRatio    float64 `json:"origin_ratio,omitempty"`
	EdgeOverOrigin float64 `json:"edge_over_origin,omitempty"`
}

// Round is the bare handler and the code under test, one after the other,
// with the same requests.
type Round struct {
	Round int         `json:"round"`
	Runs  []ServerRun `json:"runs"`
}

// ServerRun is one server under the load generator.
type ServerRun struct {
	Server string `json:"server"` // "bare", "edge" or "origin"
	Addr   string `json:"addr"`
	benchreport.Timing
	Ratio float64 `json:"ratio"` // to the bare handler in the same round
	// ProcessMicros and RedisMicros are CPU time per request, in µs, of
	// this process and of redis-server: unlike req/s they barely move when
	// neighbours take the CPUs.
	ProcessMicros float64 `json:"process_cpu_us_per_request"`
	RedisMicros   float64 `json:"redis_cpu_us_per_request"`
	// CPUBoundRatio is the bare handler's process CPU per request over
	// this run's process CPU per request plus Redis's beyond its pace
	// during the bare run: the throughput ratio on a machine whose cores
	// are all the benchmark's and kept busy.
	CPUBoundRatio float64 `json:"cpu_bound_ratio"`
	// Node is what the edge node's own counters say it answered.
	Node map[string]int `json:"node_counters,omitempty"`
}

func (r Round) run(server string) (ServerRun, bool) {
	for _, x := range r.Runs {
		if x.Server == server {
			return x, true
		}
	}
	return ServerRun{}, false
}

// Memory is the node's heap and the line's Redis bytes with growing lines.
type Memory struct {
	Sale     string        `json:"sale"`
	Polls    int           `json:"polls_per_size"`
	Baseline procstat.Heap `json:"baseline"` // node started, line empty, nothing polled
	Sizes    []MemSize     `json:"sizes"`
	// HeapRatio is heap in use with the longest line over the shortest.
	HeapRatio float64 `json:"heap_ratio"`
	HeapGoal  float64 `json:"heap_goal"`
	// PerExtraPoller is the heap grown between the shortest and longest
	// line, over the extra distinct shoppers that polled: what the node
	// keeps per shopper.
	PerExtraPoller float64 `json:"heap_bytes_per_extra_poller"`
	RedisGoal      float64 `json:"redis_goal_bytes_per_shopper"`
}

// MemSize is one line length.
type MemSize struct {
	Shoppers        int                `json:"shoppers"`
	FillSeconds     float64            `json:"fill_seconds"` // joining the shoppers added since the last size
	FillPerSecond   float64            `json:"fill_per_second"`
	DistinctPollers int                `json:"distinct_pollers"`
	Polls           benchreport.Timing `json:"polls"`
	Node            map[string]int     `json:"node_counters,omitempty"`
	Heap            procstat.Heap      `json:"heap"`
	PeakInuseBytes  uint64             `json:"peak_heap_inuse_bytes"` // sampled during the polls, without forcing GC
	Redis           RedisLine          `json:"redis"`
}

// WriteTable writes the report for people.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	m, s := r.Machine, r.Settings
	fmt.Fprintf(&b, "edgebench: %d CPUs (GOMAXPROCS %d), %s, Redis %s (hash-max-listpack-entries %s), Postgres %s, load average %s\n",
		m.CPUs, m.GOMAXPROCS, m.Go, m.Redis, m.HashMaxListpackEntries, m.Postgres, m.LoadAverage)
	fmt.Fprintf(&b, "edge node: app.New + App.Start (tick %s, snapshot refresh %s), limits %s; origin workers %s\n",
		s.Tick, s.Refresh, s.Limits, onOff(s.OriginWorkers))
	if len(r.Paths) > 0 {
		fmt.Fprintf(&b, "\nPaths: %d connections, %d requests per server (proxied reserve %d) after %d warm-up, %s; heap in use at the start %.1f MiB\n",
			s.Conns, s.Requests, s.ProxyRequests, s.Warmup, plural(s.Rounds, "round"), mib(r.PathsHeap.InuseBytes))
		t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(t, "round\tpath\tserver\treq/s\tp50 ms\tp99 ms\tanswers\tprocess CPU\tRedis CPU\tprocess µs/req\tRedis µs/req\tratio\tCPU-bound ratio\t")
		for _, p := range r.Paths {
			for _, round := range p.Rounds {
				for _, run := range round.Runs {
					fmt.Fprintf(t, "%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.2f\t%.2f\t\n", round.Round, p.Name, run.Server,
						run.PerSecond, run.P50Millis, run.P99Millis, answers(run.Answers, run.Errors), run.CPU.Process, run.CPU.Redis,
						run.ProcessMicros, run.RedisMicros, run.Ratio, run.CPUBoundRatio)
				}
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
		for _, p := range r.Paths {
			for _, round := range p.Rounds {
				for _, run := range round.Runs {
					if run.FirstError != "" {
						fmt.Fprintf(&b, "  round %d %s %s: first error: %s\n", round.Round, p.Name, run.Server, run.FirstError)
					}
					if run.Server == "edge" && run.Answers[fmt.Sprint(p.Expect)] != run.Calls {
						fmt.Fprintf(&b, "  round %d %s: WARNING: %d of %d edge answers were not %d\n", round.Round, p.Name,
							run.Calls-run.Answers[fmt.Sprint(p.Expect)], run.Calls, p.Expect)
					}
					if len(run.Node) > 0 {
						fmt.Fprintf(&b, "  round %d %s, node counters: %s\n", round.Round, p.Name, answers(run.Node, 0))
					}
				}
			}
		}
		fmt.Fprintln(&b, "process CPU: this process (edge node, origin, bare server and load generator); Redis CPU: redis-server, all clients.")
		fmt.Fprintln(&b, "µs/req: CPU time per request (Redis: all its clients). ratio: req/s over the bare handler's in the same round.")
		fmt.Fprintln(&b, "CPU-bound ratio: the bare handler's process µs/req over this run's process µs/req plus Redis's beyond its pace during")
		fmt.Fprintln(&b, "the bare run: what the ratio would be with both cores the benchmark's and busy; neighbours move it far less than req/s.")
		for _, p := range r.Paths {
			goal := "reported only"
			if p.Goal > 0 {
				goal = fmt.Sprintf("goal >= %.2f: %s", p.Goal, benchreport.Verdict(p.Ratio >= p.Goal))
			}
			fmt.Fprintf(&b, "%-18s %-36s edge / bare %.2f (%s); CPU-bound %.2f", p.Name+":", p.Request, p.Ratio, goal, p.CPUBoundRatio)
			if p.OriginRatio > 0 {
				fmt.Fprintf(&b, "; origin alone / bare %.2f; edge / origin alone %.2f", p.OriginRatio, p.EdgeOverOrigin)
			}
			fmt.Fprintln(&b)
		}
	}
	if mem := r.Memory; mem != nil && len(mem.Sizes) > 0 {
		fmt.Fprintf(&b, "\nMemory: sale %q, line filled through the edge's Joiner; %d polls per size from shoppers spread over the line\n", mem.Sale, mem.Polls)
		t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(t, "shoppers\tfill joins/s\tpollers\tpolls/s\tpoll answers\theap in use MiB\tpeak MiB\tgoroutines\tRedis B/shopper\tplaces B/shopper\tused_memory B/shopper\tmodel B\tencoding\t")
		fmt.Fprintf(t, "0\t\t\t\t\t%.1f\t\t%d\t\t\t\t\t\t\n", mib(mem.Baseline.InuseBytes), mem.Baseline.Goroutines)
		for _, z := range mem.Sizes {
			fmt.Fprintf(t, "%d\t%.0f\t%d\t%.0f\t%s\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", z.Shoppers, z.FillPerSecond, z.DistinctPollers,
				z.Polls.PerSecond, pollStates(z.Node), mib(z.Heap.InuseBytes), mib(z.PeakInuseBytes), z.Heap.Goroutines,
				z.Redis.PerShopper, z.Redis.PlacesPerShopper, z.Redis.UsedMemoryPerShopper, z.Redis.Model.Total, z.Redis.Encoding)
		}
		if err := t.Flush(); err != nil {
			return err
		}
		first, last := mem.Sizes[0], mem.Sizes[len(mem.Sizes)-1]
		fmt.Fprintln(&b, "heap in use: runtime.ReadMemStats after GC, right after the polls, the polls' requests released; the whole process (node, origin, benchmark).")
		fmt.Fprintln(&b, "peak: the largest HeapInuse sampled during the polls without forcing GC, the same number of request bytes held at each size.")
		fmt.Fprintln(&b, "Redis B/shopper: MEMORY USAGE (SAMPLES 0) of the sale's queue keys / shoppers; used_memory: INFO used_memory growth / shoppers (allocator sizes, other clients included).")
		mo := last.Redis.Model
		fmt.Fprintf(&b, "model at %d: dictEntry %.0f + field sds %.0f (%.1f-byte account ids) + value sds %.0f (%.1f-digit places) + bucket share %.1f = %.1f B\n",
			last.Shoppers, mo.DictEntry, mo.Field, last.Redis.FieldBytes, mo.Value, last.Redis.ValueBytes, mo.Buckets, mo.Total)
		if mem.HeapRatio > 0 {
			fmt.Fprintf(&b, "node heap, %d vs %d shoppers in line: %.2f (goal flat, <= %.2f: %s); %.0f B per extra distinct poller\n",
				last.Shoppers, first.Shoppers, mem.HeapRatio, mem.HeapGoal, benchreport.Verdict(mem.HeapRatio <= mem.HeapGoal), mem.PerExtraPoller)
		} else {
			fmt.Fprintln(&b, "node heap: not compared (the phase did not finish every line size)")
		}
		for _, z := range mem.Sizes {
			fmt.Fprintf(&b, "Redis bytes per queued shopper at %d: %.1f (goal <= %.0f: %s)\n", z.Shoppers, z.Redis.PerShopper, mem.RedisGoal, benchreport.Verdict(z.Redis.PerShopper <= mem.RedisGoal))
		}
	}
	fmt.Fprintf(&b, "\n%.1f s; cleanup: %d Redis keys under %s unlinked\n", r.Seconds, r.Cleanup.RedisKeys, r.Prefix)
	_, err := io.WriteString(w, b.String())
	return err
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func onOff(b bool) string {
	if b {
		return "running"
	}
	return "stopped"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what + " (ratios are that round's)"
	}
	return fmt.Sprintf("%d %ss (ratios are medians)", n, what)
}

// pollStates is the node's poll counters by state, for example
// "admitted 87, waiting 4913".
func pollStates(node map[string]int) string {
	states := map[string]int{}
	for k, v := range node {
		if state, ok := strings.CutPrefix(k, "poll "); ok {
			states[state] = v
		}
		if k == "rejected rate_limited" {
			states["rate_limited"] = v
		}
	}
	return answers(states, 0)
}

// answers is m by key, and errs when there were any.
func answers(m map[string]int, errs int) string {
	s := benchreport.Counts(m)
	if errs > 0 {
		s += fmt.Sprintf(", errors %d", errs)
	}
	return s
}

// Measured reports whether r holds any figure.
func (r Report) Measured() bool { return len(r.Paths) > 0 || r.Memory != nil }
