// Package serve runs a process's fasthttp listeners and stops them in
// order, the same way for the edge and the origin: open every listener
// (or none), start the application's loops, serve until the context ends
// or a listener fails, then drain the listeners one after another in the
// order given (the public one first, so shoppers' requests finish while
// the admin listener still answers metrics and readiness), stop the
// application, and last wait for the connections still lingering after an
// early answer (httpread.Lingering, a few seconds at most) — all within one
// shutdown budget.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/internal/httpread"
)

// Listener is one listener of the process: its name (for logs and errors),
// the address it opens and the server that answers on it.
type Listener struct {
	Name, Addr string
	Server     *fasthttp.Server
}

// App is what Run starts after the listeners are open and stops after
// they have drained.
type App interface {
	Start()
	Stop(ctx context.Context) error
}

// Run serves listeners until ctx ends or one fails, then shuts down in
// order within shutdownTimeout (counted from the end, not from ctx). It
// returns the listener's failure, if any, joined with those of the
// shutdown. When a listener cannot be opened, those already open are
// closed and app is stopped without having started.
func Run(ctx context.Context, log *slog.Logger, app App, shutdownTimeout time.Duration, listeners ...Listener) error {
	opened := make([]net.Listener, 0, len(listeners))
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, o := range opened {
				_ = o.Close()
			}
			_ = app.Stop(context.Background())
			return fmt.Errorf("listen %s: %w", l.Addr, err)
		}
		opened = append(opened, ln)
	}
	errc := make(chan error, len(listeners))
	served := make([]*httpread.ServerListener, len(listeners))
	for i, l := range listeners {
		served[i] = httpread.Listener(opened[i])
		go func() { errc <- l.Server.Serve(served[i]) }()
	}
	app.Start()
	log.Info("ready", "listeners", addrs(listeners))

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		log.Error("listener failed", "err", err)
	}
	log.Info("stopping")
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{err}
	for _, l := range listeners {
		if err := l.Server.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("drain the %s listener: %w", l.Name, err))
		}
	}
	errs = append(errs, app.Stop(stopCtx))
	for i, l := range listeners {
		// Cut short, a lingering close is what it would have been without
		// lingering: worth a line in the log, not a failed shutdown.
		if err := served[i].Shutdown(stopCtx); err != nil {
			log.Warn("lingering closes cut short", "listener", l.Name, "err", err)
		}
	}
	log.Info("stopped")
	return errors.Join(errs...)
}

func addrs(listeners []Listener) map[string]string {
	m := make(map[string]string, len(listeners))
	for _, l := range listeners {
		m[l.Name] = l.Addr
	}
	return m
}

// ServerOptions are what differs between the tiers' servers.
type ServerOptions struct {
	Name         string        // the Server header's product, e.g. "flashgate-edge"
	MaxHeadBytes int           // request line and headers; larger heads get 431
	MaxBodyBytes int           // larger bodies get 413
	ReadTimeout  time.Duration // a request that has begun must arrive within it (408)
	WriteTimeout time.Duration
}

// NewServer returns a fasthttp server for h with what every listener of
// both tiers needs: strict HTTP/1.x heads, read failures answered in the
// contract's shape (or not at all on a connection that carried nothing),
// Expect: 100-continue refused at once when the head shows the request
// will be (a body over MaxBodyBytes), idle connections closed after a
// minute and on shutdown.
func NewServer(h fasthttp.RequestHandler, o ServerOptions) *fasthttp.Server {
	onError := httpapi.ErrorHandler()
	return &fasthttp.Server{
		Handler:               httpread.Strict(h, onError),
		ErrorHandler:          onError,
		ExpectHandler:         httpapi.ExpectHandler(o.MaxBodyBytes),
		ReadBufferSize:        o.MaxHeadBytes,
		Name:                  o.Name,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    o.MaxBodyBytes,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
	}
}
