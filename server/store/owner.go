package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Key ownership on Postgres (journal.Owner): the Stacks keys, the treasury
// and the Bitcoin key alike.
//
// Each replica running Run holds one connection of its own (not from the
// pool) with session advisory locks, which Postgres drops when the
// connection or the pod dies:
//   - membership: (nsMember, random replica id), so that every replica can
//     list the live ones from pg_locks;
//   - one (nsKey, hash of the address) lock per key it owns.
//
// Every interval each replica ranks the live replicas by id and takes its
// exact quota — keys/replicas, plus one for the first keys%replicas ranks —
// so the quotas add up to the number of keys and replicas converge without
// talking to each other: above quota it releases keys, below it tries free
// ones.
//
// Fencing: acquiring a key bumps key_owners.epoch; while Run is under way,
// ledger writes check the epoch in the same statement (holding the row FOR
// SHARE, so a takeover waits for a write in flight or the write sees the
// new epoch) and fail with journal.ErrNotOwner once another replica took
// the key.

// Advisory lock namespaces (the first int4 of the two-key form); the
// limiter and the migration use the one-bigint form, which pg_locks tells
// apart by objsubid.
const (
	nsMember int32 = 0x46434d42 // "FCMB"
	nsKey    int32 = 0x46434b59 // "FCKY"
)

const (
	sqlTryLock   = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
	sqlUnlock    = `SELECT pg_advisory_unlock($1::int4, $2::int4)`
	sqlLiveNodes = `SELECT objid FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::int4::oid
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY objid`
	sqlBumpEpoch = `INSERT INTO key_owners (key, epoch, owner) VALUES ($1, 1, $2)
ON CONFLICT (key) DO UPDATE SET epoch = key_owners.epoch + 1, owner = excluded.owner
RETURNING epoch`
)

// ownership is a Postgres store's side of Run that ledger writes consult.
type ownership struct {
	mu      sync.Mutex
	fenced  bool             // Run started: writes need an epoch
	epochs  map[string]int64 // keys owned now → their epoch
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
	conn    *pgx.Conn // the lock connection, for stop's last resort
	closed  bool
}

// epochOf reports whether writes are fenced and, if so, this replica's
// epoch for key and whether it owns it.
func (o *ownership) epochOf(key string) (epoch int64, fenced, owned bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	epoch, owned = o.epochs[key]
	return epoch, o.fenced, owned
}

func (o *ownership) set(key string, epoch int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.epochs[key] = epoch
}

func (o *ownership) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.epochs, key)
}

// stop ends Run, if under way, and waits for it: its connection closes, so
// Postgres releases its locks at once. Run is given a few seconds to
// return from the handler (by clk); then its socket is closed under it.
func (o *ownership) stop(clk clock.Clock) {
	o.mu.Lock()
	o.closed = true
	cancel, done := o.cancel, o.done
	o.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
		return
	case <-clk.After(5 * time.Second):
	}
	o.mu.Lock()
	if o.conn != nil {
		_ = o.conn.PgConn().Conn().Close()
	}
	o.mu.Unlock()
	<-done
}

// Run keeps this replica's share of keys until ctx ends or its lock
// connection fails, telling h about every change. Only one Run may be
// under way per store. When it returns, this replica owns no key (h.Lost
// was called for each it held) and ledger writes stay fenced: they fail
// with journal.ErrNotOwner until a new Run acquires the key again. It
// returns nil when ctx ends or the store is closed, and otherwise an error
// (wrapping faucet.ErrStoreUnavailable when the database is unreachable);
// the caller calls Run again after a pause — Run does not reconnect.
func (p *Postgres) Run(ctx context.Context, keys []string, h journal.Handler) error {
	o := &p.own
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return errors.New("key ownership: store is closed")
	}
	if o.running {
		o.mu.Unlock()
		return errors.New("key ownership: Run is already under way on this store")
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	o.running, o.cancel, o.done, o.fenced, o.epochs = true, cancel, done, true, map[string]int64{}
	o.mu.Unlock()
	defer func() {
		cancel()
		o.mu.Lock()
		o.running, o.cancel, o.done, o.conn, o.epochs = false, nil, nil, nil, map[string]int64{}
		o.mu.Unlock()
		close(done)
	}()

	r, err := newOwnerRun(p, keys, h)
	if err != nil {
		return err
	}
	err = r.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ownerRun is one session of Run.
type ownerRun struct {
	p       *Postgres
	h       journal.Handler
	keys    []ownedKey // sorted by address
	held    map[string]bool
	replica int32
	name    string
	conn    *pgx.Conn
}

type ownedKey struct {
	name string
	lock int32
}

func newOwnerRun(p *Postgres, keys []string, h journal.Handler) (*ownerRun, error) {
	r := &ownerRun{p: p, h: h, held: map[string]bool{}}
	byLock := map[int32]string{}
	for _, a := range keys {
		k := ownedKey{name: a}
		if slices.ContainsFunc(r.keys, func(o ownedKey) bool { return o.name == k.name }) {
			continue
		}
		f := fnv.New32a()
		f.Write([]byte(k.name))
		k.lock = int32(f.Sum32())
		if other, dup := byLock[k.lock]; dup {
			return nil, fmt.Errorf("key ownership: keys %s and %s hash to the same lock id", other, k.name)
		}
		byLock[k.lock] = k.name
		r.keys = append(r.keys, k)
	}
	slices.SortFunc(r.keys, func(a, b ownedKey) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	r.name = p.opts.ReplicaName
	return r, nil
}

// queryTimeout bounds each statement on the lock connection, so a silent
// network failure is noticed.
func (r *ownerRun) queryTimeout() time.Duration {
	return max(5*time.Second, 3*r.p.opts.OwnershipInterval)
}

func (r *ownerRun) run(ctx context.Context) (err error) {
	log := r.p.log
	defer func() {
		// Whatever ended the session, nothing is owned any more.
		r.loseAll()
		if r.conn != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = r.conn.Close(cctx)
			cancel()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, r.p.opts.ConnectTimeout)
	r.conn, err = pgx.ConnectConfig(cctx, r.p.lockCfg)
	cancel()
	if err != nil {
		return r.p.err("key ownership: connect", err)
	}
	r.p.own.mu.Lock()
	r.p.own.conn = r.conn
	r.p.own.mu.Unlock()

	// Membership: a random id not taken by another live replica.
	for tries := 0; ; tries++ {
		r.replica = rand.Int32()
		ok, err := r.boolQuery(ctx, sqlTryLock, nsMember, r.replica)
		if err != nil {
			return r.p.err("key ownership: join", err)
		}
		if ok {
			break
		}
		if tries > 10 {
			return errors.New("key ownership: no free replica id")
		}
	}
	if r.name == "" {
		host, _ := os.Hostname()
		r.name = host + "/" + strconv.FormatUint(uint64(uint32(r.replica)), 10)
	}
	log.Info("key ownership started", "replica", r.name, "keys", len(r.keys))

	t := r.p.opts.Clock.NewTicker(r.p.opts.OwnershipInterval)
	defer t.Stop()
	for {
		if err := r.balance(ctx); err != nil {
			if ctx.Err() == nil {
				log.Warn("key ownership session failed; every key is given up", "replica", r.name, "err", err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// boolQuery runs a one-boolean statement on the lock connection.
func (r *ownerRun) boolQuery(ctx context.Context, q string, args ...any) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	var ok bool
	err := r.conn.QueryRow(ctx, q, args...).Scan(&ok)
	return ok, err
}

// balance moves this replica towards its quota by at most what is free.
func (r *ownerRun) balance(ctx context.Context) error {
	live, err := r.liveReplicas(ctx)
	if err != nil {
		return r.p.err("key ownership: list replicas", err)
	}
	rank := slices.Index(live, uint32(r.replica))
	if rank < 0 {
		return errors.New("key ownership: this replica's membership lock is gone")
	}
	n := len(r.keys)
	quota := n / len(live)
	if rank < n%len(live) {
		quota++
	}
	// Over quota: give up the last keys (in address order) first.
	for i := len(r.keys) - 1; i >= 0 && len(r.held) > quota; i-- {
		k := r.keys[i]
		if !r.held[k.name] {
			continue
		}
		r.h.Releasing(ctx, k.name)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.p.own.forget(k.name)
		delete(r.held, k.name)
		if _, err := r.boolQuery(ctx, sqlUnlock, nsKey, k.lock); err != nil {
			return r.p.err("key ownership: unlock "+k.name, err)
		}
		r.p.log.Info("key released to another replica", "key", k.name, "replica", r.name, "quota", quota, "replicas", len(live))
	}
	// Under quota: try free keys, starting at a rank-dependent offset so
	// that replicas starting together mostly try different keys.
	for j := 0; j < n && len(r.held) < quota; j++ {
		k := r.keys[(j+rank*max(quota, 1))%n]
		if r.held[k.name] {
			continue
		}
		ok, err := r.boolQuery(ctx, sqlTryLock, nsKey, k.lock)
		if err != nil {
			return r.p.err("key ownership: lock "+k.name, err)
		}
		if !ok {
			continue
		}
		epoch, err := r.bumpEpoch(ctx, k.name)
		if err != nil {
			// The pool failed where the lock connection did not: give
			// the key back and try again at the next round.
			r.p.log.Warn("key ownership: recording the new owner failed", "key", k.name, "err", err)
			if _, uerr := r.boolQuery(ctx, sqlUnlock, nsKey, k.lock); uerr != nil {
				return r.p.err("key ownership: unlock "+k.name, uerr)
			}
			return nil
		}
		r.p.own.set(k.name, epoch)
		r.held[k.name] = true
		r.p.log.Info("key acquired", "key", k.name, "replica", r.name, "epoch", epoch, "quota", quota, "replicas", len(live))
		r.h.Acquired(ctx, k.name)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// liveReplicas lists the membership ids of live replicas, ascending.
func (r *ownerRun) liveReplicas(ctx context.Context) ([]uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	rows, err := r.conn.Query(ctx, sqlLiveNodes, nsMember)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uint32])
}

// bumpEpoch makes this replica the key's owner of record with a new epoch.
func (r *ownerRun) bumpEpoch(ctx context.Context, key string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	var epoch int64
	if err := r.p.pool.QueryRow(ctx, sqlBumpEpoch, key, r.name).Scan(&epoch); err != nil {
		return 0, r.p.err("key ownership: bump epoch of "+key, err)
	}
	return epoch, nil
}

// loseAll forgets every held key, then tells the handler.
func (r *ownerRun) loseAll() {
	var lost []string
	for _, k := range r.keys {
		if r.held[k.name] {
			r.p.own.forget(k.name)
			lost = append(lost, k.name)
		}
	}
	clear(r.held)
	for _, a := range lost {
		r.h.Lost(a)
	}
}
