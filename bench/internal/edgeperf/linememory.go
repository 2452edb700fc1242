package edgeperf

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/edge/edgeinternals"
)

// RedisLine is what a sale's line costs in Redis.
type RedisLine struct {
	// Keys is MEMORY USAGE (SAMPLES 0: every field) of each of the sale's
	// queue keys, by role: places, pre, post, seed, cursor.
	Keys map[string]int64 `json:"memory_usage_bytes"`
	// Total is the sum of Keys; PerShopper is Total over the shoppers in
	// line, PlacesPerShopper the places hash alone over them.
	Total            int64   `json:"memory_usage_total_bytes"`
	PerShopper       float64 `json:"bytes_per_shopper"`
	PlacesPerShopper float64 `json:"places_bytes_per_shopper"`
	// Encoding is OBJECT ENCODING of the places hash.
	Encoding string `json:"places_encoding"`
	// FieldBytes and ValueBytes are the mean lengths of an account id and
	// of a place as stored.
	FieldBytes float64 `json:"field_bytes"`
	ValueBytes float64 `json:"value_bytes"`
	// UsedMemoryDelta is the change of INFO used_memory (allocator sizes,
	// not C struct sizes) since the line was empty, over the shoppers
	// added: a cross-check of MEMORY USAGE, blurred by other clients.
	UsedMemoryPerShopper float64 `json:"used_memory_delta_per_shopper"`
	// Model is Redis 7's hash-table layout worked out for these lengths.
	Model HashModel `json:"model"`
}

// HashModel is what one entry of a hash-table-encoded hash costs in Redis
// 7.0, as MEMORY USAGE counts it: a dictEntry (key, value and next
// pointers), the field and the value as SDS strings rounded to the
// allocator's size class, and the entry's share of the bucket array (a
// pointer per slot, slots the next power of two).
type HashModel struct {
	DictEntry float64 `json:"dict_entry"`
	Field     float64 `json:"field_sds"`
	Value     float64 `json:"value_sds"`
	Buckets   float64 `json:"bucket_share"`
	Total     float64 `json:"total"`
}

// usedMemory is INFO used_memory.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis memory: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis memory: no used_memory in INFO")
}

// lineMemory measures the sale's queue keys with shoppers in line.
// usedBefore is used_memory when the line was empty.
func lineMemory(ctx context.Context, rdb *redis.Client, keys edgeinternals.Keys, sale string, shoppers int, fieldBytes, valueBytes float64, usedBefore int64) (RedisLine, error) {
	out := RedisLine{Keys: map[string]int64{}, FieldBytes: fieldBytes, ValueBytes: valueBytes}
	for role, key := range map[string]string{
		"places": keys.Places(sale), "pre": keys.Pre(sale), "post": keys.Post(sale),
		"seed": keys.Seed(sale), "cursor": keys.Cursor(sale),
	} {
		n, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err == redis.Nil {
			continue // pre is never set when nobody joined before the start
		}
		if err != nil {
			return out, fmt.Errorf("memory usage %s: %w", key, err)
		}
		out.Keys[role] = n
		out.Total += n
	}
	enc, err := rdb.ObjectEncoding(ctx, keys.Places(sale)).Result()
	if err != nil {
		return out, fmt.Errorf("object encoding: %w", err)
	}
	out.Encoding = enc
	used, err := usedMemory(ctx, rdb)
	if err != nil {
		return out, err
	}
	if shoppers > 0 {
		out.PerShopper = float64(out.Total) / float64(shoppers)
		out.PlacesPerShopper = float64(out.Keys["places"]) / float64(shoppers)
		out.UsedMemoryPerShopper = float64(used-usedBefore) / float64(shoppers)
	}
	out.Model = hashModel(shoppers, fieldBytes, valueBytes)
	return out, nil
}

// hashModel works out Redis 7.0's hash-table entry for a line of n
// shoppers whose fields and values have the given mean lengths, as MEMORY
// USAGE counts it: the dictEntry at its C size, each SDS at its allocation
// size. The SDS header is 1 byte below 32 characters (sdshdr5), 3 below 256
// (sdshdr8), plus the terminating NUL; the size classes are those of the
// jemalloc Redis bundles (8, 16, 24, 32, 40, 48, ...). A system jemalloc
// with 16-byte spacing (Debian's) allocates 32 B for the 24-byte dictEntry
// and 48 for a 40-byte SDS: INFO used_memory shows the difference.
func hashModel(n int, fieldBytes, valueBytes float64) HashModel {
	m := HashModel{DictEntry: 24, Field: sdsAlloc(fieldBytes), Value: sdsAlloc(valueBytes)}
	if n > 0 {
		slots := 4
		for slots < n {
			slots *= 2
		}
		m.Buckets = 8 * float64(slots) / float64(n)
	}
	m.Total = m.DictEntry + m.Field + m.Value + m.Buckets
	return m
}

func sdsAlloc(length float64) float64 {
	l := int(length + 0.5)
	size := l + 2 // sdshdr5 and NUL
	if l >= 32 {
		size = l + 4 // sdshdr8 and NUL
	}
	for _, class := range []int{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512} {
		if size <= class {
			return float64(class)
		}
	}
	return float64(size)
}
