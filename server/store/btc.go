package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// The BTC payout ledger: one row per unconfirmed payout of a key, the raw
// transaction in a column and the rest of the record as JSON, which both
// drivers store as text.

const (
	sqlBTCPut = `INSERT INTO btc_payouts (key_address, txid, raw, record, state, sent_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key_address, txid) DO UPDATE SET raw = excluded.raw, record = excluded.record, state = excluded.state, sent_at = excluded.sent_at`
	sqlBTCDelete = `DELETE FROM btc_payouts WHERE key_address = $1 AND txid = $2`
	sqlBTCList   = `SELECT txid, raw, record, state, sent_at FROM btc_payouts WHERE key_address = $1 ORDER BY sent_at, txid`
)

// btcRecord is a PayoutRecord's JSON column: the parts without a column.
type btcRecord struct {
	Coins   []btcCoin          `json:"coins"`
	Outputs []btcfaucet.Output `json:"outputs"`
	Fee     int64              `json:"fee"`
	Change  *btcCoin           `json:"change,omitempty"`
	Depth   int                `json:"depth"`
	// Replaces links a fee bump to the payout it replaces; absent in rows
	// written before bumps existed, which replace nothing.
	Replaces string `json:"replaces,omitempty"`
}

type btcCoin struct {
	TxID     string `json:"txid"`
	Vout     uint32 `json:"vout"`
	Value    int64  `json:"value"`
	PkScript string `json:"pk_script"` // hex
}

func toBTCCoin(c bitcoin.Coin) btcCoin {
	return btcCoin{TxID: c.OutPoint.Hash.String(), Vout: c.OutPoint.Index, Value: c.Value, PkScript: hex.EncodeToString(c.PkScript)}
}

func (c btcCoin) coin() (bitcoin.Coin, error) {
	h, err := chainhash.NewHashFromStr(c.TxID)
	if err != nil {
		return bitcoin.Coin{}, fmt.Errorf("coin txid: %w", err)
	}
	script, err := hex.DecodeString(c.PkScript)
	if err != nil {
		return bitcoin.Coin{}, fmt.Errorf("coin script: %w", err)
	}
	return bitcoin.Coin{OutPoint: wire.OutPoint{Hash: *h, Index: c.Vout}, Value: c.Value, PkScript: script}, nil
}

func btcPutArgs(key string, p btcfaucet.PayoutRecord) ([]any, error) {
	rec := btcRecord{Outputs: p.Outputs, Fee: p.Fee, Depth: p.Depth, Replaces: p.Replaces}
	for _, c := range p.Coins {
		rec.Coins = append(rec.Coins, toBTCCoin(c))
	}
	if p.Change != nil {
		c := toBTCCoin(*p.Change)
		rec.Change = &c
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("btc payout %s: %w", p.TxID, err)
	}
	return []any{key, p.TxID, p.Raw, string(body), string(p.State), nanos(p.SentAt)}, nil
}

// scanBTC rebuilds a record from its row.
func scanBTC(txid string, raw []byte, body, state string, sentAt int64) (btcfaucet.PayoutRecord, error) {
	var rec btcRecord
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		return btcfaucet.PayoutRecord{}, fmt.Errorf("btc payout %s: record: %w", txid, err)
	}
	p := btcfaucet.PayoutRecord{TxID: txid, Raw: raw, Outputs: rec.Outputs, Fee: rec.Fee, Depth: rec.Depth,
		State: btcfaucet.PayoutState(state), SentAt: fromNanos(sentAt), Replaces: rec.Replaces}
	for _, c := range rec.Coins {
		coin, err := c.coin()
		if err != nil {
			return btcfaucet.PayoutRecord{}, fmt.Errorf("btc payout %s: %w", txid, err)
		}
		p.Coins = append(p.Coins, coin)
	}
	if rec.Change != nil {
		coin, err := rec.Change.coin()
		if err != nil {
			return btcfaucet.PayoutRecord{}, fmt.Errorf("btc payout %s: change: %w", txid, err)
		}
		p.Change = &coin
	}
	return p, nil
}

// BTCLedger is the BTC payout ledger of the key whose address is key.
func (s *SQLite) BTCLedger(key string) btcfaucet.Ledger { return sqliteBTC{s: s, key: key} }

// BTCOwner is this process's hold on the BTC key whose address is key:
// always held, since one process at a time opens an SQLite store (the
// file lock of OpenSQLite), as with the STX keys.
func (s *SQLite) BTCOwner(key string) btcfaucet.Owner { return btcfaucet.SoleOwner(s.BTCLedger(key)) }

type sqliteBTC struct {
	s   *SQLite
	key string
}

func (l sqliteBTC) Put(ctx context.Context, p btcfaucet.PayoutRecord) error {
	args, err := btcPutArgs(l.key, p)
	if err != nil {
		return err
	}
	if err := l.s.write(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, sqlBTCPut, args...)
		return err
	}); err != nil {
		return sqliteErr("btc ledger put "+p.TxID, err)
	}
	return nil
}

func (l sqliteBTC) Delete(ctx context.Context, txid string) error {
	if err := l.s.write(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, sqlBTCDelete, l.key, txid)
		return err
	}); err != nil {
		return sqliteErr("btc ledger delete "+txid, err)
	}
	return nil
}

func (l sqliteBTC) List(ctx context.Context) ([]btcfaucet.PayoutRecord, error) {
	op := "btc ledger list " + l.key
	rows, err := l.s.reader.QueryContext(ctx, sqlBTCList, l.key)
	if err != nil {
		return nil, sqliteErr(op, err)
	}
	defer rows.Close()
	out, err := scanBTCRows(rows)
	if err != nil {
		return nil, sqliteErr(op, err)
	}
	return out, nil
}

// btcRows is the part of a driver's result set scanBTCRows reads.
type btcRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanBTCRows reads every row of sqlBTCList.
func scanBTCRows(rows btcRows) ([]btcfaucet.PayoutRecord, error) {
	var out []btcfaucet.PayoutRecord
	for rows.Next() {
		var txid, body, state string
		var raw []byte
		var sentAt int64
		if err := rows.Scan(&txid, &raw, &body, &state, &sentAt); err != nil {
			return nil, err
		}
		p, err := scanBTC(txid, raw, body, state, sentAt)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// BTCLedger is the BTC payout ledger of the key whose address is key.
// Once BTCOwner(key) has been called on this store its writes are fenced:
// they succeed only while that hold is held, and otherwise fail wrapping
// faucet.ErrNotOwner. Before, they are not (a single replica).
func (p *Postgres) BTCLedger(key string) btcfaucet.Ledger { return pgBTC{p: p, key: key} }

type pgBTC struct {
	p   *Postgres
	key string
	// held, when not 0, is the epoch of the hold this ledger was taken
	// under (pgBTCOwner.Ledger): its writes are refused once any later
	// hold exists, even one this process took again, so a payer built on
	// a lost hold can never write beside its successor.
	held int64
}

// fence is the epoch a write must carry, and whether the key is fenced at
// all; epoch 0 on a fenced key means this ledger may not write.
func (l pgBTC) fence() (epoch int64, fenced bool) {
	epoch, fenced = l.p.btcEpoch(l.key)
	if l.held != 0 && epoch != l.held {
		epoch = 0
	}
	return epoch, fenced
}

func (l pgBTC) Put(ctx context.Context, rec btcfaucet.PayoutRecord) error {
	op := "btc ledger put " + rec.TxID
	args, err := btcPutArgs(l.key, rec)
	if err != nil {
		return err
	}
	epoch, fenced := l.fence()
	switch {
	case !fenced:
		if _, err := l.p.pool.Exec(ctx, sqlBTCPut, args...); err != nil {
			return l.p.err(op, err)
		}
		return nil
	case epoch == 0:
		return fmt.Errorf("%s: key %s: %w", op, l.key, faucet.ErrNotOwner)
	}
	tag, err := l.p.pool.Exec(ctx, sqlBTCPutFenced, append(args, epoch)...)
	if err != nil {
		return l.p.err(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: key %s: %w (epoch %d is stale)", op, l.key, faucet.ErrNotOwner, epoch)
	}
	return nil
}

func (l pgBTC) Delete(ctx context.Context, txid string) error {
	op := "btc ledger delete " + txid
	epoch, fenced := l.fence()
	switch {
	case !fenced:
		if _, err := l.p.pool.Exec(ctx, sqlBTCDelete, l.key, txid); err != nil {
			return l.p.err(op, err)
		}
		return nil
	case epoch == 0:
		return fmt.Errorf("%s: key %s: %w", op, l.key, faucet.ErrNotOwner)
	}
	var ok bool
	if err := l.p.pool.QueryRow(ctx, sqlBTCDeleteFenced, l.key, txid, epoch).Scan(&ok); err != nil {
		return l.p.err(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: key %s: %w (epoch %d is stale)", op, l.key, faucet.ErrNotOwner, epoch)
	}
	return nil
}

func (l pgBTC) List(ctx context.Context) ([]btcfaucet.PayoutRecord, error) {
	op := "btc ledger list " + l.key
	rows, err := l.p.pool.Query(ctx, sqlBTCList, l.key)
	if err != nil {
		return nil, l.p.err(op, err)
	}
	defer rows.Close()
	out, err := scanBTCRows(rows)
	if err != nil {
		return nil, l.p.err(op, err)
	}
	return out, nil
}
