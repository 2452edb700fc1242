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
	"github.com/flashgate/flashgate/internal/httpread"
)

// listener is one of the node's listeners: its name, for errors, and the
// address it opens.
type listener struct {
	name, addr string
	srv        *fasthttp.Server
}

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
	listeners := []listener{
		{"public", cfg.Addr, a.Server(a.API.Public())},
		{"admin", cfg.AdminAddr, a.Server(a.API.Admin())},
	}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			_ = a.Stop(context.Background())
			return fmt.Errorf("listen %s: %w", l.addr, err)
		}
		go func() { errc <- l.srv.Serve(httpread.Listener(ln)) }()
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
	for _, l := range listeners {
		if err := l.srv.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("drain the %s listener: %w", l.name, err))
		}
	}
	if err := a.Stop(stopCtx); err != nil {
		errs = append(errs, err)
	}
	log.Info("edge stopped")
	return errors.Join(errs...)
}
