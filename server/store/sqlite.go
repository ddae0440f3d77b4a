package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// SQLite is a Store in one SQLite file (pure Go, no cgo), for a single
// faucet process. Writes go through one connection (SQLite has one writer
// anyway) in WAL mode with synchronous=NORMAL, committed in groups (see
// sqlite_writer.go); reads use a small pool of their own so they never
// queue behind writes. Every write transaction is BEGIN IMMEDIATE (waiting
// up to Options.BusyTimeout for a reader's lock). A second faucet process
// on the same file waits at open until the first exits (a lock file beside
// the database), so one process at a time signs with the file's nonces.
type SQLite struct {
	path   string
	log    *slog.Logger
	lock   *os.File // flock on path+".lock" while the store is open
	writer *sql.DB
	reader *sql.DB

	put, del, record, nth, slot, spend, use *sql.Stmt // on writer
	readPool, draw, undraw                  *sql.Stmt // on writer: the budget pools
	list, byTxID                            *sql.Stmt // on reader
	clock                                   clock.WithTicker

	ops        chan *writeOp // to the writer goroutine
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// SQLite statements; $n parameters are numbered as in Postgres (SQLite
// reads $1 as parameter 1).
const (
	// sqlNthNewest finds the oldest of a bucket's last Requests live slots
	// ($3 = Requests-1): a row means the bucket is full.
	sqlNthNewest  = `SELECT at FROM limit_slots WHERE bucket = $1 AND at > $2 ORDER BY at DESC, id DESC LIMIT 1 OFFSET $3`
	sqlInsertSlot = `INSERT INTO limit_slots (bucket, at, expires_at) VALUES ($1, $2, $3)`
	sqlRecord     = `INSERT INTO drips (at, recipient, stacking, amount, fee, txid, sender, nonce, outcome, client_bucket, batch, asset)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	sqlByTxID = `SELECT at, recipient, stacking, amount, fee, txid, sender, nonce, outcome, client_bucket, batch, asset
FROM drips WHERE txid = $1 ORDER BY at DESC, id DESC LIMIT 1`
	// The pruner deletes in batches of pruneBatch (the same text on both
	// drivers).
	sqlPruneDrips = `DELETE FROM drips WHERE id IN (SELECT id FROM drips WHERE at < $1 LIMIT 5000)`
	sqlPruneSlots = `DELETE FROM limit_slots WHERE id IN (SELECT id FROM limit_slots WHERE expires_at <= $1 LIMIT 5000)`
	// spent_challenges_expires_at holds id too, so the inner SELECT reads
	// only that index.
	sqlPruneChallenges = `DELETE FROM spent_challenges WHERE id IN (SELECT id FROM spent_challenges WHERE expires_at <= $1 LIMIT 5000)`
)

// OpenSQLite opens (creating and migrating if needed) the SQLite database
// at path. The directory must exist and be writable.
func OpenSQLite(ctx context.Context, path string, opts Options) (_ *SQLite, err error) {
	opts = opts.withDefaults()
	fail := func(err error) error { return fmt.Errorf("open store: sqlite %s: %w", path, err) }
	if path == "" {
		return nil, fail(errors.New("empty path"))
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fail(errors.New("the path must not contain '?' or '#'"))
	}
	busy := strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)
	s := &SQLite{path: path, log: opts.Logger, clock: opts.Clock, ops: make(chan *writeOp), closing: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// One process per file. Each faucet process keeps its keys' nonces in
	// memory, so two on one file would sign the same nonces. SQLite's own
	// locks only order their writes. A pod that replaces a deleted one
	// starts while the old one still drains, on the same volume: the new
	// one waits here until the old one exits.
	lockCtx, cancelLock := context.WithTimeout(ctx, opts.LockTimeout)
	s.lock, err = lockFile(lockCtx, path+".lock", opts.Logger, opts.Clock)
	cancelLock()
	if err != nil {
		return nil, fail(fmt.Errorf("%w: %w", faucet.ErrStoreUnavailable, err))
	}
	s.writer, err = sql.Open("sqlite", path+"?_pragma=busy_timeout("+busy+")&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)&_txlock=immediate")
	if err != nil {
		return nil, fail(err)
	}
	// One writer: SQLite allows no more, and a Go-side queue is cheaper
	// than busy-waiting on the file lock.
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)

	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout+opts.BusyTimeout)
	defer cancel()
	if err := s.writer.PingContext(ctx); err != nil {
		return nil, fail(sqliteErr("connect", err))
	}
	if err := s.migrate(ctx); err != nil {
		return nil, fail(err)
	}
	s.reader, err = sql.Open("sqlite", path+"?_pragma=busy_timeout("+busy+")&_pragma=query_only(1)&_pragma=temp_store(MEMORY)")
	if err != nil {
		return nil, fail(err)
	}
	s.reader.SetMaxOpenConns(8)
	s.reader.SetMaxIdleConns(8)
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.writer, &s.put, sqlJournalPut}, {s.writer, &s.del, sqlJournalDelete}, {s.writer, &s.record, sqlRecord},
		{s.writer, &s.nth, sqlNthNewest}, {s.writer, &s.slot, sqlInsertSlot}, {s.writer, &s.spend, sqlSpendChallenge},
		{s.writer, &s.use, sqlBucketUse},
		{s.writer, &s.readPool, sqlReadPool}, {s.writer, &s.draw, sqlDraw}, {s.writer, &s.undraw, sqlUndraw},
		{s.reader, &s.list, sqlJournalList}, {s.reader, &s.byTxID, sqlByTxID},
	} {
		if *p.dst, err = p.db.PrepareContext(ctx, p.text); err != nil {
			return nil, fail(sqliteErr("prepare", err))
		}
	}
	s.writerDone = make(chan struct{})
	go s.writeLoop()
	s.log.Info("store opened", "driver", KindSQLite, "path", path)
	return s, nil
}

// migrate brings the schema to this binary's version in one transaction.
func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE: _txlock
	if err != nil {
		return sqliteErr("migrate", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	current, applied, err := applyMigrations(ctx, sqlMigrationTx{tx}, sqliteDialect, sqliteErr, s.clock.Now())
	if err != nil {
		return err
	}
	// Always write something, so a read-only file fails here and not at
	// the first drip; user_version mirrors the schema for sqlite3 users.
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(current)); err != nil {
		return sqliteErr("migrate", err)
	}
	if err := tx.Commit(); err != nil {
		return sqliteErr("migrate: commit", err)
	}
	if applied {
		s.log.Info("store schema migrated", "driver", KindSQLite, "version", current)
	}
	return nil
}

// sqlMigrationTx adapts a database/sql transaction to applyMigrations.
type sqlMigrationTx struct{ tx *sql.Tx }

func (t sqlMigrationTx) exec(ctx context.Context, query string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, query, args...)
	return err
}

func (t sqlMigrationTx) queryInt(ctx context.Context, query string) (n int, err error) {
	err = t.tx.QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// Kind returns "sqlite".
func (s *SQLite) Kind() string { return KindSQLite }

// Path is the database file.
func (s *SQLite) Path() string { return s.path }

// Ping checks that the file can be read.
func (s *SQLite) Ping(ctx context.Context) error {
	var one int
	if err := s.reader.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return sqliteErr("ping", err)
	}
	return nil
}

// Close waits for the writes under way, then closes the database; the WAL
// is checkpointed by the last close. Later calls fail with
// faucet.ErrStoreUnavailable.
func (s *SQLite) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *SQLite) close() error {
	close(s.closing)
	if s.writerDone != nil {
		<-s.writerDone
	}
	var errs []error
	for _, st := range []*sql.Stmt{s.put, s.del, s.record, s.nth, s.slot, s.spend, s.use, s.list, s.byTxID} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if s.lock != nil { // last: the file is ours until here
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// Reserve takes one slot in every bucket with Requests > 0, or none, in one
// write transaction.
func (s *SQLite) Reserve(ctx context.Context, now time.Time, buckets []guard.Bucket) (guard.Reservation, time.Duration, bool, error) {
	res, wait, _, err := s.ReserveDraw(ctx, now, buckets, guard.Draw{})
	return res, wait, wait == 0 && err == nil, err
}

// ReserveDraw takes one slot in every bucket with Requests > 0 and, with an
// active draw, its amount from each pool, or nothing, in one write
// transaction: it counts, reads the pools, and writes only once both
// admit the drip.
func (s *SQLite) ReserveDraw(ctx context.Context, now time.Time, buckets []guard.Bucket, d guard.Draw) (guard.Reservation, time.Duration, guard.Verdict, error) {
	active := activeBuckets(buckets)
	if len(active) == 0 && !d.Active() {
		return guard.Reservation{}, 0, guard.Verdict{}, nil
	}
	at := now.UnixNano()
	var res guard.Reservation
	var wait time.Duration
	var v guard.Verdict
	err := s.write(ctx, func(t *sql.Tx) error {
		res, wait, v = guard.Reservation{Use: make([]guard.BucketUse, len(active))}, 0, guard.Verdict{}
		nth, slot, use := t.Stmt(s.nth), t.Stmt(s.slot), t.Stmt(s.use)
		for i, b := range active {
			cutoff := at - b.Limit.Window.Nanoseconds()
			var n, first int64
			if err := use.QueryRow(b.Key, cutoff).Scan(&n, &first); err != nil {
				return fmt.Errorf("bucket %s: %w", b.Key, err)
			}
			res.Use[i] = guard.UseBefore(int(n), time.Unix(0, first), b.Limit.Window, now)
			if n < int64(b.Limit.Requests) {
				continue
			}
			var oldest int64
			err := nth.QueryRow(b.Key, cutoff, b.Limit.Requests-1).Scan(&oldest)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return fmt.Errorf("bucket %s: %w", b.Key, err)
			default:
				res.Use[i].Wait = waitFor(oldest, b.Limit.Window, now)
				wait = max(wait, res.Use[i].Wait)
			}
		}
		if wait > 0 {
			return nil
		}
		if d.Active() {
			pools, err := s.readPoolsTx(t, now, d)
			if err != nil {
				return err
			}
			if v = d.Decide(pools, now); v.Amount == 0 {
				return nil
			}
			if res.Drawn, err = s.drawTx(t, now, d, v.Amount); err != nil {
				return err
			}
		}
		res.Use = guard.Reserved(active, res.Use, now)
		res.IDs = make([]int64, 0, len(active))
		for _, b := range active {
			r, err := slot.Exec(b.Key, at, at+b.Limit.Window.Nanoseconds())
			if err != nil {
				return fmt.Errorf("bucket %s: %w", b.Key, err)
			}
			id, err := r.LastInsertId()
			if err != nil {
				return fmt.Errorf("bucket %s: %w", b.Key, err)
			}
			res.IDs = append(res.IDs, id)
		}
		return nil
	})
	if err != nil {
		return guard.Reservation{}, 0, guard.Verdict{}, sqliteErr("limiter reserve", err)
	}
	res.Use = spread(buckets, res.Use)
	if wait > 0 || (d.Active() && v.Amount == 0) {
		return guard.Reservation{Use: res.Use}, wait, v, nil
	}
	return res, 0, v, nil
}

// readPoolsTx reads d's pools inside a write transaction (SQLite).
func (s *SQLite) readPoolsTx(t *sql.Tx, now time.Time, d guard.Draw) ([]guard.PoolUse, error) {
	first := guard.FirstStep(now, d.Window, d.Step)
	out := make([]guard.PoolUse, len(d.Pools))
	read := t.Stmt(s.readPool)
	for i, p := range d.Pools {
		steps, err := scanSteps(read.Query(p.Key, first))
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", p.Key, err)
		}
		out[i].Steps = steps
	}
	return out, nil
}

// drawTx adds amount to the current step of every pool of d (SQLite).
func (s *SQLite) drawTx(t *sql.Tx, now time.Time, d guard.Draw, amount uint64) (*guard.Drawn, error) {
	idx := guard.StepIndex(now, d.Step)
	expires := guard.StepExpiry(idx, d.Window, d.Step).UnixNano()
	dr := &guard.Drawn{Index: idx, Amount: amount}
	draw := t.Stmt(s.draw)
	for _, p := range d.Pools {
		if _, err := draw.Exec(p.Key, idx, i64(amount), expires); err != nil {
			return nil, fmt.Errorf("pool %s: %w", p.Key, err)
		}
		dr.Pools = append(dr.Pools, p.Key)
	}
	return dr, nil
}

// undrawTx gives a draw back (SQLite); nil gives nothing.
func (s *SQLite) undrawTx(t *sql.Tx, d *guard.Drawn) error {
	if d == nil {
		return nil
	}
	undraw := t.Stmt(s.undraw)
	for _, k := range d.Pools {
		if _, err := undraw.Exec(k, d.Index, i64(d.Amount)); err != nil {
			return fmt.Errorf("pool %s: %w", k, err)
		}
	}
	return nil
}

// Peek reads each bucket's use from a reader connection (nothing is
// reserved, so it need not wait for the writer): one query per bucket,
// one more for a full bucket's wait.
func (s *SQLite) Peek(ctx context.Context, now time.Time, buckets []guard.Bucket) ([]guard.BucketUse, error) {
	out := make([]guard.BucketUse, len(buckets))
	at := now.UnixNano()
	for i, b := range buckets {
		if b.Limit.Requests <= 0 {
			continue
		}
		cutoff := at - b.Limit.Window.Nanoseconds()
		var n, first int64
		if err := s.reader.QueryRowContext(ctx, sqlBucketUse, b.Key, cutoff).Scan(&n, &first); err != nil {
			return nil, sqliteErr("limiter peek", fmt.Errorf("bucket %s: %w", b.Key, err))
		}
		out[i] = guard.UseBefore(int(n), time.Unix(0, first), b.Limit.Window, now)
		if n >= int64(b.Limit.Requests) {
			var nth int64
			if err := s.reader.QueryRowContext(ctx, sqlNthNewest, b.Key, cutoff, b.Limit.Requests-1).Scan(&nth); err != nil {
				return nil, sqliteErr("limiter peek", fmt.Errorf("bucket %s: %w", b.Key, err))
			}
			out[i].Wait = waitFor(nth, b.Limit.Window, now)
		}
	}
	return out, nil
}

// Release deletes the reservation's slots (ids already gone are ignored)
// and gives its draw back, in one write transaction.
func (s *SQLite) Release(ctx context.Context, r guard.Reservation) error {
	if len(r.IDs) == 0 && r.Drawn == nil {
		return nil
	}
	if err := s.write(ctx, func(t *sql.Tx) error {
		if len(r.IDs) > 0 {
			q, args := deleteSlotsSQL(r.IDs)
			if _, err := t.Exec(q, args...); err != nil {
				return err
			}
		}
		return s.undrawTx(t, r.Drawn)
	}); err != nil {
		return sqliteErr("limiter release", err)
	}
	return nil
}

func deleteSlotsSQL(ids []int64) (string, []any) {
	var b strings.Builder
	b.WriteString("DELETE FROM limit_slots WHERE id IN (")
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("$" + strconv.Itoa(i+1))
		args[i] = id
	}
	b.WriteByte(')')
	return b.String(), args
}

// PruneSlots deletes slots whose window ended at or before now.
// Budget steps that have left their window go with them.
func (s *SQLite) PruneSlots(ctx context.Context, now time.Time) (int64, error) {
	return pruneSlots(ctx, now, s.pruneLoop)
}

// ReadPools reads each pool's steps within the window at now, from a
// reader connection.
func (s *SQLite) ReadPools(ctx context.Context, now time.Time, d guard.Draw) ([]guard.PoolUse, error) {
	first := guard.FirstStep(now, d.Window, d.Step)
	out := make([]guard.PoolUse, len(d.Pools))
	for i, p := range d.Pools {
		steps, err := scanSteps(s.reader.QueryContext(ctx, sqlReadPool, p.Key, first))
		if err != nil {
			return nil, sqliteErr("budget read", fmt.Errorf("pool %s: %w", p.Key, err))
		}
		out[i].Steps = steps
	}
	return out, nil
}

// SpendChallenge marks a proof-of-work challenge id used until expires;
// fresh is false when it was already spent and has not expired by
// Options.Clock. It is one statement in a write transaction (group-committed
// with other writes), so two stores on one file cannot both see it fresh.
func (s *SQLite) SpendChallenge(ctx context.Context, id string, expires time.Time) (fresh bool, err error) {
	args, err := spendArgs(id, expires, s.clock.Now())
	if err != nil {
		return false, err
	}
	if err := s.write(ctx, func(t *sql.Tx) error {
		fresh = false // a batch that fails runs again
		r, err := t.Stmt(s.spend).Exec(args...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		fresh = n == 1
		return err
	}); err != nil {
		return false, sqliteErr("spend challenge", err)
	}
	return fresh, nil
}

// PruneChallenges deletes spent challenges whose expiry is at or before
// now.
func (s *SQLite) PruneChallenges(ctx context.Context, now time.Time) (int64, error) {
	return s.pruneLoop(ctx, "prune spent challenges", sqlPruneChallenges, now.UnixNano())
}

// Record appends a drip to the history.
func (s *SQLite) Record(ctx context.Context, d faucet.DripRecord) error {
	if err := s.exec(ctx, s.record, recordArgs(d)...); err != nil {
		return sqliteErr("history record", err)
	}
	return nil
}

func recordArgs(d faucet.DripRecord) []any {
	return []any{nanos(d.At), d.Recipient, d.Stacking, i64(d.Amount), i64(d.Fee), normTxID(d.TxID), d.Sender,
		i64(d.Nonce), d.Outcome, d.ClientBucket, d.Batch, assetName(d.Asset)}
}

// assetName is the stored asset: rows without one are STX, as the
// migration that added the column says.
func assetName(a faucet.Asset) string {
	if a == "" {
		return string(faucet.AssetSTX)
	}
	return string(a)
}

// Prune deletes drips recorded before before and reports how many.
func (s *SQLite) Prune(ctx context.Context, before time.Time) (int64, error) {
	return s.pruneLoop(ctx, "prune history", sqlPruneDrips, nanos(before))
}

// pruneLoop runs a batched DELETE until a batch comes back short, so that
// no single statement holds the write lock for long.
func (s *SQLite) pruneLoop(ctx context.Context, op, q string, arg int64) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.write(ctx, func(t *sql.Tx) error {
			r, err := t.Exec(q, arg)
			if err == nil {
				n, err = r.RowsAffected()
			}
			return err
		})
		if err != nil {
			return total, sqliteErr(op, err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// DripByTxID returns the newest drip with that txid.
func (s *SQLite) DripByTxID(ctx context.Context, txid string) (faucet.DripRecord, bool, error) {
	return dripByTxID(txid, func(id string) rowScanner { return s.byTxID.QueryRowContext(ctx, id) }, sqliteErr)
}

// rowScanner is a driver's one-row answer: *sql.Row or pgx.Row.
type rowScanner interface{ Scan(dest ...any) error }

// dripByTxID is DripByTxID for both drivers: query runs sqlByTxID for the
// normalised txid and wrap classifies the driver's errors. Both drivers
// answer no row with sql.ErrNoRows (pgx.ErrNoRows wraps it).
func dripByTxID(txid string, query func(id string) rowScanner, wrap func(op string, err error) error) (faucet.DripRecord, bool, error) {
	id := normTxID(txid)
	if id == "" {
		return faucet.DripRecord{}, false, nil
	}
	var d faucet.DripRecord
	var at, amount, fee, nonce int64
	err := query(id).Scan(&at, &d.Recipient, &d.Stacking, &amount, &fee,
		&d.TxID, &d.Sender, &nonce, &d.Outcome, &d.ClientBucket, &d.Batch, &d.Asset)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return faucet.DripRecord{}, false, nil
	case err != nil:
		return faucet.DripRecord{}, false, wrap("history by txid", err)
	}
	d.At, d.Amount, d.Fee, d.Nonce = fromNanos(at), u64(amount), u64(fee), u64(nonce)
	return d, true, nil
}

// RunPruner deletes old history, expired slots and expired spent
// challenges until ctx ends.
func (s *SQLite) RunPruner(ctx context.Context, retention, interval time.Duration) {
	runPruner(ctx, s.log, s, retention, interval, s.clock)
}

// sqliteErr wraps err with op, marking lock timeouts, I/O failures and a
// closed database as faucet.ErrStoreUnavailable.
func sqliteErr(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL:
			return unavailable(op, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "sql: database is closed") || strings.Contains(err.Error(), "sql: statement is closed") {
		return unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
