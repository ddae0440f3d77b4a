package store

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// Budget pools (guard.Budget) in both drivers: one row per pool and step
// of its sliding window, the amount paid in that step. The statements are
// the same text on both.
const (
	// sqlReadPool reads one pool's steps still in the window ($2: the
	// oldest step that overlaps it).
	sqlReadPool = `SELECT step, amount FROM budget_steps WHERE pool = $1 AND step >= $2 ORDER BY step`
	// sqlDraw adds a drip's amount to a pool's current step.
	sqlDraw = `INSERT INTO budget_steps (pool, step, amount, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (pool, step) DO UPDATE SET amount = budget_steps.amount + excluded.amount`
	// sqlUndraw gives a failed drip's amount back to its step (never
	// below zero: the step may have been pruned and drawn from again).
	sqlUndraw = `UPDATE budget_steps SET amount = CASE WHEN amount > $3 THEN amount - $3 ELSE 0 END WHERE pool = $1 AND step = $2`
	// sqlPruneBudget deletes steps that have left their window, in batches.
	sqlPruneBudget = `DELETE FROM budget_steps WHERE (pool, step) IN (SELECT pool, step FROM budget_steps WHERE expires_at <= $1 LIMIT 5000)`
)

// scanSteps reads (step, amount) rows, oldest first.
func scanSteps(rows *sql.Rows, err error) ([]guard.StepAmount, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []guard.StepAmount
	for rows.Next() {
		var idx, amt int64
		if err := rows.Scan(&idx, &amt); err != nil {
			return nil, err
		}
		out = append(out, guard.StepAmount{Index: idx, Amount: u64(amt)})
	}
	return out, rows.Err()
}

// Postgres statements of the pools: every pool of a draw at once.
const (
	sqlReadPoolsPG = `SELECT pool, step, amount FROM budget_steps WHERE pool = ANY($1) AND step >= $2 ORDER BY pool, step`
	sqlDrawPG      = `INSERT INTO budget_steps (pool, step, amount, expires_at) SELECT k, $2, $3, $4 FROM unnest($1::text[]) AS k
ON CONFLICT (pool, step) DO UPDATE SET amount = budget_steps.amount + excluded.amount`
	sqlUndrawPG = `UPDATE budget_steps SET amount = CASE WHEN amount > $3 THEN amount - $3 ELSE 0 END WHERE pool = ANY($1) AND step = $2`
)

// ReserveDraw is Reserve with a draw. It takes two round trips, the first
// under the buckets' and pools' advisory locks: BEGIN, the locks, the
// slots' statement (which inserts them only if no bucket is full) and the
// pools' read; then, once the verdict is known, the draw and COMMIT, or
// ROLLBACK (which takes the slots back when the budget refuses). Without
// an active draw it is Reserve, one round trip.
func (p *Postgres) ReserveDraw(ctx context.Context, now time.Time, buckets []guard.Bucket, d guard.Draw) (guard.Reservation, time.Duration, guard.Verdict, error) {
	if !d.Active() {
		res, wait, _, err := p.Reserve(ctx, now, buckets)
		return res, wait, guard.Verdict{}, err
	}
	active := activeBuckets(buckets)
	sq := slotQuery(active, now)
	locks := slices.Clone(sq.keys)
	for _, pl := range d.Pools {
		locks = append(locks, pl.Key)
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	poolKeys := make([]string, len(d.Pools))
	for i, pl := range d.Pools {
		poolKeys[i] = pl.Key
	}

	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return guard.Reservation{}, 0, guard.Verdict{}, p.err("limiter reserve", err)
	}
	defer conn.Release()
	fail := func(err error) (guard.Reservation, time.Duration, guard.Verdict, error) {
		rollback(ctx, conn)
		return guard.Reservation{}, 0, guard.Verdict{}, p.err("limiter reserve", err)
	}
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(sqlLockBuckets, locks)
	if len(active) > 0 {
		batch.Queue(sqlReserve, sq.keys, sq.cutoffs, sq.offsets, sq.at, sq.expires)
	}
	batch.Queue(sqlReadPoolsPG, poolKeys, guard.FirstStep(now, d.Window, d.Step))
	br := conn.SendBatch(ctx, batch)
	var out slotResult
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil && len(active) > 0 {
		err = br.QueryRow().Scan(&out.oldest, &out.ids, &out.counts, &out.firsts)
	}
	var use []guard.PoolUse
	if err == nil {
		use, err = scanPoolsPG(br, d)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	var bucketUse []guard.BucketUse
	var wait time.Duration
	if len(active) > 0 {
		if bucketUse, wait, err = out.use(active, now); err != nil {
			return fail(err)
		}
	}
	if wait > 0 {
		rollback(ctx, conn)
		return guard.Reservation{Use: spread(buckets, bucketUse)}, wait, guard.Verdict{}, nil
	}
	v := d.Decide(use, now)
	if v.Amount == 0 {
		rollback(ctx, conn) // the slots go with it
		return guard.Reservation{Use: spread(buckets, bucketUse)}, 0, v, nil
	}
	idx := guard.StepIndex(now, d.Step)
	batch = &pgx.Batch{}
	batch.Queue(sqlDrawPG, poolKeys, idx, i64(v.Amount), guard.StepExpiry(idx, d.Window, d.Step).UnixNano())
	batch.Queue("COMMIT")
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fail(err)
	}
	res := guard.Reservation{IDs: out.ids, Drawn: &guard.Drawn{Pools: poolKeys, Index: idx, Amount: v.Amount}}
	if len(active) > 0 {
		res.Use = spread(buckets, guard.Reserved(active, bucketUse, now))
	}
	return res, 0, v, nil
}

// scanPoolsPG reads sqlReadPoolsPG's rows into d's pools.
func scanPoolsPG(br pgx.BatchResults, d guard.Draw) ([]guard.PoolUse, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	at := make(map[string]int, len(d.Pools))
	for i, pl := range d.Pools {
		at[pl.Key] = i
	}
	out := make([]guard.PoolUse, len(d.Pools))
	for rows.Next() {
		var key string
		var idx, amt int64
		if err := rows.Scan(&key, &idx, &amt); err != nil {
			return nil, err
		}
		if i, ok := at[key]; ok {
			out[i].Steps = append(out[i].Steps, guard.StepAmount{Index: idx, Amount: u64(amt)})
		}
	}
	return out, rows.Err()
}

// ReadPools reads each pool's steps within the window at now, without
// locks: an answer about "now" may miss a draw in flight.
func (p *Postgres) ReadPools(ctx context.Context, now time.Time, d guard.Draw) ([]guard.PoolUse, error) {
	keys := make([]string, len(d.Pools))
	for i, pl := range d.Pools {
		keys[i] = pl.Key
	}
	batch := &pgx.Batch{}
	batch.Queue(sqlReadPoolsPG, keys, guard.FirstStep(now, d.Window, d.Step))
	br := p.pool.SendBatch(ctx, batch)
	use, err := scanPoolsPG(br, d)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, p.err("budget read", err)
	}
	return use, nil
}

// undraw gives a draw back (Postgres).
func (p *Postgres) undraw(ctx context.Context, d *guard.Drawn) error {
	if d == nil {
		return nil
	}
	if _, err := p.pool.Exec(ctx, sqlUndrawPG, d.Pools, d.Index, i64(d.Amount)); err != nil {
		return p.err("budget release", err)
	}
	return nil
}

var (
	_ guard.BudgetLimiter = (*SQLite)(nil)
	_ guard.BudgetLimiter = (*Postgres)(nil)
)
