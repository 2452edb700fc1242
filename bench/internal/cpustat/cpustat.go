// Package cpustat samples the CPU time the benchmark's own process and
// redis-server have used so far, so a timed run can say how busy each was.
package cpustat

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
