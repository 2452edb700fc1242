package edgeperf

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/cpustat"
)

// CPU is how busy each process was during a timed run, in cores (CPU
// seconds per second of wall time): 1.0 is one core all the time.
type CPU struct {
	Process float64 `json:"process_cores"` // this process: edge, origin, bare server and load generator
	Redis   float64 `json:"redis_cores"`   // redis-server, whatever it ran; 1.0 is its ceiling
	// RedisCommands is how many commands redis-server ran for all its
	// clients meanwhile, each command a script runs counted too.
	RedisCommands int64 `json:"redis_commands"`
}

type cpuSample struct {
	at            time.Time
	self, redis   time.Duration
	redisCommands int64
}

func sampleCPU(ctx context.Context, rdb *redis.Client) (cpuSample, error) {
	x, err := cpustat.Take(ctx, rdb)
	return cpuSample{at: x.At, self: x.Self, redis: x.Redis, redisCommands: x.Commands}, err
}

func cpuBetween(a, b cpuSample) CPU {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPU{}
	}
	return CPU{
		Process:       (b.self - a.self).Seconds() / wall,
		Redis:         (b.redis - a.redis).Seconds() / wall,
		RedisCommands: b.redisCommands - a.redisCommands,
	}
}

// measure runs f between two CPU samples.
func measure[T any](ctx context.Context, rdb *redis.Client, f func() T) (T, CPU, error) {
	a, err := sampleCPU(ctx, rdb)
	if err != nil {
		var zero T
		return zero, CPU{}, err
	}
	res := f()
	b, err := sampleCPU(ctx, rdb)
	if err != nil {
		return res, CPU{}, err
	}
	return res, cpuBetween(a, b), nil
}

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
	// a compact listpack; a line longer than it is a hash table.
	HashMaxListpackEntries string `json:"hash_max_listpack_entries"`
}

func describeMachine(ctx context.Context, rdb *redis.Client, pgURL string) (Machine, error) {
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
		return m, fmt.Errorf("postgres (the database must exist, e.g. createdb flashgate_bench): %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres); err != nil {
		return m, fmt.Errorf("postgres: %w", err)
	}
	return m, nil
}
