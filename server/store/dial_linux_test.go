//go:build linux

package store

import (
	"net"
	"syscall"
	"testing"
)

// The Postgres dialer's sockets give up on unacknowledged data after
// pgUserTimeout (the kernel's TCP_USER_TIMEOUT, in milliseconds), so a
// statement on a cut connection fails in seconds.
func TestPostgresDialerSetsTheUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := pgDialer().Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if want := int(pgUserTimeout.Milliseconds()); got != want {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, want %d", got, want)
	}
	// A Unix socket has no such option: dialling one must not fail.
	dir := t.TempDir()
	uln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	uc, err := pgDialer().Dial("unix", dir+"/s")
	if err != nil {
		t.Fatalf("dial a Unix socket: %v", err)
	}
	uc.Close()
}
