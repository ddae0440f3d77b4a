package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

var (
	_ store.Store   = (*store.SQLite)(nil)
	_ store.Store   = (*store.Postgres)(nil)
	_ journal.Owner = (*store.Postgres)(nil)
)

// testEntry is a small journal entry of key at seq, its txid made of id.
func testEntry(key string, seq uint64, id byte) journal.Entry {
	return journal.Entry{Key: key, TxID: testTxID(id).String(), Seq: seq, Raw: []byte{id, 0xfa}, State: journal.Pending,
		SentAt: time.Unix(1_700_000_000, int64(id)), Meta: []byte(`{"id":` + strconv.Itoa(int(id)) + `}`)}
}

// testLogger collects the store's log and prints it if the test fails;
// it never writes to t after the test ends.
func testLogger(t testing.TB) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("store log:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func openSQLitePath(t testing.TB, path string, opts store.Options) *store.SQLite {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := store.OpenSQLite(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openSQLite(t testing.TB) *store.SQLite {
	return openSQLitePath(t, filepath.Join(t.TempDir(), "faucet.db"), store.Options{})
}

func openPostgresURI(t testing.TB, uri string, opts store.Options) *store.Postgres {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := store.OpenPostgres(context.Background(), uri, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPostgres(t testing.TB) *store.Postgres {
	return openPostgresURI(t, pgtest.Shared(t).CreateDB(t), store.Options{})
}

func TestOpenDispatch(t *testing.T) {
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Kind() != store.KindSQLite {
		t.Fatalf("kind %q", s.Kind())
	}
	if _, ok := any(s).(journal.Owner); ok {
		t.Fatal("an SQLite store claims key ownership: it serves one process only")
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{pgtest.Shared(t).CreateDB(t), strings.Replace(pgtest.Shared(t).CreateDB(t), "postgres://", "postgresql://", 1)} {
		p, err := store.Open(t.Context(), uri, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind() != store.KindPostgres {
			t.Fatalf("kind %q", p.Kind())
		}
		if _, ok := any(p).(journal.Owner); !ok {
			t.Fatal("a Postgres store does not implement journal.Owner")
		}
		if err := p.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
}

func TestSQLiteOpenErrors(t *testing.T) {
	_, err := store.OpenSQLite(t.Context(), "/nonexistent/dir/x.db", store.Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "open store: sqlite /nonexistent/dir/x.db: ") {
		t.Fatalf("missing directory: %v", err)
	}
	if !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("missing directory is not ErrStoreUnavailable: %v", err)
	}
	if _, err := store.OpenSQLite(t.Context(), t.TempDir(), store.Options{}); err == nil {
		t.Fatal("opened a directory as a database")
	}
	if _, err := store.OpenSQLite(t.Context(), "a?b.db", store.Options{}); err == nil {
		t.Fatal("accepted a path with '?'")
	}
}

// TestSQLiteOneProcessPerFile: a second store on the same file waits for
// the first to close (as a replacement pod waits for the one it replaces),
// and gives up with a clear error when it does not.
func TestSQLiteOneProcessPerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faucet.db")
	logs := lockedWriter{&sync.Mutex{}, &bytes.Buffer{}}
	first, err := store.OpenSQLite(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.OpenSQLite(t.Context(), path, store.Options{LockTimeout: 300 * time.Millisecond})
	if err == nil || !errors.Is(err, faucet.ErrStoreUnavailable) || !strings.Contains(err.Error(), "another faucet process still holds the store") {
		t.Fatalf("second open while the first is open: %v", err)
	}

	opened := make(chan error, 1)
	go func() {
		s, err := store.OpenSQLite(t.Context(), path, store.Options{LockTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("opened while the first store was still open: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	logs.mu.Lock()
	out := logs.buf.String()
	logs.mu.Unlock()
	if !strings.Contains(out, "waiting for it to exit") || !strings.Contains(out, "store lock acquired") {
		t.Fatalf("the waiting store did not say so: %s", out)
	}
}

// rawDB is direct access to a store's database, for what the API does not
// do: reading and forging the schema version, forging epochs.
type rawDB interface {
	exec(t *testing.T, q string, args ...any)
	count(t *testing.T, q string) int
}

type rawSQLite struct{ db *sql.DB }

func (r rawSQLite) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := r.db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (r rawSQLite) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := r.db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func openRawSQLite(t *testing.T, path string) rawSQLite {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return rawSQLite{db}
}

type rawPG struct{ c *pgx.Conn }

func (r rawPG) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := r.c.Exec(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (r rawPG) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := r.c.QueryRow(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func openRawPG(t *testing.T, uri string) rawPG {
	c, err := pgx.Connect(t.Context(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return rawPG{c}
}

// Migrations: a fresh database gets every version, reopening changes
// nothing and keeps the data, and a newer schema is refused.
func TestMigrations(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T) (reopen func() (store.Store, error), raw rawDB)
	}{
		{"sqlite", func(t *testing.T) (func() (store.Store, error), rawDB) {
			path := filepath.Join(t.TempDir(), "m.db")
			return func() (store.Store, error) { return store.OpenSQLite(t.Context(), path, store.Options{}) },
				openRawSQLite(t, path)
		}},
		{"postgres", func(t *testing.T) (func() (store.Store, error), rawDB) {
			uri := pgtest.Shared(t).CreateDB(t)
			return func() (store.Store, error) { return store.OpenPostgres(t.Context(), uri, store.Options{}) },
				openRawPG(t, uri)
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			reopen, raw := d.open(t)
			s, err := reopen()
			if err != nil {
				t.Fatal(err)
			}
			want := store.SchemaVersion()
			if want < 1 {
				t.Fatalf("schema version %d", want)
			}
			if v := raw.count(t, "SELECT MAX(version) FROM schema_migrations"); v != want {
				t.Fatalf("schema version %d, want %d", v, want)
			}
			tx := testEntry(stxKey(1), 1, 1)
			if err := s.Put(t.Context(), tx); err != nil {
				t.Fatal(err)
			}
			s.Close()

			s, err = reopen()
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			if n := raw.count(t, "SELECT COUNT(*) FROM schema_migrations"); n != want {
				t.Fatalf("%d migration rows after reopening, want %d", n, want)
			}
			if got, err := s.List(t.Context(), tx.Key); err != nil || len(got) != 1 {
				t.Fatalf("data after reopening: %+v, %v", got, err)
			}
			s.Close()

			raw.exec(t, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', 0)", want+1)
			_, err = reopen()
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d is newer than this faucet knows (%d)", want+1, want)) {
				t.Fatalf("opening a newer schema: %v", err)
			}
		})
	}
}

// A database an older faucet left at schema version 1 (built here from the
// 0001 migration itself) gets 0002 when opened, and keeps its data.
func TestMigrationSpentChallengesOnVersion1(t *testing.T) {
	for _, d := range []struct {
		kind  string
		index string // counts the expiry index
		open  func(t *testing.T) (reopen func() (store.Store, error), raw rawDB)
	}{
		{store.KindSQLite, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'spent_challenges_expires_at'`,
			func(t *testing.T) (func() (store.Store, error), rawDB) {
				path := filepath.Join(t.TempDir(), "v1.db")
				return func() (store.Store, error) { return store.OpenSQLite(t.Context(), path, store.Options{}) },
					openRawSQLite(t, path)
			}},
		{store.KindPostgres, `SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'spent_challenges_expires_at'`,
			func(t *testing.T) (func() (store.Store, error), rawDB) {
				uri := pgtest.Shared(t).CreateDB(t)
				return func() (store.Store, error) { return store.OpenPostgres(t.Context(), uri, store.Options{}) },
					openRawPG(t, uri)
			}},
	} {
		t.Run(d.kind, func(t *testing.T) {
			t.Parallel()
			if store.SchemaVersion() < 2 {
				t.Fatalf("schema version %d, want at least 2", store.SchemaVersion())
			}
			reopen, raw := d.open(t)
			name, v1, err := store.MigrationSQL(d.kind, 1)
			if err != nil {
				t.Fatal(err)
			}
			raw.exec(t, store.CreateMigrationsTable)
			raw.exec(t, v1)
			raw.exec(t, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, $1, 0)`, name)
			raw.exec(t, `INSERT INTO drips (at, recipient, stacking, amount, fee, txid, sender, nonce, outcome, client_bucket)
VALUES (1, 'ST1', false, 5, 1, 'ab01', 'ST2', 7, 'sent', '')`)

			s, err := reopen()
			if err != nil {
				t.Fatalf("open a version 1 database: %v", err)
			}
			want := store.SchemaVersion()
			if v, n := raw.count(t, "SELECT MAX(version) FROM schema_migrations"), raw.count(t, "SELECT COUNT(*) FROM schema_migrations"); v != want || n != want {
				t.Fatalf("after opening: version %d in %d rows, want %d in %d", v, n, want, want)
			}
			if d.kind == store.KindSQLite {
				if v := raw.count(t, "PRAGMA user_version"); v != want {
					t.Fatalf("user_version %d, want %d", v, want)
				}
			}
			if n := raw.count(t, d.index); n != 1 {
				t.Fatalf("%d expiry indexes on spent_challenges, want 1", n)
			}
			if got, ok, err := s.DripByTxID(t.Context(), "0xAB01"); err != nil || !ok || got.Nonce != 7 {
				t.Fatalf("version 1 data after migrating: %+v %v %v", got, ok, err)
			}
			exp := time.Now().Add(time.Hour)
			for i, want := range []bool{true, false} {
				if fresh, err := s.SpendChallenge(t.Context(), "after-upgrade", exp); err != nil || fresh != want {
					t.Fatalf("spend %d: fresh=%v %v, want %v", i, fresh, err, want)
				}
			}
			s.Close()

			// Opening again applies nothing more and keeps the spend.
			s, err = reopen()
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()
			if n := raw.count(t, "SELECT COUNT(*) FROM schema_migrations"); n != want {
				t.Fatalf("%d migration rows after reopening, want %d", n, want)
			}
			if fresh, err := s.SpendChallenge(t.Context(), "after-upgrade", exp); err != nil || fresh {
				t.Fatalf("spend after reopening: fresh=%v %v, want spent", fresh, err)
			}
		})
	}
}

// A write lock held past the busy timeout is an outage, not a bug; the
// store works again once the lock is gone.
func TestSQLiteBusyIsUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	s := openSQLitePath(t, path, store.Options{BusyTimeout: 50 * time.Millisecond})
	raw := openRawSQLite(t, path)
	conn, err := raw.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	tx := testEntry(stxKey(1), 1, 1)
	if err := s.Put(t.Context(), tx); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("put while locked: %v, want ErrStoreUnavailable", err)
	}
	if _, _, _, err := s.Reserve(t.Context(), t0, []guard.Bucket{bucket("k", 1, time.Minute)}); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("reserve while locked: %v, want ErrStoreUnavailable", err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), tx); err != nil {
		t.Fatalf("put after the lock is gone: %v", err)
	}
}

// Group commit: a write that fails alone fails alone — the writes that
// shared its transaction are committed.
func TestSQLiteFailingWriteFailsAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "batch.db")
	s := openSQLitePath(t, path, store.Options{})
	raw := openRawSQLite(t, path)
	raw.exec(t, `CREATE TRIGGER refuse_boom BEFORE INSERT ON drips WHEN NEW.outcome = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END`)
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			outcome := faucet.OutcomeSent
			if i%10 == 3 {
				outcome = "boom"
			}
			errs[i] = s.Record(t.Context(), faucet.DripRecord{At: t0, TxID: testTxID(byte(i)).String(), Outcome: outcome})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%10 == 3 && (err == nil || !strings.Contains(err.Error(), "boom refused")):
			t.Errorf("write %d: %v, want refused by the trigger", i, err)
		case i%10 == 3 && errors.Is(err, faucet.ErrStoreUnavailable):
			t.Errorf("write %d: a refused write reported as an outage: %v", i, err)
		case i%10 != 3 && err != nil:
			t.Errorf("write %d failed with its batch: %v", i, err)
		}
	}
	if got := raw.count(t, "SELECT COUNT(*) FROM drips"); got != n-n/10 {
		t.Fatalf("%d records stored, want %d", got, n-n/10)
	}
}

// A write whose context ends either happens (nil error) or does not
// happen (an error): never an error for a write that landed.
func TestSQLiteCancelledWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cancel.db")
	s := openSQLitePath(t, path, store.Options{})
	raw := openRawSQLite(t, path)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 50 {
		err := s.Put(ctx, testEntry(stxKey(1), uint64(i), byte(i)))
		stored := raw.count(t, fmt.Sprintf("SELECT COUNT(*) FROM journal WHERE seq = %d", i)) == 1
		if (err == nil) != stored {
			t.Fatalf("put %d: err %v, stored %v", i, err, stored)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), testEntry(stxKey(1), 99, 99)); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("put after close: %v, want ErrStoreUnavailable", err)
	}
	if _, _, _, err := s.Reserve(t.Context(), t0, []guard.Bucket{bucket("k", 1, time.Minute)}); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("reserve after close: %v, want ErrStoreUnavailable", err)
	}
}

func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// An unreachable Postgres fails Open at once, as an outage, and no error
// shows the password.
func TestPostgresOpenErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	uri := "postgres://faucet:" + secret + "@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/faucet?sslmode=disable"
	_, err := store.OpenPostgres(t.Context(), uri, store.Options{ConnectTimeout: 5 * time.Second})
	if err == nil || !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("unreachable: %v, want ErrStoreUnavailable", err)
	}
	if !strings.HasPrefix(err.Error(), "open store: postgres postgres://faucet:xxxxx@127.0.0.1:") || strings.Contains(err.Error(), secret) {
		t.Fatalf("unreachable: %q", err)
	}

	// A wrong password: refused by the server, not an outage.
	srv := pgtest.Shared(t)
	bad := strings.Replace(srv.URI("postgres"), pgtest.Password, secret, 1)
	_, err = store.Open(t.Context(), bad, store.Options{})
	if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), pgtest.Password) {
		t.Fatalf("wrong password: %q", err)
	}
	if errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("wrong password reported as an outage: %v", err)
	}

	// A malformed URI.
	_, err = store.Open(t.Context(), "postgres://faucet:"+secret+"@127.0.0.1:99999999/x?connect_timeout=zz", store.Options{})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("malformed: %q", err)
	}
}

// Replicas starting together migrate one at a time.
func TestPostgresConcurrentOpen(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			s, err := store.OpenPostgres(t.Context(), uri, store.Options{})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := openRawPG(t, uri).count(t, "SELECT COUNT(*) FROM schema_migrations"); n != store.SchemaVersion() {
		t.Fatalf("%d migration rows, want %d", n, store.SchemaVersion())
	}
}

// Two replicas on one database reserve exactly, together.
func TestPostgresReplicasExact(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	a := openPostgresURI(t, uri, store.Options{})
	b := openPostgresURI(t, uri, store.Options{})
	if got := concurrentReserve(t, []guard.Limiter{a, b}, 40, t0, bucket("addr:ST1", 5, time.Minute)); got != 5 {
		t.Fatalf("%d reservations across two replicas, want 5", got)
	}
	bs := []guard.Bucket{bucket("ip:198.51.100.1", 7, time.Minute), bucket("addr:ST2", 3, time.Minute)}
	if got := concurrentReserve(t, []guard.Limiter{a, b}, 30, t0, bs...); got != 3 {
		t.Fatalf("%d two-bucket reservations across two replicas, want 3", got)
	}
}

// PruneSlots drops slots whose window ended, PruneChallenges expired spent
// challenges (in batches); RunPruner prunes history, slots and challenges
// in the background and stops with its context.
func TestPruning(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T, o store.Options) (store.Store, rawDB)
	}{
		{"sqlite", func(t *testing.T, o store.Options) (store.Store, rawDB) {
			path := filepath.Join(t.TempDir(), "p.db")
			return openSQLitePath(t, path, o), openRawSQLite(t, path)
		}},
		{"postgres", func(t *testing.T, o store.Options) (store.Store, rawDB) {
			uri := pgtest.Shared(t).CreateDB(t)
			return openPostgresURI(t, uri, o), openRawPG(t, uri)
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			// The store's clock: the pruner prunes at its time and
			// SpendChallenge judges expiry by it.
			clk := clocktesting.NewFakeClock(t0.Add(47*time.Hour + 30*time.Minute))
			s, raw := d.open(t, store.Options{Clock: clk})
			ctx := t.Context()
			for range 3 {
				reserve(t, s, t0, bucket("short", 5, time.Minute))
			}
			reserve(t, s, t0, bucket("long", 5, time.Hour))
			reserve(t, s, t0.Add(47*time.Hour), bucket("recent", 5, time.Hour))
			if n, err := s.PruneSlots(ctx, t0.Add(time.Minute-1)); err != nil || n != 0 {
				t.Fatalf("prune before expiry: %d, %v", n, err)
			}
			if n, err := s.PruneSlots(ctx, t0.Add(time.Minute)); err != nil || n != 3 {
				t.Fatalf("prune at expiry: %d, %v; want 3", n, err)
			}

			// More expired challenges than two batches, and one live.
			expired := func(n int, prefix string) {
				raw.exec(t, fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
INSERT INTO spent_challenges (id, expires_at) SELECT '%s' || i, %d FROM n`, n, prefix, t0.UnixNano()))
			}
			expired(2*5000+1, "old-")
			if fresh, err := s.SpendChallenge(ctx, "live", t0.Add(48*time.Hour)); err != nil || !fresh {
				t.Fatalf("spend: %v %v", fresh, err)
			}
			if n, err := s.PruneChallenges(ctx, t0.Add(-time.Nanosecond)); err != nil || n != 0 {
				t.Fatalf("prune challenges before expiry: %d, %v", n, err)
			}
			if n, err := s.PruneChallenges(ctx, t0); err != nil || n != 2*5000+1 {
				t.Fatalf("prune challenges at expiry: %d, %v; want %d", n, err, 2*5000+1)
			}
			expired(3, "older-")

			old := faucet.DripRecord{At: t0, TxID: testTxID(1).String(), Outcome: faucet.OutcomeSent}
			recent := faucet.DripRecord{At: t0.Add(47 * time.Hour), TxID: testTxID(2).String(), Outcome: faucet.OutcomeSent}
			for _, r := range []faucet.DripRecord{old, recent} {
				if err := s.Record(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.RunPruner(pctx, 24*time.Hour, 10*time.Minute)
			}()
			// Its first round runs at once.
			eventually.True(t, 10*time.Second, "the pruner deletes the old record, the expired slot and the expired challenges", func() bool {
				return raw.count(t, "SELECT COUNT(*) FROM drips") == 1 && raw.count(t, "SELECT COUNT(*) FROM limit_slots") == 1 &&
					raw.count(t, "SELECT COUNT(*) FROM spent_challenges") == 1
			})
			// The next round, one interval later, deletes a challenge that
			// expired since.
			raw.exec(t, fmt.Sprintf(`INSERT INTO spent_challenges (id, expires_at) VALUES ('soon', %d)`, clk.Now().Add(5*time.Minute).UnixNano()))
			clk.Step(10 * time.Minute)
			eventually.True(t, 10*time.Second, "the next round deletes the challenge expired since", func() bool {
				return raw.count(t, "SELECT COUNT(*) FROM spent_challenges") == 1
			})
			if fresh, err := s.SpendChallenge(ctx, "live", t0.Add(48*time.Hour)); err != nil || fresh {
				t.Fatalf("the live challenge was pruned: %v %v", fresh, err)
			}
			if _, ok, err := s.DripByTxID(ctx, recent.TxID); !ok || err != nil {
				t.Fatalf("the recent record was pruned: %v", err)
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("RunPruner did not return after its context ended")
			}
		})
	}
}
