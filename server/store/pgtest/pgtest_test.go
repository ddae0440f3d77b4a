package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(RunMain(m)) }

// A server of its own: databases work, the password is required, and
// Stop/Start keeps the port and the data.
func TestStartStop(t *testing.T) {
	s := Start(t)
	uri := s.CreateDB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var user string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != User {
		t.Fatalf("current_user %q, %v", user, err)
	}
	c.Close(ctx)
	if _, err := pgx.Connect(ctx, strings.Replace(uri, Password, "wrong", 1)); err == nil {
		t.Fatal("connected with a wrong password")
	}

	port := s.Port()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(ctx, uri); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.Port() != port {
		t.Fatalf("port %d after restart, was %d", s.Port(), port)
	}
	c, err = pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after restart: %d, %v", v, err)
	}
}

// The shared server is one server: each test gets its own database on it.
func TestShared(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("two shared servers")
	}
	if u1, u2 := a.CreateDB(t), a.CreateDB(t); u1 == u2 {
		t.Fatalf("CreateDB returned %s twice", u1)
	}
}

// Without the binaries the test fails with what to do, or is skipped
// when asked to.
func TestMissingBinaries(t *testing.T) {
	old := searchGlob
	searchGlob = t.TempDir() + "/*/bin"
	t.Cleanup(func() { searchGlob = old })
	t.Setenv("PATH", t.TempDir())
	t.Setenv(SkipEnv, "")
	_, err := start(t, "127.0.0.1")
	if err == nil || !strings.Contains(err.Error(), "make postgres") {
		t.Fatalf("missing binaries: %v, want a hint to run make postgres", err)
	}
	t.Run("skipped", func(t *testing.T) {
		t.Setenv(SkipEnv, "1")
		_, _ = start(t, "127.0.0.1")
		t.Fatal("not skipped")
	})
}

// StartOn listens on the address it is given (here another loopback
// address), which its URI names, and takes the networks it allows.
func TestStartOn(t *testing.T) {
	s := StartOn(t, "127.0.0.2", "127.0.0.0/8")
	uri := s.CreateDB(t)
	if !strings.Contains(uri, "@127.0.0.2:") {
		t.Fatalf("URI %s does not name 127.0.0.2", uri)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
}
