package line_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// BenchmarkJoiner measures a join through the Joiner (batching, one
// pipeline per round, the script, the answer) from many goroutines, with
// its allocations per join.
func BenchmarkJoiner(b *testing.B) {
	r := edgetest.NewRedis(b)
	ready(b, r, "s", 1)
	j := line.NewJoiner(r.Client, line.NewKeys(r.Prefix), line.JoinerOptions{})
	b.Cleanup(j.Close)
	ctx := context.Background()
	starts := time.Now().Add(-time.Hour)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			account := "user-" + strconv.FormatInt(n.Add(1), 10)
			if _, _, err := j.Join(ctx, "s", starts, account); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
