package ledger

import (
	"fmt"
	"testing"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// BenchmarkApplyReserves measures the order writer's Postgres side: batches
// of 500 reserve intents of distinct accounts on one hot SKU, each batch one
// transaction with one conditional UPDATE for the SKU. Reported as intents
// (rows) per second; go test -bench ApplyReserves -benchtime 20x ./origin/internal/ledger/
func BenchmarkApplyReserves(b *testing.B) {
	const batch = 500
	s := newStore(b, b.N*batch, 0)
	b.ResetTimer()
	for i := range b.N {
		ins := make([]intent.Intent, batch)
		for j := range ins {
			n := i*batch + j
			ins[j] = reserve(n, fmt.Sprintf("r%d", n), fmt.Sprintf("u%d", n), "a")
		}
		if _, err := s.Apply(b.Context(), "s1", ins); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "intents/s")
}
