package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Production server settings. WriteTimeout must exceed DefaultDripTimeout so
// a slow drip still gets its answer written; both stay under the 100 s after
// which Cloudflare-style proxies give up (a 524).
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 32 << 10
	// ShutdownTimeout is how long in-flight requests (drips mid-broadcast)
	// get to finish once shutdown starts: above DefaultDripTimeout and below
	// Kubernetes' default 30 s termination grace period.
	ShutdownTimeout = 28 * time.Second
)

// Run listens on addr and serves h until ctx is cancelled, then shuts down
// gracefully. See Serve.
func Run(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, logger)
}

// Serve serves h on ln until ctx is cancelled. It then stops accepting
// connections and waits up to ShutdownTimeout for in-flight requests before
// closing the rest. It returns nil after a clean shutdown.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// BaseContext is left at Background on purpose: deriving request
		// contexts from ctx would cancel in-flight drips at shutdown.
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("http server listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return err // Serve failed before any shutdown; never ErrServerClosed here
	case <-ctx.Done():
	}
	logger.Info("http server shutting down", "timeout", ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// The deadline passed with requests still running: cut them off.
		logger.Warn("graceful shutdown incomplete; closing connections", "err", err)
		err = errors.Join(err, srv.Close())
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
