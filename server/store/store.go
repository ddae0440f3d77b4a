// Package store keeps the faucet's durable state — the journal of in-flight
// transactions of every chain, the rate-limit slots and the drip history —
// in SQLite (one process) or Postgres (one or several replicas), and, on
// Postgres, spreads the faucet keys over the replicas (journal.Owner).
//
// Both drivers share one schema and one set of versioned migrations
// (migrations/*.sql), applied by Open.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Store is the faucet's state in a database. Open returns a *SQLite or a
// *Postgres; only *Postgres also implements journal.Owner.
type Store interface {
	journal.Store
	guard.Limiter
	faucet.History
	// DripByTxID returns the newest drip record with that txid (with or
	// without 0x); ok is false when there is none.
	DripByTxID(ctx context.Context, txid string) (d faucet.DripRecord, ok bool, err error)
	// RunPruner deletes history older than retention, expired limit slots
	// and expired spent challenges every interval (and once at start), by
	// Options.Clock, until ctx ends. Failures are logged and retried at the
	// next interval.
	RunPruner(ctx context.Context, retention, interval time.Duration)
	// PruneSlots deletes limit slots whose window ended at or before now.
	PruneSlots(ctx context.Context, now time.Time) (int64, error)
	// SpendChallenge marks a proof-of-work challenge id used until expires;
	// fresh is false when it was already spent (and not yet pruned).
	// Atomic across processes sharing the store. A spent id whose expiry is
	// at or before Options.Clock's now is treated as pruned: spending it
	// again is fresh and sets the new expiry. id must not be empty nor
	// expires zero.
	SpendChallenge(ctx context.Context, id string, expires time.Time) (fresh bool, err error)
	// PruneChallenges deletes spent challenges whose expiry is at or before
	// now.
	PruneChallenges(ctx context.Context, now time.Time) (int64, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Kind is "sqlite" or "postgres".
	Kind() string
	Close() error
}

// Kinds Store.Kind reports.
const (
	KindSQLite   = "sqlite"
	KindPostgres = "postgres"
)

// Options tune a Store; the zero value is ready to use.
type Options struct {
	// Logger receives the store's own messages (pruning, key ownership);
	// nil discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds Open's first connection (default 10 s).
	ConnectTimeout time.Duration
	// BusyTimeout is how long an SQLite write waits for another process's
	// lock before failing with ErrStoreUnavailable (default 5 s).
	BusyTimeout time.Duration
	// LockTimeout is how long OpenSQLite waits for another process to
	// release the file (default 60 s): a pod replacing a deleted one starts
	// while the old one still drains its drips, up to 28 s.
	LockTimeout time.Duration
	// MaxConns caps the Postgres pool (default 32, or pool_max_conns in
	// the URI).
	MaxConns int32
	// OwnershipInterval is how often a Postgres replica rebalances the keys
	// (default 1 s).
	OwnershipInterval time.Duration
	// ReplicaName names this process in key_owners.owner and
	// replica_peers (default: host name and a random number).
	ReplicaName string
	// Clock is the clock SpendChallenge judges a stored challenge's expiry
	// by, the pruner's and key ownership's pace and the time a migration
	// is recorded at (nil: the real clock). Give it the clock that checks
	// the challenges themselves, so that a challenge still valid by that
	// clock is never re-spendable.
	Clock clock.WithTicker
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Minute
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 32
	}
	if o.OwnershipInterval <= 0 {
		o.OwnershipInterval = time.Second
	}
	if o.ReplicaName == "" {
		// Known before ownership starts, so that the replica can advertise
		// where the others reach it under the name it owns keys by.
		host, _ := os.Hostname()
		o.ReplicaName = host + "/" + strconv.FormatUint(rand.Uint64()&0xffffffff, 16)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// IsPostgres reports whether dsn names a Postgres database (a postgres://
// or postgresql:// URI) rather than an SQLite file.
func IsPostgres(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Open opens (creating and migrating if needed) the store dsn names: a
// postgres:// or postgresql:// URI, or else an SQLite file path. It fails
// when the database cannot be reached or written, or when its schema is
// newer than this binary knows; an unreachable database's error wraps
// faucet.ErrStoreUnavailable. Errors never contain a password.
func Open(ctx context.Context, dsn string, opts Options) (Store, error) {
	if IsPostgres(dsn) {
		return OpenPostgres(ctx, dsn, opts)
	}
	return OpenSQLite(ctx, dsn, opts)
}

var (
	// kvPassword matches password=… in a key/value connection string or a
	// URI query, quoted or not.
	kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)
	// uriUserinfo matches the user:password@ of a URI that url.Parse
	// rejects.
	uriUserinfo = regexp.MustCompile(`(://[^:/@]*:)[^@]*@`)
)

// redacted replaces a password wherever Redact finds one.
const redacted = "xxxxx"

// Redact returns dsn with any password replaced by "xxxxx", for errors and
// logs. An SQLite path comes back unchanged.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return kvPassword.ReplaceAllString(dsn, "${1}"+redacted)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		s := uriUserinfo.ReplaceAllString(dsn, "${1}"+redacted+"@")
		return kvPassword.ReplaceAllString(s, "${1}"+redacted)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", redacted)
		u.RawQuery = q.Encode()
	}
	// String escapes the placeholder's nothing; keep the rest as given.
	return u.String()
}

// passwordOf returns the forms a DSN's password may take in an error text
// (as written, and decoded), so scrub can blank them.
func passwordOf(dsn string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != redacted {
			out = append(out, s)
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(url.PathEscape(p))
			add(url.QueryEscape(p))
		}
		add(u.Query().Get("password"))
	}
	if m := uriUserinfo.FindStringSubmatch(dsn); m != nil {
		// The raw text between "user:" and "@".
		i := strings.Index(dsn, m[0])
		add(strings.TrimSuffix(dsn[i+len(m[1]):i+len(m[0])], "@"))
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		add(strings.Trim(m[2], "'"))
	}
	return out
}

// scrubbed is an error whose text has a password blanked; the chain below
// stays reachable for errors.Is.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub returns err with every secret removed from its text.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	dirty := false
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			msg, dirty = strings.ReplaceAll(msg, s, redacted), true
		}
	}
	if !dirty {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

// unavailable wraps err as a store outage, keeping err in the chain.
func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, faucet.ErrStoreUnavailable, err)
}

// Conversions shared by both drivers: the schema keeps uint64 values as the
// same 64 bits in a signed integer (exact for all of them; values ≥ 2^63
// read as negative in SQL) and times as Unix nanoseconds, 0 for the zero
// time (so the Unix epoch itself reads back as the zero time).

func u64(v int64) uint64 { return uint64(v) }
func i64(v uint64) int64 { return int64(v) }

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// normTxID is the form drips.txid holds: lower-case hex without 0x.
func normTxID(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s = s[2:]
	}
	return strings.ToLower(s)
}

// sqlSpendChallenge inserts a spent challenge, or takes over the row of an
// expired one ($3 = now): one row affected means fresh. One statement, so
// atomic on both drivers: on Postgres concurrent spends of one id wait for
// the first and then see its row; on SQLite writes are serialised anyway.
const sqlSpendChallenge = `INSERT INTO spent_challenges (id, expires_at) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE spent_challenges.expires_at <= $3`

// spendArgs checks SpendChallenge's arguments and returns the statement's.
func spendArgs(id string, expires, now time.Time) ([]any, error) {
	switch {
	case id == "":
		return nil, errors.New("spend challenge: empty id")
	case expires.IsZero():
		// Stored as 0, it would be expired at once: no replay protection.
		return nil, fmt.Errorf("spend challenge %s: zero expiry", id)
	}
	return []any{id, expires.UnixNano(), now.UnixNano()}, nil
}

// pruneBatch bounds one DELETE of the pruner so that a large backlog does
// not hold the write lock (SQLite) or a long transaction (Postgres).
const pruneBatch = 5000

// pruneSlots is PruneSlots for both drivers, loop being the driver's
// pruneLoop: the budget steps go with the slots.
func pruneSlots(ctx context.Context, now time.Time, loop func(ctx context.Context, op, q string, arg int64) (int64, error)) (int64, error) {
	n, err := loop(ctx, "prune limit slots", sqlPruneSlots, now.UnixNano())
	if err != nil {
		return n, err
	}
	m, err := loop(ctx, "prune budget steps", sqlPruneBudget, now.UnixNano())
	return n + m, err
}

// runPruner is RunPruner for both drivers.
func runPruner(ctx context.Context, log *slog.Logger, s Store, retention, interval time.Duration, clk clock.WithTicker) {
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		at := clk.Now()
		if retention > 0 {
			n, err := s.Prune(ctx, at.Add(-retention))
			if !logPrune(ctx, log, "drip history", slog.LevelInfo, n, err, "older_than", retention) {
				return
			}
		}
		n, err := s.PruneSlots(ctx, at)
		if !logPrune(ctx, log, "expired limit slots", slog.LevelDebug, n, err) {
			return
		}
		n, err = s.PruneChallenges(ctx, at)
		if !logPrune(ctx, log, "expired proof-of-work challenges", slog.LevelDebug, n, err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// logPrune logs how one of the pruner's deletes went: n rows of what
// deleted at level (with attrs), or its error. It reports false when the
// delete failed because ctx ended: the pruner stops.
func logPrune(ctx context.Context, log *slog.Logger, what string, level slog.Level, n int64, err error, attrs ...any) bool {
	switch {
	case err != nil && ctx.Err() != nil:
		return false
	case err != nil:
		log.Warn("pruning "+what+" failed; will retry", "err", err)
	case n > 0:
		log.Log(ctx, level, "pruned "+what, append([]any{"deleted", n}, attrs...)...)
	}
	return true
}

// activeBuckets returns the buckets that limit anything.
func activeBuckets(buckets []guard.Bucket) []guard.Bucket {
	out := make([]guard.Bucket, 0, len(buckets))
	for _, b := range buckets {
		if b.Limit.Requests > 0 {
			out = append(out, b)
		}
	}
	return out
}

// sqlBucketUse counts a bucket's live slots and finds the oldest.
const sqlBucketUse = `SELECT count(*), COALESCE(min(at), 0) FROM limit_slots WHERE bucket = $1 AND at > $2`

// spread places the use of the active buckets (activeBuckets order) at
// their places among all buckets, the inactive ones zero.
func spread(buckets []guard.Bucket, active []guard.BucketUse) []guard.BucketUse {
	out := make([]guard.BucketUse, len(buckets))
	j := 0
	for i, b := range buckets {
		if b.Limit.Requests > 0 && j < len(active) {
			out[i] = active[j]
			j++
		}
	}
	return out
}

// waitFor is how long until a full bucket frees a slot, given the at of the
// oldest of its last Requests live slots (the same as faucet.MemoryLimiter).
func waitFor(nthNewestAt int64, window time.Duration, now time.Time) time.Duration {
	return max(time.Duration(nthNewestAt+window.Nanoseconds()-now.UnixNano()), time.Nanosecond)
}
