package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DeleteKeys unlinks every key whose name starts with prefix, a SCAN page
// at a time (fine in tests and benchmarks; never in production paths), and
// returns how many it removed. It refuses an empty prefix.
func DeleteKeys(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	if prefix == "" {
		return 0, errors.New("delete keys: refusing an empty prefix")
	}
	pattern := globEscape(prefix) + "*"
	removed := 0
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return removed, fmt.Errorf("delete keys %s: %w", pattern, err)
		}
		if len(keys) > 0 {
			n, err := rdb.Unlink(ctx, keys...).Result()
			if err != nil {
				return removed, fmt.Errorf("delete keys %s: %w", pattern, err)
			}
			removed += int(n)
		}
		if next == 0 {
			return removed, nil
		}
		cursor = next
	}
}

// LoseKeys removes every key whose name starts with prefix in one UNLINK,
// as a Redis that restarts empty loses them: all at once. DeleteKeys works
// a SCAN page at a time, so on a shared Redis a running service could see
// half a loss between two pages (a writer's lease gone, the stream it
// reads still there) — a state no real failure produces. It returns how
// many keys it removed and refuses an empty prefix.
func LoseKeys(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	if prefix == "" {
		return 0, errors.New("lose keys: refusing an empty prefix")
	}
	pattern := globEscape(prefix) + "*"
	var all []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("lose keys %s: %w", pattern, err)
	}
	if len(all) == 0 {
		return 0, nil
	}
	n, err := rdb.Unlink(ctx, all...).Result()
	if err != nil {
		return 0, fmt.Errorf("lose keys %s: %w", pattern, err)
	}
	return int(n), nil
}

// globEscape escapes the characters SCAN MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
