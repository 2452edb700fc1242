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

	"github.com/flashgate/flashgate/internal/httpread"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// listener is one of the origin's listeners: its name, for errors, and the
// address it opens.
type listener struct {
	name, addr string
	srv        *fasthttp.Server
}

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
	listeners := []listener{
		{"public", cfg.Addr, a.Server(a.API.Public(), 64<<10)},
		{"admin", cfg.AdminAddr, a.Server(a.API.Admin(), 2<<20)},
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
	for _, l := range listeners {
		if err := l.srv.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("drain the %s listener: %w", l.name, err))
		}
	}
	if err := a.Stop(stopCtx); err != nil {
		errs = append(errs, err)
	}
	log.Info("origin stopped")
	return errors.Join(errs...)
}
