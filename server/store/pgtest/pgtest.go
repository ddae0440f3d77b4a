// Package pgtest runs a real, throwaway Postgres server for tests: initdb
// into a temporary directory, then the postgres binary on 127.0.0.1 and a
// free port, as the unprivileged user "nobody" when the tests run as root
// (Postgres refuses root). Data is not fsynced; each test gets its own
// database from CreateDB.
//
// Start gives a test a server of its own, stopped at the test's cleanup.
// Shared gives every test of the binary one server, started on first use
// and stopped by RunMain (call it from TestMain); without RunMain, Shared
// falls back to Start.
//
// The binaries are looked up under /usr/lib/postgresql/*/bin (highest
// version first) and then on PATH. Without them the test fails, asking to
// run `make postgres`, unless FAUCET_SKIP_POSTGRES=1 is set: then it is
// skipped.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/launch"
)

// User and Password are the superuser of every test server; the password
// is required on TCP connections (scram-sha-256), like a real deployment.
const (
	User     = "faucet"
	Password = "pgtest-secret-pw"
)

// SkipEnv, set to 1, skips Postgres tests where the binaries are missing.
const SkipEnv = "FAUCET_SKIP_POSTGRES"

// Server is one running (or stopped) test Postgres.
type Server struct {
	bin   string   // directory of initdb and postgres
	dir   string   // temporary root: data/, sock/, postgres.log
	host  string   // the address it listens on: 127.0.0.1 but for StartOn
	allow []string // networks (CIDR) besides loopback whose clients may connect
	port  int
	cred  *syscall.Credential // nil unless running as root

	clock clock.WithTicker // paces start-up polls and times stops

	mu   sync.Mutex
	proc *launch.Process // nil when stopped
	dbs  atomic.Int64
}

// Start starts a server of t's own, stopped and removed at t's cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1")
}

// StartOn is Start on the address host, accepting clients (with the
// password) from the networks allow as well as from loopback: for a
// server that pods reach, e.g. on a cluster node's address.
func StartOn(t testing.TB, host string, allow ...string) *Server {
	t.Helper()
	s, err := start(t, host, allow...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Destroy)
	return s
}

var shared struct {
	mu      sync.Mutex
	inMain  bool
	srv     *Server
	failure error
}

// RunMain runs the tests and then stops the shared server; use it as
// `func TestMain(m *testing.M) { os.Exit(pgtest.RunMain(m)) }`.
func RunMain(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.Destroy()
		shared.srv = nil
	}
	return code
}

// Shared returns the test binary's shared server, starting it on first
// use. Tests must not Stop it; use Start for outages.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	inMain := shared.inMain
	shared.mu.Unlock()
	if !inMain {
		return Start(t)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.failure == nil {
		shared.srv, shared.failure = start(t, "127.0.0.1")
	}
	if shared.failure != nil {
		t.Fatalf("pgtest: %v", shared.failure)
	}
	return shared.srv
}

// start finds the binaries (failing or skipping t without them) and starts
// a new server.
func start(t testing.TB, host string, allow ...string) (*Server, error) {
	t.Helper()
	bin, err := findBinaries()
	if err != nil {
		if os.Getenv(SkipEnv) == "1" {
			t.Skipf("pgtest: %v (skipped: %s=1)", err, SkipEnv)
		}
		return nil, fmt.Errorf("%w: run `make postgres` to install Postgres (or set %s=1 to skip these tests)", err, SkipEnv)
	}
	// Test support: the real clock, as the servers are real processes.
	s := &Server{bin: bin, host: host, allow: allow, clock: clock.RealClock{}}
	if err := s.init(); err != nil {
		s.Destroy()
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Destroy()
		return nil, err
	}
	return s, nil
}

// searchGlob is where Debian's packages put each version's binaries.
var searchGlob = "/usr/lib/postgresql/*/bin"

// findBinaries returns the directory holding initdb and postgres.
func findBinaries() (string, error) {
	dirs, _ := filepath.Glob(searchGlob)
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("postgres binaries (initdb, postgres) not found under %s or on PATH", searchGlob)
}

func pgVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// init creates the temporary directory and the cluster.
func (s *Server) init() error {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return err
	}
	s.dir = dir
	for _, sub := range []string{"data", "sock"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o600); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		// Postgres refuses to run as root: hand everything to nobody.
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("running as root and no user nobody to run postgres as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock"), pwfile} {
			if err := os.Chown(p, int(uid), int(gid)); err != nil {
				return fmt.Errorf("chown %s to nobody: %w", p, err)
			}
		}
	}
	out, err := s.command(filepath.Join(s.bin, "initdb"),
		"-D", filepath.Join(dir, "data"), "-U", User, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if len(s.allow) == 0 {
		return nil
	}
	hba, err := os.OpenFile(filepath.Join(dir, "data", "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for _, network := range s.allow {
		if _, err := fmt.Fprintf(hba, "host all all %s scram-sha-256\n", network); err != nil {
			_ = hba.Close()
			return err
		}
	}
	return hba.Close()
}

// command prepares a Postgres binary to run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return cmd
}

// Start (re)starts the server: the first time on a free port, later on the
// same port with the same data (after Stop, to end a simulated outage).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("already running")
	}
	if s.port == 0 {
		port, err := freePort(s.host)
		if err != nil {
			return err
		}
		s.port = port
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"),
		"-D", filepath.Join(s.dir, "data"),
		"-c", "listen_addresses="+s.host,
		"-c", "port="+strconv.Itoa(s.port),
		"-c", "unix_socket_directories="+filepath.Join(s.dir, "sock"),
		"-c", "max_connections=300",
		"-c", "shared_buffers=32MB",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "log_min_messages=warning",
		"-c", "log_min_error_statement=panic",
	)
	// The server dies with the test binary, even when it is killed:
	// SIGQUIT is postgres's immediate shutdown, which ends its backends too.
	proc, err := launch.Start(cmd, launch.Config{DeathSignal: syscall.SIGQUIT, Log: s.logPath(), Clock: s.clock})
	if err != nil {
		return err
	}
	s.proc = proc
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = s.stopLocked() // the readiness failure is the error to report
		return err
	}
	return nil
}

// waitReady polls until the server accepts a connection, it exits, or the
// timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := s.clock.NewTimer(timeout)
	defer deadline.Stop()
	poll := s.clock.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	var last error
	for {
		if last = s.ping(); last == nil {
			return nil
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("postgres exited during start-up:\n%s", s.logTail())
		case <-deadline.C():
			return fmt.Errorf("postgres not ready after %s: %w\n%s", timeout, last, s.logTail())
		case <-poll.C():
		}
	}
}

// ping connects to the server once.
func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URI("postgres"))
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// Stop shuts the server down (fast: clients are disconnected) and waits
// for it, keeping the data and the port for Start.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	if s.proc == nil {
		return nil
	}
	// Fast shutdown, then immediate shutdown, then SIGKILL. A kill is not
	// an error here: the data is throwaway.
	_ = s.proc.Stop(launch.Step{Signal: syscall.SIGINT, Grace: 20 * time.Second},
		launch.Step{Signal: syscall.SIGQUIT, Grace: 10 * time.Second})
	s.proc = nil
	return nil
}

// Destroy stops the server and removes its directory.
func (s *Server) Destroy() {
	_ = s.Stop()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// Port is the TCP port the server listens on (on 127.0.0.1, or StartOn's
// address).
func (s *Server) Port() int { return s.port }

// URI returns a connection URI for database dbname, with the password.
func (s *Server) URI(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(User, Password),
		Host:     net.JoinHostPort(s.host, strconv.Itoa(s.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDB creates a fresh, empty database for t and returns its URI.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URI("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return s.URI(name)
}

// logTail is the end of the server log, for failure messages.
func (s *Server) logTail() string { return launch.Tail(s.logPath(), 4000) }

// logPath is where the server's output goes.
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// freePort asks the kernel for a free TCP port on host.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// String describes the server for test logs.
func (s *Server) String() string {
	return "postgres on " + net.JoinHostPort(s.host, strconv.Itoa(s.port)) + " (" + strings.TrimSuffix(s.dir, "/") + ")"
}
