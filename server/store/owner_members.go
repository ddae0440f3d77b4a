package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Key ownership's membership (see owner.go): who takes part, in which
// order, and when a round is due.

// join takes a fresh id, the youngest, and the membership locks, listens
// for the others' notices and tells them to rebalance.
func (r *ownerRun) join(ctx context.Context) error {
	qctx, cancel := r.stmtCtx(ctx)
	defer cancel()
	if _, err := r.conn.Exec(qctx, sqlCreateSeq); err != nil && !alreadyExists(err) {
		return r.p.err("key ownership: create the member id sequence", err)
	}
	if _, err := r.conn.Exec(qctx, sqlListen); err != nil {
		return r.p.err("key ownership: listen", err)
	}
	// The age lock first: a member never shows without it, or for a
	// moment the others would rank as if an older faucet were live.
	for tries := 0; ; tries++ {
		if tries > 10 {
			return errors.New("key ownership: no free member id")
		}
		if err := r.conn.QueryRow(qctx, sqlNextID).Scan(&r.replica); err != nil {
			return r.p.err("key ownership: draw a member id", err)
		}
		ok, err := r.boolQuery(ctx, sqlTryLock, nsAge, r.replica)
		if err != nil {
			return r.p.err("key ownership: join", err)
		}
		if !ok {
			continue
		}
		// An older faucet's random id may hold the membership lock.
		if ok, err = r.boolQuery(ctx, sqlTryLock, nsMember, r.replica); err != nil {
			return r.p.err("key ownership: join", err)
		}
		if ok {
			break
		}
		if _, err := r.boolQuery(ctx, sqlUnlock, nsAge, r.replica); err != nil {
			return r.p.err("key ownership: join", err)
		}
	}
	if _, err := r.conn.Exec(qctx, sqlNotify, "join"); err != nil {
		return r.p.err("key ownership: join", err)
	}
	return nil
}

// alreadyExists reports a concurrent CREATE ... IF NOT EXISTS that lost
// the race: the object is there.
func alreadyExists(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07")
}

// leave withdraws this replica from the share, so that the others count
// their quotas without it and take its keys as soon as it lets them go.
// The keys stay held; the others' notices are no longer read, so no longer
// listened to.
func (r *ownerRun) leave(ctx context.Context) error {
	qctx, cancel := r.stmtCtx(ctx)
	defer cancel()
	_, err := r.conn.Exec(qctx, sqlLeave, nsMember, nsAge, r.replica)
	if err == nil {
		_, err = r.conn.Exec(qctx, sqlUnlisten)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return r.p.err("key ownership: leave", err)
	}
	r.p.log.Info("left key ownership; keeping the keys held until what is in flight is done", "replica", r.name, "keys", len(r.held))
	return nil
}

// wait blocks until a round is due: another replica's notice (it joined,
// left or released a key), the ticker (a replica that died says
// nothing), the end of a drain, leaving, or ctx's end. It returns an error
// only when the connection failed.
func (r *ownerRun) wait(ctx context.Context, tick <-chan time.Time) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var drained <-chan time.Time
	if r.drained != nil {
		drained = r.drained.C()
	}
	woke := make(chan struct{})
	go func() {
		defer close(woke)
		select {
		case <-tick:
		case <-drained:
		case <-r.s.Leave:
		case <-wctx.Done():
		}
		cancel()
	}()
	self := r.conn.PgConn().PID()
	var err error
	for {
		var n *pgconn.Notification
		n, err = r.conn.WaitForNotification(wctx)
		if err != nil || n == nil || n.PID != self {
			break
		}
	}
	cancel()
	<-woke
	if err != nil && wctx.Err() == nil {
		return err
	}
	// Notices already received: this round covers them.
	for {
		if n, _ := r.conn.WaitForNotification(wctx); n == nil {
			return nil
		}
	}
}

// member is a live replica as pg_locks shows it.
type member struct {
	id   uint32
	aged bool // its id came from the sequence
}

// liveReplicas lists the live members.
func (r *ownerRun) liveReplicas(ctx context.Context) ([]member, error) {
	ctx, cancel := r.stmtCtx(ctx)
	defer cancel()
	rows, err := r.conn.Query(ctx, sqlLiveNodes, nsMember, nsAge)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (m member, err error) {
		err = row.Scan(&m.id, &m.aged)
		return m, err
	})
}

// rankMembers orders the members' ids by rank: youngest first (the
// sequence's ids grow) when every member has an age; by id ascending, as
// an older faucet ranks, while one of its replicas is live.
func rankMembers(ms []member) []uint32 {
	ids := make([]uint32, len(ms))
	aged := true
	for i, m := range ms {
		ids[i] = m.id
		aged = aged && m.aged
	}
	slices.Sort(ids)
	if aged {
		slices.Reverse(ids)
	}
	return ids
}
