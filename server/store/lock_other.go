//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package store

import (
	"context"
	"log/slog"
	"os"

	"k8s.io/utils/clock"
)

// lockFile only creates path where flock is missing: there, two processes
// on one SQLite file are not kept apart.
func lockFile(_ context.Context, path string, _ *slog.Logger, _ clock.Clock) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
