package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"time"

	"github.com/flashgate/flashgate/internal/serve"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// run starts the origin and blocks until ctx ends, then shuts down in order:
// stop accepting and drain in-flight requests (the public listener, then the
// admin one), stop reserves and workers, close clients — all within a fresh
// ShutdownTimeout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, warnings, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "origin", "instance", cfg.Instance)
	if cfg.Dev {
		log.Warn("DEV MODE: POST /admin/dev/admission-token hands out admission tokens, and user tokens are checked with FLASHGATE_DEV_USER_TOKEN_SECRET; never in production", "dev", true)
	}
	for _, w := range warnings {
		log.Warn(w)
	}

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	a, err := app.New(startCtx, cfg, log)
	cancel()
	if err != nil {
		return err
	}
	// In drain order: the edge's requests finish while the admin listener
	// still answers metrics.
	log.Info("origin starting", "dev", cfg.Dev)
	return serve.Run(ctx, log, a, cfg.ShutdownTimeout,
		serve.Listener{Name: "public", Addr: cfg.Addr, Server: a.PublicServer()},
		serve.Listener{Name: "admin", Addr: cfg.AdminAddr, Server: a.AdminServer()})
}
