package store

// Backup and restore of the embedded SQLite store: `faucet store backup`
// and `faucet store restore` (docs/backups.md). A backup is a consistent
// snapshot taken while a faucet writes (VACUUM INTO reads one WAL
// snapshot and blocks no writer); a restore puts a checked copy in place,
// atomically, only where no faucet runs.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors a backup or restore is refused with.
var (
	// ErrStoreInUse: a faucet process holds the store's lock.
	ErrStoreInUse = errors.New("a faucet process is using the store")
	// ErrStoreExists: the restore's target already holds a store.
	ErrStoreExists = errors.New("the target already holds a store")
	// ErrNotFaucetStore: the file is not an SQLite store of this faucet.
	ErrNotFaucetStore = errors.New("not a faucet store")
	// ErrSchemaTooNew: the store was written by a newer faucet.
	ErrSchemaTooNew = errors.New("schema newer than this faucet knows")
)

// TableRows is how many rows one table of a store holds.
type TableRows struct {
	Name string
	Rows int64
}

// Summary describes an SQLite store file as a backup wrote it or a
// restore put it in place.
type Summary struct {
	Path   string
	Bytes  int64
	SHA256 string // of the file's bytes, hex
	// SchemaVersion is the newest migration the file records.
	SchemaVersion int
	// Tables lists every table by name (SQLite's internal ones left out).
	Tables []TableRows
	// InDoubt counts the journal entries the file holds in state
	// broadcasting: the faucet that opens it sends them again at start.
	InDoubt int64
}

// Rows returns the row count of table name, and whether the file has it.
func (s Summary) Rows(name string) (int64, bool) {
	for _, t := range s.Tables {
		if t.Name == name {
			return t.Rows, true
		}
	}
	return 0, false
}

// BackupResult is what BackupSQLite wrote.
type BackupResult struct {
	Summary
	// Online: a faucet process held the store while it was copied (or
	// whether one did could not be told).
	Online bool
	// LeftOut counts the journal entries being sent at the instant of an
	// online backup, which the copy leaves out (see leaveOutInDoubt).
	LeftOut int64
	Took    time.Duration
}

// BackupSQLite writes a consistent copy of the SQLite store at src to dst
// (replaced atomically), whether or not a faucet is writing src. The copy
// is checked (integrity, schema) before it replaces dst. clk times the
// copy and paces the lock probe; nil is the real clock.
//
// In an online backup the faucet goes on after the snapshot, so the copy
// leaves out the journal entries it was sending at that instant
// (leaveOutInDoubt); an offline copy keeps the journal whole.
func BackupSQLite(ctx context.Context, src, dst string, clk clock.Clock) (res BackupResult, err error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	fail := func(err error) error { return fmt.Errorf("back up %s: %w", src, err) }
	if err := checkSource(src, dst); err != nil {
		return res, fail(err)
	}
	start := clk.Now()
	// A lock we cannot take or test (held, or an unwritable directory)
	// counts as online: leaving the in-doubt entries out is the safe side.
	release, err := probeLock(src, clk)
	res.Online = err != nil
	tmp, err := createTemp(dst, ".backup-*")
	if err != nil {
		release()
		return res, fail(err)
	}
	defer func() {
		if err != nil {
			removeSQLiteFiles(tmp)
		}
	}()
	err = vacuumInto(ctx, src, tmp)
	release() // the snapshot is taken: a faucet waiting for the lock may start
	if err != nil {
		return res, fail(err)
	}
	sum, left, err := settle(ctx, tmp, res.Online)
	if err != nil {
		return res, fail(fmt.Errorf("the copy: %w", err))
	}
	if err := commitFile(tmp, dst); err != nil {
		return res, fail(err)
	}
	res.Summary, res.LeftOut, res.Took = sum, left, clk.Since(start)
	res.Path = dst
	if res.Bytes, res.SHA256, err = hashFile(dst); err != nil {
		return res, fail(err)
	}
	return res, nil
}

// checkSource refuses a backup whose source is not a non-empty regular
// file, or whose destination is the source itself.
func checkSource(src, dst string) error {
	if err := checkSQLitePath(src); err != nil {
		return err
	}
	if err := checkSQLitePath(dst); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	st, err := os.Stat(src)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no store there: %w", err)
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%w: not a regular file", ErrNotFaucetStore)
	case st.Size() == 0:
		return fmt.Errorf("%w: the file is empty", ErrNotFaucetStore)
	}
	if out, err := os.Stat(dst); err == nil && os.SameFile(st, out) {
		return errors.New("the output is the store itself")
	}
	return nil
}

// checkSQLitePath refuses what OpenSQLite refuses, so a path that works
// for serve works here.
func checkSQLitePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.ContainsAny(p, "?#"):
		return errors.New("the path must not contain '?' or '#'")
	}
	return nil
}

// probeLock tries, once, the lock a faucet process holds on path while it
// runs (OpenSQLite). It returns ErrStoreInUse when a process holds it;
// otherwise the lock is ours until release, so no faucet starts on the
// file meanwhile (one that tries waits for it). release is never nil.
func probeLock(path string, clk clock.Clock) (release func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one try: lockFile gives up at once when it would wait
	f, err := lockFile(ctx, path+".lock", slog.New(slog.DiscardHandler), clk)
	if errors.Is(err, context.Canceled) {
		return func() {}, fmt.Errorf("%w: another process holds %s.lock", ErrStoreInUse, path)
	}
	if err != nil {
		return func() {}, err
	}
	return func() { f.Close() }, nil
}

// sqliteURI is path as an SQLite URI filename with params, so that mode=rw
// opens only an existing file (a plain name would create a missing one).
func sqliteURI(path, params string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + esc + "?" + params
}

// openFile opens an existing SQLite file on one connection.
func openFile(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqliteURI(path, "mode=rw&_pragma=busy_timeout(10000)"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// vacuumInto copies src's newest committed state into dst, an empty file:
// one read transaction, which in WAL mode waits for no writer and blocks
// none.
func vacuumInto(ctx context.Context, src, dst string) error {
	db, err := openFile(src)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO $1`, dst); err != nil {
		return fmt.Errorf("copy: %w", describeSQLiteErr(err))
	}
	return nil
}

// describeSQLiteErr names the usual reason a file is refused.
func describeSQLiteErr(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%w: not an SQLite database (%w)", ErrNotFaucetStore, err)
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("the file is damaged or was cut short in transfer (%w)", err)
	}
	return err
}

// createTemp creates an empty file, readable by its owner only (a store
// holds client IP groups), beside dst.
func createTemp(dst, pattern string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+pattern)
	if err != nil {
		return "", err
	}
	name := f.Name()
	if err := errors.Join(f.Chmod(0o600), f.Close()); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// removeSQLiteFiles removes a temporary database and what SQLite may have
// left beside it.
func removeSQLiteFiles(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(path + suffix)
	}
}

// commitFile makes tmp durable and renames it to dst, durably.
func commitFile(tmp, dst string) error {
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// hashFile returns path's size and SHA-256.
func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
