package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/settings"
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
	ShutdownTimeout = settings.ShutdownTimeout
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
	return ServeLameDuck(ctx, nil, ln, h, logger, 0)
}

// ServeLameDuck is Serve with a lame-duck period timed by clk (nil: the
// real clock): once ctx is cancelled,
// /readyz answers 503 and every answer closes its connection, while
// everything is still served for lameDuck; only then does the shutdown
// start. Kubernetes takes a terminating pod out of its Service's endpoints
// while the pod is still serving, and load balancers that probe readiness
// see it fail, so no client is sent to a closed port.
func ServeLameDuck(ctx context.Context, clk clock.WithTicker, ln net.Listener, h http.Handler, logger *slog.Logger, lameDuck time.Duration) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var draining atomic.Bool
	srv := &http.Server{
		Handler:           drainingHandler(h, &draining),
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
	if lameDuck > 0 {
		draining.Store(true)
		logger.Info("http server draining: not ready, still serving", "for", lameDuck.String())
		t := clk.NewTimer(lameDuck)
		select {
		case <-t.C():
		case err := <-errc:
			t.Stop()
			return err
		}
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

// drainingHandler is h, but while draining /readyz fails and each answer
// asks the client to reconnect (through the Service, to another pod).
func drainingHandler(h http.Handler, draining *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !draining.Load() {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/readyz" {
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusServiceUnavailable, readyBody{Reason: "shutting down"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
