// Package benchreport writes every bench tool's report files (JSON,
// Markdown, charts; -json and -report-json) and holds what the reports
// share: timings, the machine, medians and the words for figures.
package benchreport

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
)

// Timing is one timed run of calls against one server or path.
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
	CPU        procstat.Usage `json:"cpu"`
}

// NewTiming is r's figures with cpu, each answer's label named by name.
func NewTiming(r loadgen.Result, name func(label int) string, cpu procstat.Usage) Timing {
	out := Timing{CPU: cpu,
		Calls: r.Calls, Seconds: r.Elapsed.Seconds(), PerSecond: r.PerSecond(),
		P50Millis: Millis(r.P50), P99Millis: Millis(r.P99), MaxMillis: Millis(r.Max),
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

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Machine is where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Redis      string `json:"redis"`
	Postgres   string `json:"postgres"`
	// LoadAverage is the 1, 5 and 15 minute load average at the start:
	// other work on the machine shows up here, and in lower figures.
	LoadAverage string `json:"load_average,omitempty"`
	// HashMaxListpackEntries is the Redis setting under which a hash stays
	// a compact listpack; a longer hash is a hash table.
	HashMaxListpackEntries string `json:"hash_max_listpack_entries,omitempty"`
}

// DescribeMachine reads this machine's CPUs and load, and the versions of
// the Redis and Postgres the run uses.
func DescribeMachine(ctx context.Context, rdb *redis.Client, pgURL string) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil { // Linux only; elsewhere left empty
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return m, fmt.Errorf("redis: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			m.Redis = v
		}
	}
	if kv, err := rdb.ConfigGet(ctx, "hash-max-listpack-entries").Result(); err == nil {
		m.HashMaxListpackEntries = kv["hash-max-listpack-entries"]
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return m, fmt.Errorf("postgres (the database must exist: make bench-reserve and make bench-edge create flashgate_bench): %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres); err != nil {
		return m, fmt.Errorf("postgres: %w", err)
	}
	return m, nil
}

// MachineLine names this machine in one line for a report: its CPUs
// (count and model), its OS, and the Go that built the run.
func MachineLine() string {
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil { // Linux only; elsewhere the architecture
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s, %s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.Version())
}

// Median is the median of xs; 0 when there are none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Verdict is how a report says whether a goal was met.
func Verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

// Counts lists m by key, for example "200 9990, 503 10".
func Counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Thousands is n with thousands separated: 1234567 → "1,234,567".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}
