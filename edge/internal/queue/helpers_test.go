package queue_test

import "github.com/flashgate/flashgate/edge/internal/queue/queuetest"

// The line helpers these tests share with package admission's, under the
// short names they use.
var (
	testSeed  = queuetest.Seed
	ready     = queuetest.Ready
	restoreAt = queuetest.Restore
)
