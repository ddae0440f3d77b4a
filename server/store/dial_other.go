//go:build !linux

package store

import (
	"syscall"
	"time"
)

// userTimeout sets nothing where TCP_USER_TIMEOUT is not Linux's: the
// keepalive probes alone notice a silent Postgres there.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
