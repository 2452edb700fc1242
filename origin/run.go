package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/internal/app"
)

// run starts the origin and blocks until ctx ends, then shuts down in order:
// stop accepting and drain in-flight requests, stop reserves and workers,
// close clients — all within a fresh ShutdownTimeout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "origin", "instance", cfg.Instance)

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	a, err := app.New(startCtx, cfg, log)
	cancel()
	if err != nil {
		return err
	}
	public := a.Server(a.API.Public(), 64<<10)
	admin := a.Server(a.API.Admin(), 2<<20)
	listeners := map[string]*fasthttp.Server{cfg.Addr: public, cfg.AdminAddr: admin}

	errc := make(chan error, len(listeners))
	for addr, srv := range listeners {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			_ = a.Stop(context.Background())
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		go func() { errc <- srv.Serve(ln) }()
	}
	a.Start()
	log.Info("origin ready", "addr", cfg.Addr, "admin_addr", cfg.AdminAddr, "dev", cfg.Dev)

	select {
	case <-ctx.Done():
	case err = <-errc:
		log.Error("listener failed", "err", err)
	}

	log.Info("origin stopping")
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, srv := range listeners {
		if err := srv.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err))
		}
	}
	if err := a.Stop(stopCtx); err != nil {
		errs = append(errs, err)
	}
	log.Info("origin stopped")
	return errors.Join(errs...)
}
