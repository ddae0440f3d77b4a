package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// Postgres is a Store in a Postgres database, shareable by several faucet
// replicas: the limiter serialises each bucket with a transaction-scoped
// advisory lock, and Run (journal.Owner) gives each key to one replica at
// a time, fencing journal writes with a per-key epoch.
//
// The URI must reach Postgres itself or a session-mode pooler: key
// ownership relies on session advisory locks.
type Postgres struct {
	uri     string // redacted
	log     *slog.Logger
	opts    Options
	pool    *pgxpool.Pool
	lockCfg *pgx.ConnConfig // for the ownership connection
	secrets []string        // password forms to scrub from errors

	own       ownership
	closeOnce sync.Once
}

// Statements only Postgres runs besides the fenced journal writes
// (journal.go): the limiter and the migration lock.
const (
	// sqlLockBuckets takes the buckets' transaction locks in the order of
	// the (sorted) array: a function scan of unnest yields its elements in
	// order. (Were that ever not so, Postgres would detect the deadlock and
	// fail one reservation; it could not over-count.)
	sqlLockBuckets = `SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest($1::text[]) AS k`
	// sqlReserve returns, per bucket in order, the at of the oldest of its
	// last Requests live slots (NULL unless full: $3 = Requests-1), the
	// ids of the slots it inserted (one per bucket if none is full, else
	// none), and each bucket's count of live slots and oldest one before
	// the insert (for the RateLimit fields, in the same round trip).
	sqlReserve = `WITH b AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $5::bigint[]) WITH ORDINALITY AS b(k, cutoff, off, expires, i)
), nth AS (
    SELECT b.i, s.at FROM b LEFT JOIN LATERAL (
        SELECT at FROM limit_slots WHERE bucket = b.k AND at > b.cutoff ORDER BY at DESC, id DESC LIMIT 1 OFFSET b.off
    ) s ON true
), used AS (
    SELECT b.i, u.n, u.first FROM b CROSS JOIN LATERAL (
        SELECT count(*) AS n, COALESCE(min(at), 0) AS first FROM limit_slots WHERE bucket = b.k AND at > b.cutoff
    ) u
), ins AS (
    INSERT INTO limit_slots (bucket, at, expires_at)
    SELECT b.k, $4::bigint, b.expires FROM b WHERE NOT EXISTS (SELECT 1 FROM nth WHERE nth.at IS NOT NULL)
    RETURNING id
)
SELECT (SELECT array_agg(at ORDER BY i) FROM nth), COALESCE((SELECT array_agg(id) FROM ins), '{}'),
    (SELECT array_agg(n ORDER BY i) FROM used), (SELECT array_agg(first ORDER BY i) FROM used)`
	sqlReleasePG = `DELETE FROM limit_slots WHERE id = ANY($1)`
	// sqlPeekPG counts each bucket's live slots and finds its oldest, in
	// the order of $1.
	sqlPeekPG = `SELECT COALESCE(array_agg(u.n ORDER BY b.i), '{}'), COALESCE(array_agg(u.oldest ORDER BY b.i), '{}')
FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS b(k, cutoff, i) CROSS JOIN LATERAL (
    SELECT count(*) AS n, COALESCE(min(at), 0) AS oldest FROM limit_slots WHERE bucket = b.k AND at > b.cutoff
) u`
	// sqlMigrationLock serialises Open's migration across replicas.
	sqlMigrationLock = `SELECT pg_advisory_xact_lock(hashtextextended('faucet-operator/store schema migration', 0))`
)

// OpenPostgres connects to the database uri names (postgres://…), creating
// and migrating the schema if needed.
func OpenPostgres(ctx context.Context, uri string, opts Options) (_ *Postgres, err error) {
	opts = opts.withDefaults()
	p := &Postgres{uri: Redact(uri), log: opts.Logger, opts: opts, secrets: passwordOf(uri)}
	fail := func(err error) error { return fmt.Errorf("open store: postgres %s: %w", p.uri, scrub(err, p.secrets)) }
	cfg, err := pgxpool.ParseConfig(uri)
	if err != nil {
		// The parse error keeps the raw URI in a field: do not chain it.
		return nil, fail(errors.New(scrub(err, p.secrets).Error()))
	}
	if !strings.Contains(uri, "pool_max_conns") {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 || cfg.ConnConfig.ConnectTimeout > opts.ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "faucet"
	}
	// Every statement is a small, prepared index lookup or write: re-planning
	// it for each call's values (Postgres' default for the first runs, and
	// for good when it prices generic plans high, as with unnest) costs more
	// than running it.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	// A network cut drops packets without a reset: neither side would
	// notice for minutes. Our side gives a connection up once what it sent
	// stays unacknowledged for pgUserTimeout, and probes idle ones; the
	// server probes us (server-side keepalive), so that a replica that
	// vanished without closing its socket frees its key locks and its
	// transaction's bucket locks within seconds, and keys move on.
	cfg.ConnConfig.DialFunc = pgDialer().DialContext
	for k, v := range map[string]string{"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3"} {
		if _, ok := cfg.ConnConfig.RuntimeParams[k]; !ok {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	p.lockCfg = cfg.ConnConfig.Copy()
	p.lockCfg.RuntimeParams["application_name"] = cfg.ConnConfig.RuntimeParams["application_name"] + " key-ownership"

	p.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fail(pgErr("connect", err))
	}
	defer func() {
		if err != nil {
			p.pool.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	if err := p.pool.Ping(ctx); err != nil {
		return nil, fail(pgErr("connect", err))
	}
	if err := p.migrate(ctx); err != nil {
		return nil, fail(err)
	}
	p.log.Info("store opened", "driver", KindPostgres, "uri", p.uri, "max_conns", cfg.MaxConns)
	return p, nil
}

// migrate brings the schema to this binary's version in one transaction,
// holding an advisory lock so that replicas starting together take turns.
func (p *Postgres) migrate(ctx context.Context) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return pgErr("migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, sqlMigrationLock); err != nil {
		return pgErr("migrate: lock", err)
	}
	current, applied, err := applyMigrations(ctx, pgMigrationTx{tx}, pgDialect, pgErr, p.opts.Clock.Now())
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return pgErr("migrate: commit", err)
	}
	if applied {
		p.log.Info("store schema migrated", "driver", KindPostgres, "version", current)
	}
	return nil
}

// pgMigrationTx adapts a pgx transaction to applyMigrations.
type pgMigrationTx struct{ tx pgx.Tx }

func (t pgMigrationTx) exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.Exec(ctx, sql, args...)
	return err
}

func (t pgMigrationTx) queryInt(ctx context.Context, sql string) (n int, err error) {
	err = t.tx.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// pgUserTimeout is how long data sent to Postgres may stay unacknowledged
// before the kernel gives the connection up (TCP_USER_TIMEOUT, on Linux): a
// statement on a cut connection fails in seconds, not at its context's end.
// A statement waiting on a lock sent nothing unacknowledged: it waits on.
const pgUserTimeout = 5 * time.Second

// pgDialer dials Postgres over TCP with keepalive probes after 5 s idle,
// every 2 s, and pgUserTimeout, which also bounds the probes.
func pgDialer() *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3},
		Control:         userTimeout(pgUserTimeout),
	}
}

// Kind returns "postgres".
func (p *Postgres) Kind() string { return KindPostgres }

// URI is the database URI with the password redacted.
func (p *Postgres) URI() string { return p.uri }

// Ping checks that the database answers.
func (p *Postgres) Ping(ctx context.Context) error {
	if err := p.pool.Ping(ctx); err != nil {
		return p.err("ping", err)
	}
	return nil
}

// Close stops key ownership (if Run is under way, its locks go with its
// connection) and closes the pool.
func (p *Postgres) Close() error {
	p.closeOnce.Do(func() {
		p.own.stop(p.opts.Clock)
		p.pool.Close()
	})
	return nil
}

// err wraps a driver error with op, classified and with any password
// scrubbed.
func (p *Postgres) err(op string, err error) error {
	return scrub(pgErr(op, err), p.secrets)
}

// Reserve takes one slot in every bucket with Requests > 0, or none, in one
// transaction that first takes each bucket's advisory lock (in key order,
// so that concurrent reservations cannot deadlock). The whole transaction
// is one batch, one round trip: BEGIN; the locks; one statement that finds
// each bucket's oldest of its last Requests live slots and inserts the new
// slots only if none is full; COMMIT. The counting statement starts after
// the locks are held, so its snapshot sees every slot committed before.
func (p *Postgres) Reserve(ctx context.Context, now time.Time, buckets []guard.Bucket) (guard.Reservation, time.Duration, bool, error) {
	active := activeBuckets(buckets)
	if len(active) == 0 {
		return guard.Reservation{}, 0, true, nil
	}
	sq := slotQuery(active, now)
	locks := slices.Clone(sq.keys)
	slices.Sort(locks)
	locks = slices.Compact(locks)

	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return guard.Reservation{}, 0, false, p.err("limiter reserve", err)
	}
	// A connection left inside the transaction (an error) is destroyed by
	// the pool on release rather than reused.
	defer conn.Release()
	fail := func(err error) (guard.Reservation, time.Duration, bool, error) {
		rollback(ctx, conn)
		return guard.Reservation{}, 0, false, p.err("limiter reserve", err)
	}
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(sqlLockBuckets, locks)
	batch.Queue(sqlReserve, sq.keys, sq.cutoffs, sq.offsets, sq.at, sq.expires)
	batch.Queue("COMMIT")
	br := conn.SendBatch(ctx, batch)
	var out slotResult
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&out.oldest, &out.ids, &out.counts, &out.firsts)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	use, wait, err := out.use(active, now)
	if err != nil {
		return guard.Reservation{}, 0, false, err
	}
	if wait > 0 {
		return guard.Reservation{Use: spread(buckets, use)}, wait, false, nil
	}
	return guard.Reservation{IDs: out.ids, Use: spread(buckets, guard.Reserved(active, use, now))}, 0, true, nil
}

// slotArgs are sqlReserve's arguments for the active buckets.
type slotArgs struct {
	keys             []string
	cutoffs, expires []int64
	offsets          []int32
	at               int64
}

func slotQuery(active []guard.Bucket, now time.Time) slotArgs {
	a := slotArgs{keys: make([]string, len(active)), cutoffs: make([]int64, len(active)), offsets: make([]int32, len(active)),
		expires: make([]int64, len(active)), at: now.UnixNano()}
	for i, b := range active {
		a.keys[i] = b.Key
		a.cutoffs[i] = a.at - b.Limit.Window.Nanoseconds()
		a.offsets[i] = int32(min(b.Limit.Requests-1, math.MaxInt32))
		a.expires[i] = a.at + b.Limit.Window.Nanoseconds()
	}
	return a
}

// slotResult is sqlReserve's answer.
type slotResult struct {
	oldest              []*int64
	ids, counts, firsts []int64
}

// use is each active bucket's use before the insert and the longest wait
// (0: the slots were inserted).
func (r slotResult) use(active []guard.Bucket, now time.Time) ([]guard.BucketUse, time.Duration, error) {
	if len(r.oldest) != len(active) || len(r.counts) != len(active) || len(r.firsts) != len(active) {
		return nil, 0, fmt.Errorf("limiter reserve: %d counts for %d buckets", len(r.oldest), len(active))
	}
	var wait time.Duration
	use := make([]guard.BucketUse, len(active))
	for i, b := range active {
		use[i] = guard.UseBefore(int(r.counts[i]), time.Unix(0, r.firsts[i]), b.Limit.Window, now)
		if r.oldest[i] != nil {
			use[i].Wait = waitFor(*r.oldest[i], b.Limit.Window, now)
			wait = max(wait, use[i].Wait)
		}
	}
	// Counts and insert agree while the statement is right.
	switch {
	case wait > 0 && len(r.ids) != 0, wait == 0 && len(r.ids) != len(active):
		return nil, 0, fmt.Errorf("limiter reserve: %d slots inserted for %d buckets with wait %v", len(r.ids), len(active), wait)
	}
	return use, wait, nil
}

// Peek reads each bucket's use, without locks (a read may miss a slot
// being reserved at that instant, which an answer about "now" may): one
// statement for every bucket's count and oldest slot, and one more per
// full bucket for its wait.
func (p *Postgres) Peek(ctx context.Context, now time.Time, buckets []guard.Bucket) ([]guard.BucketUse, error) {
	out := make([]guard.BucketUse, len(buckets))
	at := now.UnixNano()
	var keys []string
	var cutoffs []int64
	var index []int
	for i, b := range buckets {
		if b.Limit.Requests > 0 {
			keys, cutoffs, index = append(keys, b.Key), append(cutoffs, at-b.Limit.Window.Nanoseconds()), append(index, i)
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	var counts, oldest []int64
	if err := p.pool.QueryRow(ctx, sqlPeekPG, keys, cutoffs).Scan(&counts, &oldest); err != nil {
		return nil, p.err("limiter peek", err)
	}
	if len(counts) != len(keys) || len(oldest) != len(keys) {
		return nil, fmt.Errorf("limiter peek: %d counts for %d buckets", len(counts), len(keys))
	}
	for j, i := range index {
		b := buckets[i]
		out[i].Used = int(counts[j])
		if counts[j] > 0 {
			out[i].Reset = waitFor(oldest[j], b.Limit.Window, now)
		}
		if counts[j] >= int64(b.Limit.Requests) {
			var nth int64
			if err := p.pool.QueryRow(ctx, sqlNthNewest, b.Key, cutoffs[j], b.Limit.Requests-1).Scan(&nth); err != nil {
				return nil, p.err("limiter peek", err)
			}
			out[i].Wait = waitFor(nth, b.Limit.Window, now)
		}
	}
	return out, nil
}

// rollback ends conn's transaction, if any; a connection that cannot is
// closed, so the pool drops it.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	c := conn.Conn()
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Close(ctx)
	}
}

// Release deletes the reservation's slots; ids already gone are ignored.
// and gives its draw back.
func (p *Postgres) Release(ctx context.Context, r guard.Reservation) error {
	if len(r.IDs) > 0 {
		if _, err := p.pool.Exec(ctx, sqlReleasePG, r.IDs); err != nil {
			return p.err("limiter release", err)
		}
	}
	return p.undraw(ctx, r.Drawn)
}

// PruneSlots deletes slots whose window ended at or before now.
// Budget steps that have left their window go with them.
func (p *Postgres) PruneSlots(ctx context.Context, now time.Time) (int64, error) {
	return pruneSlots(ctx, now, p.pruneLoop)
}

// SpendChallenge marks a proof-of-work challenge id used until expires;
// fresh is false when it was already spent and has not expired by
// Options.Clock. One INSERT … ON CONFLICT: of replicas spending one id at
// once, exactly one sees it fresh.
func (p *Postgres) SpendChallenge(ctx context.Context, id string, expires time.Time) (bool, error) {
	args, err := spendArgs(id, expires, p.opts.Clock.Now())
	if err != nil {
		return false, err
	}
	tag, err := p.pool.Exec(ctx, sqlSpendChallenge, args...)
	if err != nil {
		return false, p.err("spend challenge", err)
	}
	return tag.RowsAffected() == 1, nil
}

// PruneChallenges deletes spent challenges whose expiry is at or before
// now.
func (p *Postgres) PruneChallenges(ctx context.Context, now time.Time) (int64, error) {
	return p.pruneLoop(ctx, "prune spent challenges", sqlPruneChallenges, now.UnixNano())
}

// Record appends a drip to the history.
func (p *Postgres) Record(ctx context.Context, d faucet.DripRecord) error {
	if _, err := p.pool.Exec(ctx, sqlRecord, recordArgs(d)...); err != nil {
		return p.err("history record", err)
	}
	return nil
}

// Prune deletes drips recorded before before and reports how many.
func (p *Postgres) Prune(ctx context.Context, before time.Time) (int64, error) {
	return p.pruneLoop(ctx, "prune history", sqlPruneDrips, nanos(before))
}

func (p *Postgres) pruneLoop(ctx context.Context, op, q string, arg int64) (int64, error) {
	var total int64
	for {
		tag, err := p.pool.Exec(ctx, q, arg)
		if err != nil {
			return total, p.err(op, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}

// DripByTxID returns the newest drip with that txid.
func (p *Postgres) DripByTxID(ctx context.Context, txid string) (faucet.DripRecord, bool, error) {
	return dripByTxID(txid, func(id string) rowScanner { return p.pool.QueryRow(ctx, sqlByTxID, id) }, p.err)
}

// RunPruner deletes old history, expired slots and expired spent
// challenges until ctx ends.
func (p *Postgres) RunPruner(ctx context.Context, retention, interval time.Duration) {
	runPruner(ctx, p.log, p, retention, interval, p.opts.Clock)
}

// pgErr wraps err with op, marking errors caused by the server being
// unreachable, shutting down or out of resources as
// faucet.ErrStoreUnavailable.
func pgErr(op string, err error) error {
	if pgUnavailable(err) {
		return unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func pgUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),       // insufficient resources (disk full, too many connections)
			strings.HasPrefix(pe.Code, "57P"),      // admin or crash shutdown, cannot connect now
			pe.Code == "58000", pe.Code == "58030", // system or I/O error
			pe.Code == "25006": // read-only transaction (a standby after failover)
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}
