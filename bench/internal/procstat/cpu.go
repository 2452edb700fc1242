// Package procstat measures the processes a benchmark runs: CPU time (this
// process and Redis, or process groups from /proc), the Go heap, CPU
// profiles, and the services' latency histograms from /metrics.
package procstat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sample is the CPU time used up to At by this process (the code under test
// and the load generator) and by redis-server, with Redis's counters.
type Sample struct {
	At       time.Time
	Self     time.Duration
	Redis    time.Duration
	Reads    int64 // read events redis-server has processed (total_reads_processed)
	Commands int64 // commands redis-server has run for all clients (total_commands_processed)
}

// Take reads a Sample now.
func Take(ctx context.Context, rdb *redis.Client) (Sample, error) {
	s := Sample{At: time.Now()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, fmt.Errorf("getrusage: %w", err)
	}
	s.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	info, err := rdb.Info(ctx, "cpu", "stats").Result()
	if err != nil {
		return s, fmt.Errorf("redis cpu: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			sec, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, fmt.Errorf("redis cpu: %s: %w", k, err)
			}
			s.Redis += time.Duration(sec * float64(time.Second))
		case "total_reads_processed":
			if s.Reads, err = strconv.ParseInt(v, 10, 64); err != nil {
				return s, fmt.Errorf("redis stats: %s: %w", k, err)
			}
		case "total_commands_processed":
			if s.Commands, err = strconv.ParseInt(v, 10, 64); err != nil {
				return s, fmt.Errorf("redis stats: %s: %w", k, err)
			}
		}
	}
	return s, nil
}

// Usage is how busy each process was between two samples, in cores (CPU
// seconds per second of wall time): 1.0 is one core all the time.
type Usage struct {
	// Process is this process: the code under test and the load
	// generator (for a redis-benchmark run, redis-benchmark's own).
	Process float64 `json:"process_cores"`
	// Redis is redis-server, whatever it ran; it is single-threaded, so
	// 1.0 is its ceiling.
	Redis float64 `json:"redis_cores"`
	// RedisReads is how many read events redis-server processed, over
	// every client: calls per read is the pipelining Redis actually saw.
	RedisReads int64 `json:"redis_reads"`
	// RedisCommands is how many commands redis-server ran for all its
	// clients, each command a script runs counted too.
	RedisCommands int64 `json:"redis_commands"`
	// RedisForeign is the rate of commands beyond the run's own (see
	// SetForeign): other clients sharing the Redis, whose work is in Redis
	// too.
	RedisForeign float64 `json:"redis_foreign_per_s,omitempty"`
}

// Between is the Usage from a to b.
func Between(a, b Sample) Usage {
	wall := b.At.Sub(a.At).Seconds()
	if wall <= 0 {
		return Usage{}
	}
	return Usage{
		Process:       (b.Self - a.Self).Seconds() / wall,
		Redis:         (b.Redis - a.Redis).Seconds() / wall,
		RedisReads:    b.Reads - a.Reads,
		RedisCommands: b.Commands - a.Commands,
	}
}

// SetForeign sets RedisForeign from the commands the run itself caused
// over elapsed.
func (u *Usage) SetForeign(own int, elapsed time.Duration) {
	if elapsed > 0 {
		u.RedisForeign = max(0, float64(u.RedisCommands-int64(own))/elapsed.Seconds())
	}
}

// Around runs f between two samples and returns its result with the Usage
// meanwhile.
func Around[T any](ctx context.Context, rdb *redis.Client, f func() T) (T, Usage, error) {
	a, err := Take(ctx, rdb)
	if err != nil {
		var zero T
		return zero, Usage{}, err
	}
	res := f()
	b, err := Take(ctx, rdb)
	if err != nil {
		return res, Usage{}, err
	}
	return res, Between(a, b), nil
}
