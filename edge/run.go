package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/app"
)

// run starts an edge node and blocks until ctx ends, then shuts down in
// order: stop accepting and drain in-flight requests, stop joins and loops,
// close Redis — within a fresh ShutdownTimeout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "edge")
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	listeners := map[string]*fasthttp.Server{
		cfg.Addr:      a.Server(a.API.Public()),
		cfg.AdminAddr: a.Server(a.API.Admin()),
	}
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
	log.Info("edge ready", "addr", cfg.Addr, "admin_addr", cfg.AdminAddr, "origin", cfg.OriginURL, "dev", cfg.Dev)

	select {
	case <-ctx.Done():
	case err = <-errc:
		log.Error("listener failed", "err", err)
	}
	log.Info("edge stopping")
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
	log.Info("edge stopped")
	return errors.Join(errs...)
}
