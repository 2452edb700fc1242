package app_test

import (
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
)

// The public listener, on a real TCP port, closes idle new connections
// without an answer, answers slow requests 408 and large heads 431, takes
// a shopper's cookies, and refuses heads that are not strict HTTP/1.x.
func TestReadingRequests(t *testing.T) {
	t.Parallel()
	cfg := edgetest.Config(edgetest.NewRedis(t), "http://127.0.0.1:1")
	cfg.ReadTimeout = 300 * time.Millisecond
	n := edgetest.NewNode(t, cfg)
	addr := httpreadtest.Serve(t, n.App.Server(n.App.API.Public()))
	httpreadtest.Run(t, addr, httpreadtest.Options{ReadTimeout: cfg.ReadTimeout, MaxHeadBytes: cfg.MaxRequestHeadBytes, Path: "/healthz"})
}
