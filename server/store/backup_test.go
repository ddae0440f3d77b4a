package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
)

const backupKey = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG"

// TestBackupWhileWriting: backups taken while one writer records drips in
// order and four others reserve limit slots are consistent snapshots: each
// holds drips 1…n without a gap, n between what was written before the
// backup started and after it ended, and passes SQLite's integrity check.
func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "faucet.db")
	s := openSQLitePath(t, src, store.Options{})
	ctx := t.Context()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Go(func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := faucet.DripRecord{At: time.Unix(0, i), Recipient: backupKey, Amount: 1, TxID: fmt.Sprintf("%064x", i), Outcome: "sent"}
			if err := s.Record(ctx, d); err != nil {
				t.Error(err)
				return
			}
			written.Store(i)
		}
	})
	var slots atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			b := []guard.Bucket{{Key: fmt.Sprintf("addr:%d", w), Limit: guard.Limit{Requests: 1 << 30, Window: time.Hour}}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, ok, err := s.Reserve(ctx, time.Now(), b); err != nil || !ok {
					t.Errorf("reserve: %v %v", ok, err)
					return
				}
				slots.Add(1)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for written.Load() < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	for k := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("backup-%d.db", k))
		before, slotsBefore := written.Load(), slots.Load()
		res, err := store.BackupSQLite(ctx, src, out, nil)
		after, slotsAfter := written.Load(), slots.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Online {
			t.Errorf("backup %d of an open store: Online false", k)
		}
		raw := openRawSQLite(t, out)
		n := int64(raw.count(t, `SELECT count(*) FROM drips`))
		last := int64(raw.count(t, `SELECT COALESCE(max(at), 0) FROM drips`))
		first := int64(raw.count(t, `SELECT COALESCE(min(at), 0) FROM drips`))
		if n != last || first != 1 {
			t.Errorf("backup %d holds %d drips from %d to %d: not a prefix of the writes", k, n, first, last)
		}
		if n < before || n > after+1 {
			t.Errorf("backup %d holds %d drips; %d were written before it started and %d when it ended", k, n, before, after)
		}
		if rows, _ := res.Rows("drips"); rows != n {
			t.Errorf("summary says %d drips, the file holds %d", rows, n)
		}
		if got, _ := res.Rows("limit_slots"); got < slotsBefore || got > slotsAfter+4 {
			t.Errorf("backup %d holds %d slots; %d reserved before, %d after", k, got, slotsBefore, slotsAfter)
		}
		t.Logf("backup %d: %d bytes in %s, %d drips (%d written before, %d after)", k, res.Bytes, res.Took, n, before, after)
	}
}

// TestBackupLeavesOutInDoubtOnlyOnline: a backup of a store a faucet has
// open leaves out the entries in state broadcasting (that faucet settles
// them after the snapshot); a backup of a closed store keeps the journal
// whole.
func TestBackupLeavesOutInDoubtOnlyOnline(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "faucet.db")
	s := openSQLitePath(t, src, store.Options{})
	pending, sending := testEntry(backupKey, 1, 1), testEntry(backupKey, 2, 2)
	sending.State = journal.Broadcasting
	for _, e := range []journal.Entry{pending, sending} {
		if err := s.Put(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	online, err := store.BackupSQLite(t.Context(), src, filepath.Join(dir, "online.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !online.Online || online.LeftOut != 1 || online.InDoubt != 0 {
		t.Errorf("online backup: online %v, left out %d, in doubt %d; want true, 1, 0", online.Online, online.LeftOut, online.InDoubt)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	offline, err := store.BackupSQLite(t.Context(), src, filepath.Join(dir, "offline.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if offline.Online || offline.LeftOut != 0 || offline.InDoubt != 1 {
		t.Errorf("offline backup: online %v, left out %d, in doubt %d; want false, 0, 1", offline.Online, offline.LeftOut, offline.InDoubt)
	}
	for name, want := range map[string][]journal.Entry{"online.db": {pending}, "offline.db": {pending, sending}} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "restored-"+name)
		_, err = store.RestoreSQLite(t.Context(), f, dst, store.RestoreOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := openSQLitePath(t, dst, store.Options{})
		got, err := r.List(t.Context(), backupKey)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, func(a, b journal.Entry) bool { return a.TxID == b.TxID && a.State == b.State }) {
			t.Errorf("%s restored: journal %v, want %v", name, got, want)
		}
	}
}

// backupOf writes a small store (a slot, a drip, a journal entry) and an
// online backup of it; it returns the backup's bytes.
func backupOf(t *testing.T, now time.Time) []byte {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "faucet.db")
	s := openSQLitePath(t, src, store.Options{})
	b := []guard.Bucket{{Key: "addr:" + backupKey, Limit: guard.Limit{Requests: 1, Window: time.Hour}}}
	if _, _, ok, err := s.Reserve(t.Context(), now, b); err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	if err := s.Record(t.Context(), faucet.DripRecord{At: now, Recipient: backupKey, Amount: 5, TxID: testTxID(9).String(), Outcome: "sent"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), testEntry(backupKey, 3, 3)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "backup.db")
	if _, err := store.BackupSQLite(t.Context(), src, out, nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRestoreCarriesState: a restored store is what was backed up: the
// address at its limit is still refused, the history and the journal are
// there.
func TestRestoreCarriesState(t *testing.T) {
	now := time.Now()
	data := backupOf(t, now)
	dst := filepath.Join(t.TempDir(), "a dir %20 with #odd? name", "faucet.db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := store.RestoreSQLite(t.Context(), bytes.NewReader(data), dst, store.RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "'?' or '#'") {
		t.Fatalf("restore into a path serve refuses: %v", err)
	}
	dst = filepath.Join(t.TempDir(), "a dir %20 with spaces", "faucet.db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := store.RestoreSQLite(t.Context(), bytes.NewReader(data), dst, store.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != int64(len(data)) || res.SchemaVersion != store.SchemaVersion() || res.MovedAside != "" {
		t.Errorf("restore: %+v", res)
	}
	for table, want := range map[string]int64{"limit_slots": 1, "drips": 1, "journal": 1} {
		if got, ok := res.Rows(table); got != want || !ok {
			t.Errorf("restored %s: %d rows (%v), want %d", table, got, ok, want)
		}
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("restored file: %v %v, want mode 0600", st.Mode(), err)
	}
	s := openSQLitePath(t, dst, store.Options{})
	b := []guard.Bucket{{Key: "addr:" + backupKey, Limit: guard.Limit{Requests: 1, Window: time.Hour}}}
	if _, wait, ok, err := s.Reserve(t.Context(), now.Add(time.Minute), b); err != nil || ok || wait < 58*time.Minute {
		t.Errorf("reserve at the limit after the restore: ok %v, wait %s, err %v; want refused for the rest of the hour", ok, wait, err)
	}
	if d, ok, err := s.DripByTxID(t.Context(), testTxID(9).String()); err != nil || !ok || d.Amount != 5 {
		t.Errorf("history after the restore: %+v %v %v", d, ok, err)
	}
	if got, err := s.List(t.Context(), backupKey); err != nil || len(got) != 1 {
		t.Errorf("journal after the restore: %v %v", got, err)
	}
}

// TestRestoreRefuses: a target a faucet holds, a target with a store
// (without --force), and backups that are no faucet store of this faucet
// are refused, and leave the target and its directory as they were.
func TestRestoreRefuses(t *testing.T) {
	data := backupOf(t, time.Now())
	dir := t.TempDir()
	held := filepath.Join(dir, "held.db")
	openSQLitePath(t, held, store.Options{})
	if _, err := store.RestoreSQLite(t.Context(), bytes.NewReader(data), held, store.RestoreOptions{Force: true}); !errors.Is(err, store.ErrStoreInUse) {
		t.Errorf("restore into a store a faucet holds: %v, want ErrStoreInUse", err)
	}
	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RestoreSQLite(t.Context(), bytes.NewReader(data), existing, store.RestoreOptions{}); !errors.Is(err, store.ErrStoreExists) {
		t.Errorf("restore over a store without --force: %v, want ErrStoreExists", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("refused restore changed the target: %q", b)
	}

	foreign := filepath.Join(dir, "foreign.db")
	raw := openRawSQLite(t, foreign)
	raw.exec(t, `CREATE TABLE notes (x TEXT)`)
	raw.exec(t, `INSERT INTO notes VALUES ('hello')`)
	foreignData := readClosed(t, raw, foreign)

	newer := schemaEdited(t, data, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future', 0)`)
	renamed := schemaEdited(t, data, `UPDATE schema_migrations SET name = '0001_other' WHERE version = 1`)
	for name, tc := range map[string]struct {
		in   []byte
		want error
		text string
	}{
		"empty":         {nil, store.ErrNotFaucetStore, "empty"},
		"not sqlite":    {[]byte(strings.Repeat("not a database ", 500)), store.ErrNotFaucetStore, "not an SQLite database"},
		"truncated":     {data[:len(data)/2], nil, "cut short"},
		"foreign":       {foreignData, store.ErrNotFaucetStore, "no schema_migrations"},
		"newer schema":  {newer, store.ErrSchemaTooNew, "version 999"},
		"other lineage": {renamed, store.ErrNotFaucetStore, "0001_other"},
	} {
		t.Run(name, func(t *testing.T) {
			sub := t.TempDir()
			dst := filepath.Join(sub, "faucet.db")
			_, err := store.RestoreSQLite(t.Context(), bytes.NewReader(tc.in), dst, store.RestoreOptions{})
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("restore: %v, want %v mentioning %q", err, tc.want, tc.text)
			}
			left, _ := os.ReadDir(sub)
			for _, e := range left {
				if e.Name() != "faucet.db.lock" {
					t.Errorf("a refused restore left %s behind", e.Name())
				}
			}
		})
	}
}

// readClosed closes raw and returns the file's bytes.
func readClosed(t *testing.T, raw rawSQLite, path string) []byte {
	t.Helper()
	if _, err := raw.db.ExecContext(t.Context(), `PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	if err := raw.db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// schemaEdited is the backup with one statement applied to it.
func schemaEdited(t *testing.T, data []byte, stmt string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edited.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	raw := openRawSQLite(t, path)
	raw.exec(t, stmt)
	return readClosed(t, raw, path)
}

// TestRestoreForceKeepsTheOldStore: --force moves the store that was there
// aside with its write-ahead log, so neither that log is applied to the
// restored file nor the old store loses what its log held.
func TestRestoreForceKeepsTheOldStore(t *testing.T) {
	data := backupOf(t, time.Now())
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	s := openSQLitePath(t, live, store.Options{})
	for i := range 50 {
		if err := s.Record(t.Context(), faucet.DripRecord{At: time.Unix(0, int64(i+1)), Recipient: backupKey, TxID: testTxID(byte(i)).String(), Outcome: "sent"}); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the open store's files is what a crash leaves: the
	// database and a write-ahead log holding its last writes.
	dst := filepath.Join(dir, "faucet.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(dst + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the crashed store has no write-ahead log to test with: %v", err)
	}
	res, err := store.RestoreSQLite(t.Context(), bytes.NewReader(data), dst, store.RestoreOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.MovedAside != dst+".before-restore" {
		t.Errorf("moved aside to %q", res.MovedAside)
	}
	if _, err := os.Stat(dst + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old write-ahead log is still beside the restored store: %v", err)
	}
	restored := openRawSQLite(t, dst)
	if n := restored.count(t, `SELECT count(*) FROM drips`); n != 1 {
		t.Errorf("restored store holds %d drips, want the backup's 1", n)
	}
	old := openRawSQLite(t, res.MovedAside)
	if n := old.count(t, `SELECT count(*) FROM drips`); n != 50 {
		t.Errorf("the store moved aside holds %d drips, want its 50", n)
	}
}

// TestBackupRefuses: no store, an empty file, the output being the store.
func TestBackupRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "faucet.db")
	openSQLitePath(t, src, store.Options{})
	for name, tc := range map[string]struct{ src, dst, text string }{
		"missing": {filepath.Join(dir, "nothing.db"), filepath.Join(dir, "out.db"), "no store there"},
		"empty":   {empty, filepath.Join(dir, "out.db"), "empty"},
		"itself":  {src, src, "the store itself"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := store.BackupSQLite(context.Background(), tc.src, tc.dst, nil); err == nil || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("backup: %v, want an error mentioning %q", err, tc.text)
			}
			if _, err := os.Stat(filepath.Join(dir, "out.db")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused backup wrote its output: %v", err)
			}
		})
	}
}
