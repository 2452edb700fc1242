// Package commandlog records the round trips a go-redis client makes, for
// tests that pin what a piece of code costs in Redis: how many round trips,
// and which commands in each.
package commandlog

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Log records the commands of every round trip of the clients it is
// attached to. A new connection's handshake (HELLO, AUTH, SELECT, CLIENT)
// is left out: it depends on the pool, not on the code under test.
type Log struct {
	mu    sync.Mutex // guards trips
	trips [][]string // command names (lower case), one slice per round trip
}

var _ redis.Hook = (*Log)(nil)

// Attach returns a Log that records what rdb sends from now on.
func Attach(rdb interface{ AddHook(redis.Hook) }) *Log {
	l := &Log{}
	rdb.AddHook(l)
	return l
}

// Take returns the round trips recorded since the last Take, oldest first,
// each as the names of its commands (one for a command sent alone).
func (l *Log) Take() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.trips
	l.trips = nil
	return t
}

func (l *Log) record(cmds ...redis.Cmder) {
	var names []string
	for _, c := range cmds {
		switch n := c.Name(); n {
		case "hello", "auth", "select", "client":
		default:
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	l.mu.Lock()
	l.trips = append(l.trips, names)
	l.mu.Unlock()
}

// DialHook is part of redis.Hook; it records nothing.
func (l *Log) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook is part of redis.Hook: it records a command sent alone.
func (l *Log) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.record(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook is part of redis.Hook: it records a pipeline.
func (l *Log) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.record(cmds...)
		return next(ctx, cmds)
	}
}
