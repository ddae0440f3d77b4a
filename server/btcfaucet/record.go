package btcfaucet

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// PayoutState is where a recorded payout stands: the journal's states.
type PayoutState = journal.State

const (
	// PayoutBroadcasting: recorded, not yet known to be at the node.
	PayoutBroadcasting = journal.Broadcasting
	// PayoutPending: the node took it; waiting for a block.
	PayoutPending = journal.Pending
)

// Output is one drip a payout pays.
type Output struct {
	Address string `json:"address"`
	Amount  int64  `json:"amount"` // sats
}

// PayoutRecord is a signed payout the faucet holds until a block confirms
// it.
type PayoutRecord struct {
	TxID    string
	Raw     []byte
	Coins   []bitcoin.Coin // the coins it spends, in input order
	Outputs []Output
	Fee     int64
	// Change is the payout's change output back to the faucet, when it has
	// one: spendable by later payouts before it confirms.
	Change *bitcoin.Coin
	// Depth is how many unconfirmed payouts it and its in-flight ancestors
	// make, itself included.
	Depth  int
	State  PayoutState
	SentAt time.Time
	// MinedAt is the height of the main-chain block holding it, 0 while
	// unconfirmed. Set by Sync (not stored: a restart reads it from the
	// chain again).
	MinedAt int64
	// OrphanedAt is set while a coin it spends is on no chain the node has
	// (a reorg dropped the block that made it, or the node restarted
	// empty): the highest tip the payer had seen then. Such a payout is
	// not sent again, and is retired once the node's chain has grown
	// orphanRetireDepth past that tip without the coin. Not stored.
	OrphanedAt int64
	// Replaces is the txid of the payout this one replaces (a fee bump,
	// BumpStuck): the same coins, the same outputs, less change. Both stay
	// recorded until a block confirms one of them; the other is then
	// forgotten.
	Replaces string
}

// payoutMeta is a payout's part of its journal entry: what the columns do
// not hold. Its JSON is what the store's btc_payouts.record held, so the
// entries migrated from there read back as they were.
type payoutMeta struct {
	Coins   []metaCoin `json:"coins"`
	Outputs []Output   `json:"outputs"`
	Fee     int64      `json:"fee"`
	Change  *metaCoin  `json:"change,omitempty"`
	Depth   int        `json:"depth"`
}

type metaCoin struct {
	TxID     string `json:"txid"`
	Vout     uint32 `json:"vout"`
	Value    int64  `json:"value"`
	PkScript string `json:"pk_script"` // hex
}

func toMetaCoin(c bitcoin.Coin) metaCoin {
	return metaCoin{TxID: c.OutPoint.Hash.String(), Vout: c.OutPoint.Index, Value: c.Value, PkScript: hex.EncodeToString(c.PkScript)}
}

func (c metaCoin) coin() (bitcoin.Coin, error) {
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

// entry is r as the journal records it under key. Depth is its sequence:
// the journal lists a key's payouts parents first.
func (r *PayoutRecord) entry(key string) journal.Entry {
	m := payoutMeta{Outputs: r.Outputs, Fee: r.Fee, Depth: r.Depth}
	for _, c := range r.Coins {
		m.Coins = append(m.Coins, toMetaCoin(c))
	}
	if r.Change != nil {
		c := toMetaCoin(*r.Change)
		m.Change = &c
	}
	meta, _ := json.Marshal(m)
	return journal.Entry{Key: key, TxID: r.TxID, Seq: uint64(max(r.Depth, 0)), Raw: r.Raw, State: r.State,
		SentAt: r.SentAt, Replaces: r.Replaces, Meta: meta}
}

// recordOf reads a payout back from its journal entry.
func recordOf(e journal.Entry) (PayoutRecord, error) {
	var m payoutMeta
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return PayoutRecord{}, fmt.Errorf("btc payout %s: record: %w", e.TxID, err)
	}
	r := PayoutRecord{TxID: e.TxID, Raw: e.Raw, Outputs: m.Outputs, Fee: m.Fee, Depth: m.Depth,
		State: e.State, SentAt: e.SentAt, Replaces: e.Replaces}
	for _, c := range m.Coins {
		coin, err := c.coin()
		if err != nil {
			return PayoutRecord{}, fmt.Errorf("btc payout %s: %w", e.TxID, err)
		}
		r.Coins = append(r.Coins, coin)
	}
	if m.Change != nil {
		coin, err := m.Change.coin()
		if err != nil {
			return PayoutRecord{}, fmt.Errorf("btc payout %s: change: %w", e.TxID, err)
		}
		r.Change = &coin
	}
	return r, nil
}
