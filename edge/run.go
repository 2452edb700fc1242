package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/internal/serve"
)

// run starts an edge node and blocks until ctx ends, then shuts down in
// order: stop accepting and drain in-flight requests (the public listener,
// then the admin one), stop joins and loops, close Redis — within a fresh
// ShutdownTimeout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, warnings, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "edge")
	if cfg.Dev {
		log.Warn("DEV MODE: POST /v1/dev/login signs a user token for any account with FLASHGATE_DEV_USER_TOKEN_SECRET; never where shoppers or the shop's production secrets are", "dev", true)
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	// In drain order: shoppers' requests finish while the admin listener
	// still answers metrics and readiness.
	log.Info("edge starting", "origin", cfg.OriginURL, "dev", cfg.Dev)
	return serve.Run(ctx, log, a, cfg.ShutdownTimeout,
		serve.Listener{Name: "public", Addr: cfg.Addr, Server: a.Server(a.API.Public())},
		serve.Listener{Name: "admin", Addr: cfg.AdminAddr, Server: a.Server(a.API.Admin())})
}
