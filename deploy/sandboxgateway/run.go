package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// run serves the gateway until ctx ends, then stops in order within a fresh
// ShutdownTimeout: stop accepting and drain in-flight requests, then stop
// webhook retries and wait for deliveries in flight.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "sandboxgateway")
	cfg.Gateway.Log = log
	gw, err := sandboxgateway.New(cfg.Gateway)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = gw.Close(context.Background())
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: 5 * time.Second,
		// The body is read after the injected latency, so both timeouts
		// make room for it.
		ReadTimeout:    15*time.Second + cfg.Gateway.Latency,
		WriteTimeout:   30*time.Second + cfg.Gateway.Latency,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10, // bodies are bounded by the gateway
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("gateway ready", "addr", ln.Addr().String(), "personality", cfg.Gateway.Personality, "public_url", cfg.Gateway.PublicURL,
		"webhook_url", cfg.Gateway.WebhookURL, "webhook_secrets", len(cfg.Gateway.WebhookSecrets),
		"latency", cfg.Gateway.Latency.String(), "failure_rate", cfg.Gateway.FailureRate,
		"duplicate_rate", cfg.Gateway.DuplicateRate, "max_attempts", cfg.Gateway.MaxAttempts)

	var errs []error
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("listener failed", "err", err)
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}

	log.Info("gateway stopping")
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("drain: %w", err))
	}
	if err := gw.Close(stopCtx); err != nil {
		errs = append(errs, err)
	}
	log.Info("gateway stopped")
	return errors.Join(errs...)
}
