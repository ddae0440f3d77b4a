//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package store

import (
	"context"
	"log/slog"
	"os"
)

// lockFile only creates path where flock is missing: there, two processes
// on one SQLite file are not kept apart.
func lockFile(_ context.Context, path string, _ *slog.Logger) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
