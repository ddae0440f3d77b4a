package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stxfaucet/faucet-operator/server/journal"
)

// The journal (journal.Store): one row per transaction a key has in
// flight, on every chain. The owner check of a shared store's writes is in
// the statement itself (postgres.go), so a replica that lost a key cannot
// write for it, however late it notices.

const (
	sqlJournalPut = `INSERT INTO journal (key_address, txid, seq, raw, state, sent_at, replaces, meta)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (key_address, txid) DO UPDATE SET seq = excluded.seq, raw = excluded.raw, state = excluded.state,
  sent_at = excluded.sent_at, replaces = excluded.replaces, meta = excluded.meta`
	sqlJournalDelete      = `DELETE FROM journal WHERE key_address = $1 AND txid = $2`
	sqlJournalDeleteBelow = `DELETE FROM journal WHERE key_address = $1 AND ` + seqBelow2
	sqlJournalList        = `SELECT txid, seq, raw, state, sent_at, replaces, meta FROM journal WHERE key_address = $1`
)

// seqBelow2 is "seq < $2" for the uint64 sequences whose bits the signed
// column holds: a plain < would put every Seq from 2^63 on (stored
// negative) below any small one. Where the signs agree the signed order is
// the unsigned one; otherwise the non-negative side is the smaller. The
// casts type the parameter for Postgres (which would infer an int4 from
// the comparisons with 0) and are plain SQL for SQLite.
const seqBelow2 = `((seq >= 0) = (CAST($2 AS BIGINT) >= 0) AND seq < CAST($2 AS BIGINT) OR seq >= 0 AND CAST($2 AS BIGINT) < 0)`

// journalArgs are the column values of e's row.
func journalArgs(e journal.Entry) []any {
	meta := string(e.Meta)
	if meta == "" {
		meta = "{}"
	}
	return []any{e.Key, e.TxID, i64(e.Seq), e.Raw, string(e.State), nanos(e.SentAt), e.Replaces, meta}
}

// journalRows is the part of a driver's result set scanJournal reads.
type journalRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanJournal reads every row of sqlJournalList for key, in Store order
// (SQL would order the uint64 sequence's signed bits).
func scanJournal(key string, rows journalRows) ([]journal.Entry, error) {
	var out []journal.Entry
	for rows.Next() {
		e := journal.Entry{Key: key}
		var seq, sentAt int64
		var state, meta string
		if err := rows.Scan(&e.TxID, &seq, &e.Raw, &state, &sentAt, &e.Replaces, &meta); err != nil {
			return nil, err
		}
		e.Seq, e.State, e.SentAt, e.Meta = u64(seq), journal.State(state), fromNanos(sentAt), []byte(meta)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	journal.SortEntries(out)
	return out, nil
}

// Put adds or replaces the entry (Key, TxID).
func (s *SQLite) Put(ctx context.Context, e journal.Entry) error {
	if err := s.exec(ctx, s.put, journalArgs(e)...); err != nil {
		return sqliteErr(fmt.Sprintf("journal put %s of %s", e.TxID, e.Key), err)
	}
	return nil
}

// Delete removes the entry (key, txid) if present.
func (s *SQLite) Delete(ctx context.Context, key, txid string) error {
	if err := s.exec(ctx, s.del, key, txid); err != nil {
		return sqliteErr(fmt.Sprintf("journal delete %s of %s", txid, key), err)
	}
	return nil
}

// DeleteBelow removes key's entries whose seq is below seq.
func (s *SQLite) DeleteBelow(ctx context.Context, key string, seq uint64) error {
	if err := s.write(ctx, func(t *sql.Tx) error {
		_, err := t.Exec(sqlJournalDeleteBelow, key, i64(seq))
		return err
	}); err != nil {
		return sqliteErr(fmt.Sprintf("journal delete %s below %d", key, seq), err)
	}
	return nil
}

// List returns key's entries in Store order.
func (s *SQLite) List(ctx context.Context, key string) ([]journal.Entry, error) {
	op := "journal list " + key
	rows, err := s.list.QueryContext(ctx, key)
	if err != nil {
		return nil, sqliteErr(op, err)
	}
	defer rows.Close()
	out, err := scanJournal(key, rows)
	if err != nil {
		return nil, sqliteErr(op, err)
	}
	return out, nil
}

// Statements of the fenced journal writes on Postgres: the row of
// key_owners at this replica's epoch is held FOR SHARE, so a takeover
// (which bumps the epoch) waits for a write in flight, or the write sees
// the new epoch and changes nothing. The casts type the parameters, which
// INSERT … SELECT does not infer.
const (
	sqlJournalPutFenced = `WITH owner AS (SELECT 1 FROM key_owners WHERE key = $1 AND epoch = $9 FOR SHARE)
INSERT INTO journal (key_address, txid, seq, raw, state, sent_at, replaces, meta)
SELECT $1::text, $2::text, $3::bigint, $4::bytea, $5::text, $6::bigint, $7::text, $8::text FROM owner
ON CONFLICT (key_address, txid) DO UPDATE SET seq = excluded.seq, raw = excluded.raw, state = excluded.state,
  sent_at = excluded.sent_at, replaces = excluded.replaces, meta = excluded.meta`
	sqlJournalDeleteFenced = `WITH owner AS (SELECT 1 FROM key_owners WHERE key = $1 AND epoch = $3 FOR SHARE),
gone AS (DELETE FROM journal WHERE key_address = $1 AND txid = $2 AND EXISTS (SELECT 1 FROM owner))
SELECT EXISTS (SELECT 1 FROM owner)`
	sqlJournalDeleteBelowFenced = `WITH owner AS (SELECT 1 FROM key_owners WHERE key = $1 AND epoch = $3 FOR SHARE),
gone AS (DELETE FROM journal WHERE key_address = $1 AND ` + seqBelow2 + ` AND EXISTS (SELECT 1 FROM owner))
SELECT EXISTS (SELECT 1 FROM owner)`
)

// fence is the epoch a write for key must carry: ok is false when the
// store is not fenced (no Run has started: a single replica).
func (p *Postgres) fence(op, key string) (epoch int64, fenced bool, err error) {
	epoch, fenced, owned := p.own.epochOf(key)
	if fenced && !owned {
		return 0, true, fmt.Errorf("%s: %w", op, journal.ErrNotOwner)
	}
	return epoch, fenced, nil
}

// Put adds or replaces the entry (Key, TxID). While Run is under way it
// succeeds only if this replica owns the key, and otherwise fails wrapping
// journal.ErrNotOwner.
func (p *Postgres) Put(ctx context.Context, e journal.Entry) error {
	op := fmt.Sprintf("journal put %s of %s", e.TxID, e.Key)
	epoch, fenced, err := p.fence(op, e.Key)
	switch {
	case err != nil:
		return err
	case !fenced:
		if _, err := p.pool.Exec(ctx, sqlJournalPut, journalArgs(e)...); err != nil {
			return p.err(op, err)
		}
		return nil
	}
	tag, err := p.pool.Exec(ctx, sqlJournalPutFenced, append(journalArgs(e), epoch)...)
	if err != nil {
		return p.err(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w (epoch %d is stale)", op, journal.ErrNotOwner, epoch)
	}
	return nil
}

// Delete removes the entry (key, txid) if present, fenced as Put.
func (p *Postgres) Delete(ctx context.Context, key, txid string) error {
	op := fmt.Sprintf("journal delete %s of %s", txid, key)
	return p.fencedDelete(ctx, op, key, sqlJournalDelete, sqlJournalDeleteFenced, txid)
}

// DeleteBelow removes key's entries whose seq is below seq, fenced as Put.
func (p *Postgres) DeleteBelow(ctx context.Context, key string, seq uint64) error {
	op := fmt.Sprintf("journal delete %s below %d", key, seq)
	return p.fencedDelete(ctx, op, key, sqlJournalDeleteBelow, sqlJournalDeleteBelowFenced, i64(seq))
}

// fencedDelete runs plain ($1 key, $2 arg) or, while Run is under way,
// fenced ($3 the epoch, answering whether the owner row was there).
func (p *Postgres) fencedDelete(ctx context.Context, op, key, plain, fenced string, arg any) error {
	epoch, isFenced, err := p.fence(op, key)
	switch {
	case err != nil:
		return err
	case !isFenced:
		if _, err := p.pool.Exec(ctx, plain, key, arg); err != nil {
			return p.err(op, err)
		}
		return nil
	}
	var ok bool
	if err := p.pool.QueryRow(ctx, fenced, key, arg, epoch).Scan(&ok); err != nil {
		return p.err(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w (epoch %d is stale)", op, journal.ErrNotOwner, epoch)
	}
	return nil
}

// List returns key's entries in Store order.
func (p *Postgres) List(ctx context.Context, key string) ([]journal.Entry, error) {
	op := "journal list " + key
	rows, err := p.pool.Query(ctx, sqlJournalList, key)
	if err != nil {
		return nil, p.err(op, err)
	}
	defer rows.Close()
	out, err := scanJournal(key, rows)
	if err != nil {
		return nil, p.err(op, err)
	}
	return out, nil
}
