package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
)

// A failing engine stops the HTTP server and the command returns its error
// (the process exits non-zero and the pod restarts).
func TestSuperviseStopsOnFailure(t *testing.T) {
	boom := errors.New("boom")
	var serverStopped atomic.Bool
	err := supervise(context.Background(), slog.New(slog.DiscardHandler),
		task{"engine", func(context.Context) error { return boom }},
		task{"server", func(ctx context.Context) error {
			<-ctx.Done()
			serverStopped.Store(true)
			return nil
		}},
	)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if !serverStopped.Load() {
		t.Fatal("supervise returned before the server stopped")
	}
}

// A loop that returns nil while the command still runs is a failure too.
func TestSuperviseEarlyReturnIsFailure(t *testing.T) {
	err := supervise(context.Background(), slog.New(slog.DiscardHandler),
		task{"engine", func(context.Context) error { return nil }},
		task{"server", func(ctx context.Context) error { <-ctx.Done(); return nil }},
	)
	if err == nil {
		t.Fatal("an engine that stopped on its own went unnoticed")
	}
}

// On shutdown supervise waits for every task to finish and reports success.
func TestSuperviseWaitsForShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var finished atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- supervise(ctx, slog.New(slog.DiscardHandler),
			task{"engine", func(ctx context.Context) error {
				<-ctx.Done()
				<-release // still flushing
				finished.Store(true)
				return nil
			}},
			task{"server", func(ctx context.Context) error { <-ctx.Done(); return nil }},
		)
	}()
	cancel()
	select {
	case err := <-done:
		t.Fatalf("returned (%v) while a task was still running", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}
	if !finished.Load() {
		t.Fatal("returned before the engine finished")
	}
}
