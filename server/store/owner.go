package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
//   - membership: (nsMember, id) and (nsAge, id), where id comes from the
//     sequence faucet_member_ids, so that every replica can list the live
//     ones from pg_locks and tell which joined last;
//   - one (nsKey, hash of the address) lock per key it owns.
//
// Every round each replica ranks the live replicas, youngest first, and
// takes its exact quota — keys/replicas, plus one for the first
// keys%replicas ranks — so the quotas add up to the number of keys and
// replicas converge without talking to each other: above quota it
// releases keys, below it tries free ones. Youngest first, a surge or
// restarted pod gets its keys at once, whatever the number of keys, and
// the oldest replica is the one left without a key: it turns unready, the
// pod a ReplicaSet scales down first. A replica whose quota falls to no
// key first drains (Session.Drain: not ready, still paying) and only then
// gives its keys up; at SIGTERM (Session.Leave) a replica leaves the
// membership at once and keeps its keys until what is in flight is done.
// A round runs every OwnershipInterval and as soon as another replica
// says (NOTIFY on ownershipChannel) that it joined, left or released a
// key, so a key changes hands within a few round trips.
//
// Replicas of an older faucet took random ids and no nsAge lock, and rank
// by id ascending; while one is live, every replica ranks that way, so
// that all agree during the rollout that brings ages in (sequence ids are
// small: the new replicas rank first).
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
	nsAge    int32 = 0x46434147 // "FCAG": the member's id is its age
	nsKey    int32 = 0x46434b59 // "FCKY"
)

// ownershipChannel is where replicas tell each other that a round is due.
const ownershipChannel = "faucet_key_ownership"

// releaseGrace bounds how long a payer may take to finish with a key when
// Run ends (by then the HTTP server has answered every drip).
const releaseGrace = 2 * time.Second

const (
	sqlTryLock = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
	sqlUnlock  = `SELECT pg_advisory_unlock($1::int4, $2::int4)`
	// The sequence is created here rather than by a migration, so that a
	// rollback to a faucet without it still opens the schema.
	sqlCreateSeq = `CREATE SEQUENCE IF NOT EXISTS faucet_member_ids AS integer CYCLE`
	sqlNextID    = `SELECT nextval('faucet_member_ids')::int4`
	sqlListen    = `LISTEN ` + ownershipChannel
	sqlUnlisten  = `UNLISTEN ` + ownershipChannel
	sqlNotify    = `SELECT pg_notify('` + ownershipChannel + `', $1)`
	// The notice goes out at commit, after the unlock.
	sqlUnlockNotify = `SELECT pg_advisory_unlock($1::int4, $2::int4), pg_notify('` + ownershipChannel + `', 'release')`
	sqlLeave        = `SELECT pg_advisory_unlock($1::int4, $3::int4), pg_advisory_unlock($2::int4, $3::int4),
  pg_notify('` + ownershipChannel + `', 'leave')`
	sqlReleaseAll = `SELECT pg_advisory_unlock_all(), pg_notify('` + ownershipChannel + `', 'release')`
	// One row per member (its nsMember lock), saying whether it holds its
	// nsAge lock too (one pg_locks read: both come from the same backend).
	sqlLiveNodes = `SELECT objid, bool_or(classid = $2::int4::oid) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid IN ($1::int4::oid, $2::int4::oid)
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY pid, objid HAVING bool_or(classid = $1::int4::oid)`
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
// connection fails, telling h about every change, by s's rules. Only one
// Run may be under way per store. When it returns, this replica owns no
// key (h was told Releasing, when ctx ended, or Lost) and ledger writes
// stay fenced: they fail with journal.ErrNotOwner until a new Run acquires
// the key again. It returns nil when ctx ends or the store is closed, and
// otherwise an error (wrapping faucet.ErrStoreUnavailable when the
// database is unreachable); the caller calls Run again after a pause —
// Run does not reconnect.
func (p *Postgres) Run(ctx context.Context, keys []string, h journal.Handler, s journal.Session) error {
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

	r, err := newOwnerRun(p, keys, h, s)
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
	s       journal.Session
	keys    []ownedKey // sorted by address
	held    map[string]bool
	replica int32
	name    string
	conn    *pgx.Conn
	// drainUntil is when a replica handing its last keys over gives them
	// up (zero: not handing over); drained wakes the loop then.
	drainUntil time.Time
	drained    clock.Timer
}

type ownedKey struct {
	name  string
	lock  int32
	group int // index in Session.Groups (0 when there are none)
}

func newOwnerRun(p *Postgres, keys []string, h journal.Handler, s journal.Session) (*ownerRun, error) {
	r := &ownerRun{p: p, h: h, s: s, held: map[string]bool{}}
	groupOf := map[string]int{}
	for g, ks := range s.Groups {
		for _, k := range ks {
			if _, seen := groupOf[k]; !seen {
				groupOf[k] = g
			}
		}
	}
	byLock := map[int32]string{}
	for _, a := range keys {
		k := ownedKey{name: a, group: groupOf[a], lock: keyLock(a)}
		if slices.ContainsFunc(r.keys, func(o ownedKey) bool { return o.name == k.name }) {
			continue
		}
		if other, dup := byLock[k.lock]; dup {
			return nil, fmt.Errorf("key ownership: keys %s and %s hash to the same lock id", other, k.name)
		}
		byLock[k.lock] = k.name
		r.keys = append(r.keys, k)
	}
	slices.SortFunc(r.keys, func(a, b ownedKey) int { return strings.Compare(a.name, b.name) })
	r.name = p.opts.ReplicaName
	return r, nil
}

// queryTimeout bounds each statement on the lock connection, so a silent
// network failure is noticed.
func (r *ownerRun) queryTimeout() time.Duration {
	return max(5*time.Second, 3*r.p.opts.OwnershipInterval)
}

// stmtCtx bounds a statement by queryTimeout alone: the end of Run's
// context does not cut one short, for that closes the lock connection,
// and with it the notice that tells the others the keys are free.
func (r *ownerRun) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.queryTimeout())
}

// left reports whether the replica was told to leave.
func (r *ownerRun) left() bool {
	select {
	case <-r.s.Leave:
		return true
	default:
		return false
	}
}

func (r *ownerRun) run(ctx context.Context) (err error) {
	log := r.p.log
	defer func() {
		// Whatever ended the session, nothing is owned any more.
		r.loseAll()
		r.endDrain()
		if r.conn != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = r.conn.Close(cctx)
			cancel()
		}
	}()
	if r.left() {
		// Left before it joined: nothing to take part in.
		<-ctx.Done()
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.p.opts.ConnectTimeout)
	r.conn, err = pgx.ConnectConfig(cctx, r.p.lockCfg)
	cancel()
	if err != nil {
		return r.p.err("key ownership: connect", err)
	}
	r.p.own.mu.Lock()
	r.p.own.conn = r.conn
	r.p.own.mu.Unlock()
	if err := r.join(ctx); err != nil {
		return err
	}
	log.Info("key ownership started", "replica", r.name, "member", r.replica, "keys", len(r.keys))

	t := r.p.opts.Clock.NewTicker(r.p.opts.OwnershipInterval)
	defer t.Stop()
	for !r.left() {
		if err := r.balance(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("key ownership session failed; every key is given up", "replica", r.name, "err", err)
			return err
		}
		if err := r.wait(ctx, t.C()); err != nil {
			return r.p.err("key ownership: wait for a round", err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil {
		if err := r.leave(ctx); err != nil {
			return err
		}
		<-ctx.Done()
	}
	r.releaseAll(ctx)
	return nil
}

// boolQuery runs a one-boolean statement on the lock connection.
func (r *ownerRun) boolQuery(ctx context.Context, q string, args ...any) (bool, error) {
	ctx, cancel := r.stmtCtx(ctx)
	defer cancel()
	var ok bool
	err := r.conn.QueryRow(ctx, q, args...).Scan(&ok)
	return ok, err
}

// balance moves this replica towards its quota by at most what is free.
func (r *ownerRun) balance(ctx context.Context) error {
	members, err := r.liveReplicas(ctx)
	if err != nil {
		return r.p.err("key ownership: list replicas", err)
	}
	live := rankMembers(members)
	rank := slices.Index(live, uint32(r.replica))
	if rank < 0 {
		return errors.New("key ownership: this replica's membership lock is gone")
	}
	quotas := r.quotas(rank, len(live))
	quota := 0
	for _, q := range quotas {
		quota += q
	}
	if quota == 0 && len(r.held) > 0 && r.s.Drain > 0 && r.draining(len(live)) {
		return nil
	}
	// Over a group's quota: give up its last keys (in address order) first.
	heldIn := r.heldByGroup()
	for i := len(r.keys) - 1; i >= 0; i-- {
		if k := r.keys[i]; r.held[k.name] && heldIn[k.group] > quotas[k.group] {
			if err := r.release(ctx, k); err != nil {
				return err
			}
			heldIn[k.group]--
			r.p.log.Info("key released to another replica", "key", k.name, "replica", r.name, "quota", quotas[k.group], "replicas", len(live))
		}
	}
	if quota > 0 || len(r.held) == 0 {
		r.endDrain()
	}
	// Under a group's quota: try its free keys, starting at a
	// rank-dependent offset so that replicas starting together mostly try
	// different keys.
	for g, q := range quotas {
		group := r.group(g)
		for j := 0; j < len(group) && heldIn[g] < q; j++ {
			k := group[(j+rank*max(q, 1))%len(group)]
			if r.held[k.name] {
				continue
			}
			if err := r.acquire(ctx, k, q, len(live)); err != nil || ctx.Err() != nil {
				return cmp.Or(err, ctx.Err())
			}
			if r.held[k.name] {
				heldIn[g]++
			}
		}
	}
	return nil
}

// quotas is this replica's share of each group of keys at rank among
// replicas: the group's keys divided evenly, and the keys left over dealt
// one a rank in turn, carrying on from group to group (so that single
// keys, a treasury and a Bitcoin key, go to different replicas). Each
// group is shared on its own, so that a replica holds sending keys of its
// own, not only the treasury or the Bitcoin key, whenever there are as
// many sending keys as replicas.
func (r *ownerRun) quotas(rank, replicas int) []int {
	out := make([]int, max(len(r.s.Groups), 1))
	dealt := 0 // keys left over so far, dealt from rank 0 on
	for g := range out {
		n := len(r.group(g))
		out[g] = n / replicas
		extra := n % replicas
		// This rank's place in the deal of this group's extra keys.
		if (rank-dealt%replicas+replicas)%replicas < extra {
			out[g]++
		}
		dealt += extra
	}
	return out
}

// group lists group g's keys, in address order.
func (r *ownerRun) group(g int) []ownedKey {
	var out []ownedKey
	for _, k := range r.keys {
		if k.group == g {
			out = append(out, k)
		}
	}
	return out
}

// heldByGroup counts the keys held in each group.
func (r *ownerRun) heldByGroup() map[int]int {
	out := map[int]int{}
	for _, k := range r.keys {
		if r.held[k.name] {
			out[k.group]++
		}
	}
	return out
}

// draining starts or continues handing the last keys over and reports
// whether they are still to be kept: the handlers stop looking ready
// while still paying, so that traffic moves to the others before the keys
// go.
func (r *ownerRun) draining(replicas int) bool {
	clk := r.p.opts.Clock
	if r.drainUntil.IsZero() {
		r.drainUntil = clk.Now().Add(r.s.Drain)
		r.drained = clk.NewTimer(r.s.Drain)
		r.p.log.Info("handing the keys over: this replica's share fell to none; it keeps paying, not ready, for the drain",
			"replica", r.name, "keys", len(r.held), "drain", r.s.Drain.String(), "replicas", replicas)
		if d, ok := r.h.(journal.Handover); ok {
			d.HandingOver(true)
		}
		return true
	}
	return clk.Now().Before(r.drainUntil)
}

// endDrain ends handing over, if under way: the keys are gone, or the
// share came back.
func (r *ownerRun) endDrain() {
	if r.drainUntil.IsZero() {
		return
	}
	r.drained.Stop()
	r.drainUntil, r.drained = time.Time{}, nil
	if d, ok := r.h.(journal.Handover); ok {
		d.HandingOver(false)
	}
}

// release gives k up once its payer has finished with it, and tells the
// others at once.
func (r *ownerRun) release(ctx context.Context, k ownedKey) error {
	r.h.Releasing(ctx, k.name)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.p.own.forget(k.name)
	delete(r.held, k.name)
	qctx, cancel := r.stmtCtx(ctx)
	defer cancel()
	if _, err := r.conn.Exec(qctx, sqlUnlockNotify, nsKey, k.lock); err != nil {
		return r.p.err("key ownership: unlock "+k.name, err)
	}
	return nil
}

// acquire takes k if it is free.
func (r *ownerRun) acquire(ctx context.Context, k ownedKey, quota, replicas int) error {
	ok, err := r.boolQuery(ctx, sqlTryLock, nsKey, k.lock)
	if err != nil {
		return r.p.err("key ownership: lock "+k.name, err)
	}
	if !ok {
		return nil
	}
	epoch, err := r.bumpEpoch(ctx, k.name)
	if err != nil {
		// The pool failed where the lock connection did not: give the
		// key back and try again at the next round.
		r.p.log.Warn("key ownership: recording the new owner failed", "key", k.name, "err", err)
		if _, uerr := r.boolQuery(ctx, sqlUnlock, nsKey, k.lock); uerr != nil {
			return r.p.err("key ownership: unlock "+k.name, uerr)
		}
		return nil
	}
	r.p.own.set(k.name, epoch)
	r.held[k.name] = true
	r.p.log.Info("key acquired", "key", k.name, "replica", r.name, "epoch", epoch, "quota", quota, "replicas", replicas)
	r.h.Acquired(ctx, k.name)
	return nil
}

// releaseAll gives every key held up as Run ends: each payer finishes
// with it (what is in flight answered by now), then one statement drops
// every lock and tells the others, who take the keys within a round trip
// rather than once they notice the connection gone.
func (r *ownerRun) releaseAll(ctx context.Context) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
	defer cancel()
	var names []string
	for _, k := range r.keys {
		if r.held[k.name] {
			r.h.Releasing(bctx, k.name)
			r.p.own.forget(k.name)
			delete(r.held, k.name)
			names = append(names, k.name)
		}
	}
	qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer qcancel()
	if _, err := r.conn.Exec(qctx, sqlReleaseAll); err != nil {
		// Closing the connection releases them all the same.
		r.p.log.Warn("key ownership: releasing the keys at exit failed", "replica", r.name, "err", r.p.err("release", err))
		return
	}
	if len(names) > 0 {
		r.p.log.Info("keys released at exit", "replica", r.name, "keys", names)
	}
}

// bumpEpoch makes this replica the key's owner of record with a new epoch.
func (r *ownerRun) bumpEpoch(ctx context.Context, key string) (int64, error) {
	ctx, cancel := r.stmtCtx(ctx)
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
