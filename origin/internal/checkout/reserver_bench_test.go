package checkout

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReserver measures a reserve through the Reserver (batching, the
// pipeline, the script, the journal stage, the answer) from many
// goroutines, with its allocations per reserve: "created" makes a new hold
// each time, "existing" repeats one account's reserve with new tokens, which
// the script answers with the hold it already has.
func BenchmarkReserver(b *testing.B) {
	s := newStore(b, 1<<40)
	r := NewReserver(s, ReserverOptions{Journal: &journal{}})
	b.Cleanup(r.Close)
	ctx := context.Background()
	var n atomic.Int64
	for _, c := range []struct {
		name    string
		account func(i string) string
		want    Outcome
	}{
		{"created", func(i string) string { return "u" + i }, Created},
		{"existing", func(string) string { return "repeater" }, Existing},
	} {
		if _, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: "repeater", TokenID: "j-first", IdempotencyKey: "k", HoldTTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(64)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := strconv.FormatInt(n.Add(1), 10)
					res, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: c.account(i), TokenID: "j" + i, IdempotencyKey: "k" + i, HoldTTL: time.Hour})
					if err != nil || res.Outcome != c.want {
						b.Errorf("Reserve = %+v, %v; want %v", res, err, c.want)
						return
					}
				}
			})
		})
	}
}
