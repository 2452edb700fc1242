package reserveperf

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/bench/internal/cpustat"
)

// cpuSample is the CPU time used so far by this process (the code under
// test and the load generator) and by redis-server.
type cpuSample struct {
	at          time.Time
	self, redis time.Duration
	reads       int64 // read events redis-server has processed (total_reads_processed)
	commands    int64 // commands redis-server has run for its clients (total_commands_processed)
}

func sampleCPU(ctx context.Context, rdb *redis.Client) (cpuSample, error) {
	x, err := cpustat.Take(ctx, rdb)
	return cpuSample{at: x.At, self: x.Self, redis: x.Redis, reads: x.Reads, commands: x.Commands}, err
}

// CPU is how busy each process was during a timed run, in cores (CPU
// seconds per second of wall time): 1.0 is one core all the time.
type CPU struct {
	Bench float64 `json:"bench_cores"` // this process: code under test and load generator
	Redis float64 `json:"redis_cores"` // redis-server, single-threaded: 1.0 is its ceiling
	// RedisReads is how many read events redis-server processed, over every
	// client: calls per read is the pipelining Redis actually saw.
	RedisReads int64 `json:"redis_reads"`
	// RedisCommands is how many commands redis-server ran for all its
	// clients, each command a script runs counted too.
	RedisCommands int64 `json:"redis_commands"`
	// RedisForeign is the rate of commands beyond the run's own: other
	// clients sharing the Redis, whose work is in Redis too.
	RedisForeign float64 `json:"redis_foreign_per_s"`
}

// setForeign sets RedisForeign from the commands the run itself caused.
func (c *CPU) setForeign(own int, elapsed time.Duration) {
	if elapsed > 0 {
		c.RedisForeign = max(0, float64(c.RedisCommands-int64(own))/elapsed.Seconds())
	}
}

func cpuBetween(a, b cpuSample) CPU {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPU{}
	}
	return CPU{Bench: (b.self - a.self).Seconds() / wall, Redis: (b.redis - a.redis).Seconds() / wall, RedisReads: b.reads - a.reads, RedisCommands: b.commands - a.commands}
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
