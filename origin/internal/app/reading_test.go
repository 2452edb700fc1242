package app_test

import (
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/origin/internal/app"
	"github.com/flashgate/flashgate/origin/origintest"
)

// The public listener, on a real TCP port, closes idle new connections
// without an answer, answers slow requests 408 and large heads 431, takes
// the heads the edge passes on, and refuses heads that are not strict
// HTTP/1.x.
func TestReadingRequests(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t), func(c *app.Config) { c.ReadTimeout = 300 * time.Millisecond })
	addr := httpreadtest.Serve(t, o.App.PublicServer())
	httpreadtest.Run(t, addr, httpreadtest.Options{ReadTimeout: o.Config.ReadTimeout, MaxHeadBytes: o.Config.MaxRequestHeadBytes, Path: "/healthz"})
}
