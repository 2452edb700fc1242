package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/flashgate/flashgate/internal/serve"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// run starts the origin and blocks until ctx ends, then shuts down in order:
// stop accepting and drain in-flight requests (the public listener, then the
// admin one), stop reserves and workers (or the wait for Redis and
// Postgres), close clients — all within a fresh ShutdownTimeout.
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

	// Only a bad configuration fails here: Redis and Postgres are waited
	// for once the listeners are open (App.Start), answering /readyz 503
	// and please_wait meanwhile, so a dependency that is down costs no
	// crash loop.
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	// In drain order: the edge's requests finish while the admin listener
	// still answers metrics and readiness.
	log.Info("origin starting", "dev", cfg.Dev, "line_audience", cfg.LineAudienceName())
	return serve.Run(ctx, log, a, cfg.ShutdownTimeout,
		serve.Listener{Name: "public", Addr: cfg.Addr, Server: a.PublicServer()},
		serve.Listener{Name: "admin", Addr: cfg.AdminAddr, Server: a.AdminServer()})
}
