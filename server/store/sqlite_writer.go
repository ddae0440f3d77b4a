package store

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// Group commit. SQLite has one writer, and on it a commit costs several
// times what a small statement does. So every write of an SQLite store goes
// through one goroutine, which runs whatever writes are waiting — in
// arrival order — in one BEGIN IMMEDIATE transaction. An idle store commits
// a lone write at once; under load, the writes that queued during one
// commit share the next.
//
// A batch in which a write fails is rolled back as a whole and its writes
// are run again one transaction each, so one failing write fails alone —
// unless the failure is an outage (a busy lock, an I/O error), which every
// write of the batch reports. Each write's function may therefore run more
// than once and must set all its results on every run.

// maxWriteBatch bounds one group transaction.
const maxWriteBatch = 64

// errClosed fails writes to a closed store.
var errClosed = errors.New("store is closed")

// writeOp is one queued write.
type writeOp struct {
	run   func(tx *sql.Tx) error
	state atomic.Int32 // opQueued, then opTaken by the writer or opCancelled by the caller
	err   error
	done  chan struct{}
}

const (
	opQueued int32 = iota
	opTaken
	opCancelled
)

// write runs fn in a (possibly shared) write transaction and returns its
// error. A caller whose ctx ends before the writer takes the write gets
// ctx's error and the write never runs; once taken, it waits for it (at
// most about the busy timeout), so an error always means nothing was
// written.
func (s *SQLite) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	op := &writeOp{run: fn, done: make(chan struct{})}
	select {
	case s.ops <- op:
	case <-s.closing:
		return unavailable("write", errClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opCancelled) {
			return ctx.Err()
		}
		<-op.done
		return op.err
	}
}

// exec runs st, a statement prepared on the writer, with args as one write.
func (s *SQLite) exec(ctx context.Context, st *sql.Stmt, args ...any) error {
	return s.write(ctx, func(t *sql.Tx) error {
		_, err := t.Stmt(st).Exec(args...)
		return err
	})
}

// writeLoop is the writer goroutine; it ends once closing is closed and
// the queue is drained.
func (s *SQLite) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxWriteBatch)
	for {
		batch = batch[:0]
		select {
		case op := <-s.ops:
			batch = append(batch, op)
		case <-s.closing:
			for {
				select {
				case op := <-s.ops:
					op.err = unavailable("write", errClosed)
					close(op.done)
				default:
					return
				}
			}
		}
	more:
		for len(batch) < maxWriteBatch {
			select {
			case op := <-s.ops:
				batch = append(batch, op)
			default:
				break more
			}
		}
		live := batch[:0]
		for _, op := range batch {
			if op.state.CompareAndSwap(opQueued, opTaken) {
				live = append(live, op)
			} else {
				close(op.done) // cancelled: its caller is gone
			}
		}
		s.runBatch(live)
	}
}

// runBatch commits ops together, or each alone when one of them fails.
func (s *SQLite) runBatch(ops []*writeOp) {
	if len(ops) == 0 {
		return
	}
	err := s.runTx(ops)
	if err != nil && len(ops) > 1 && !errors.Is(sqliteErr("", err), faucet.ErrStoreUnavailable) {
		for _, op := range ops {
			op.err = s.runTx([]*writeOp{op})
			close(op.done)
		}
		return
	}
	for _, op := range ops {
		op.err = err
		close(op.done)
	}
}

// runTx runs ops in one transaction; nothing of it stays if any fails.
func (s *SQLite) runTx(ops []*writeOp) error {
	tx, err := s.writer.BeginTx(context.Background(), nil) // BEGIN IMMEDIATE: _txlock
	if err != nil {
		return err
	}
	for _, op := range ops {
		if err := op.run(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}
