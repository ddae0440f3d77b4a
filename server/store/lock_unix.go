//go:build linux || darwin || freebsd || netbsd || openbsd

package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// lockFile takes an exclusive advisory lock (flock) on path, creating it,
// and holds it until the returned file is closed or the process exits. While
// another process holds it, it waits, saying so once, until ctx ends,
// trying again every 200 ms of clk.
func lockFile(ctx context.Context, path string, log *slog.Logger, clk clock.Clock) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if waiting {
				log.Info("store lock acquired: the other faucet process has exited", "lock", path)
			}
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waiting {
			waiting = true
			log.Warn("another faucet process holds the store; waiting for it to exit", "lock", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: another faucet process still holds the store: %w", path, ctx.Err())
		case <-clk.After(200 * time.Millisecond):
		}
	}
}
