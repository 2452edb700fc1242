package line_test

import "github.com/flashgate/flashgate/edge/internal/edgetest"

// The line helpers these tests share with package admission's, under the
// short names they use.
var (
	testSeed  = edgetest.LineSeed
	ready     = edgetest.ReadyLine
	restoreAt = edgetest.RestoreLine
)
