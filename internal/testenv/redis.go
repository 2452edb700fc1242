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
