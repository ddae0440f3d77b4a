package btcnode

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Chain is a Bitcoin network, named the same whichever node reports it.
type Chain string

// The chains, by the names Core uses where they differ from btcd's.
const (
	ChainMain     Chain = "main"     // btcd: "mainnet"
	ChainTestnet3 Chain = "testnet3" // Core: "test"
	ChainTestnet4 Chain = "testnet4"
	ChainSignet   Chain = "signet"
	ChainRegtest  Chain = "regtest"
	ChainSimnet   Chain = "simnet" // btcd only
)

// normalizeChain maps Core's and btcd's chain names onto Chain; false for
// a name neither uses.
func normalizeChain(name string) (Chain, bool) {
	switch strings.ToLower(name) {
	case "main", "mainnet":
		return ChainMain, true
	case "test", "testnet", "testnet3":
		return ChainTestnet3, true
	case "testnet4":
		return ChainTestnet4, true
	case "signet":
		return ChainSignet, true
	case "regtest":
		return ChainRegtest, true
	case "simnet":
		return ChainSimnet, true
	}
	return "", false
}

// BlockchainInfo is the part of getblockchaininfo a faucet reads.
type BlockchainInfo struct {
	// Chain is the normalised network; empty when the name is unknown.
	Chain Chain
	// ChainName is the name as the node sent it ("main", "mainnet", ...).
	ChainName     string
	Blocks        int64 // height of the tip
	Headers       int64
	BestBlockHash string
	// InitialBlockDownload is Core's flag; btcd never sets it.
	InitialBlockDownload bool
	Pruned               bool
}

// Block is a block as getblock verbosity 2 describes it.
type Block struct {
	Hash string
	// Height and Confirmations: Core reports Confirmations -1 for a block
	// off its main chain; btcd does not describe such blocks at all.
	Height        int64
	Confirmations int64
	PreviousHash  string // empty for the genesis block
	NextHash      string // empty at the tip
	Time          int64  // header timestamp, Unix seconds
	Txs           []Tx   // in block order; Txs[0] is the coinbase
}

// Tx is a transaction as getrawtransaction verbose and getblock
// verbosity 2 describe it.
type Tx struct {
	TxID  string
	WTxID string // the witness hash ("hash"); equal to TxID without witness
	// Hex is the full serialization (with witness), for the caller's own
	// decoder; Raw decodes it.
	Hex  string
	Vin  []TxIn
	Vout []TxOut
	// BlockHash, Confirmations and BlockTime are zero for a mempool
	// transaction and for transactions inside a getblock answer.
	BlockHash     string
	Confirmations int64
	BlockTime     int64
}

// Raw returns the serialized transaction.
func (t *Tx) Raw() ([]byte, error) {
	b, err := hex.DecodeString(t.Hex)
	if err != nil {
		return nil, fmt.Errorf("btcnode: transaction %s: hex: %w", t.TxID, err)
	}
	return b, nil
}

// TxIn is an input: the outpoint it spends, or the coinbase script.
type TxIn struct {
	Coinbase string // hex of the coinbase script; empty for other inputs
	TxID     string // the spent outpoint; empty for a coinbase
	Vout     uint32
	Sequence uint32
}

// IsCoinbase reports whether this is a coinbase input.
func (in TxIn) IsCoinbase() bool { return in.Coinbase != "" }

// TxOut is an output.
type TxOut struct {
	N            uint32
	Value        int64  // satoshis
	ScriptPubKey string // hex: the one field both nodes describe alike
	// Address is the node's rendering of the script, when it has one
	// (Core's "address", btcd's "address" or single "addresses" entry).
	Address string
	// Type is the script's class, e.g. "witness_v0_keyhash",
	// "witness_v1_taproot", "pubkeyhash", "nulldata".
	Type string
}

// FeeEstimate is a fee rate the node suggests for confirmation within
// Blocks blocks.
type FeeEstimate struct {
	// SatPerKvB is satoshis per 1000 virtual bytes (Core). btcd's rate is
	// per 1000 bytes of full serialization, which for segwit spends is
	// above the virtual size: as a rate per kvB it errs on the high side.
	SatPerKvB int64
	// Blocks is the target the estimate is for: Core may answer for a
	// different target than asked; btcd echoes the one asked.
	Blocks int
	// Method is the RPC that gave it: "estimatesmartfee" or "estimatefee".
	Method string
}

// Wire shapes. Amounts are json.Number: Core prints them with 8 decimals,
// btcd as float64 (so 1e-07 for 10 sat); parseBTC reads either exactly.
type (
	wireBlockchainInfo struct {
		Chain                string `json:"chain"`
		Blocks               int64  `json:"blocks"`
		Headers              int64  `json:"headers"`
		BestBlockHash        string `json:"bestblockhash"`
		InitialBlockDownload bool   `json:"initialblockdownload"`
		Pruned               bool   `json:"pruned"`
	}
	wireBlock struct {
		Hash          string          `json:"hash"`
		Height        int64           `json:"height"`
		Confirmations int64           `json:"confirmations"`
		PreviousHash  string          `json:"previousblockhash"`
		NextHash      string          `json:"nextblockhash"`
		Time          int64           `json:"time"`
		Tx            json.RawMessage `json:"tx"`    // Core: objects at verbosity 2
		RawTx         []wireTx        `json:"rawtx"` // btcd: verbosity 2 puts them here
	}
	wireTx struct {
		TxID          string     `json:"txid"`
		Hash          string     `json:"hash"`
		Hex           string     `json:"hex"`
		Vin           []wireVin  `json:"vin"`
		Vout          []wireVout `json:"vout"`
		BlockHash     string     `json:"blockhash"`
		Confirmations int64      `json:"confirmations"`
		BlockTime     int64      `json:"blocktime"`
	}
	wireVin struct {
		Coinbase string `json:"coinbase"`
		TxID     string `json:"txid"`
		Vout     uint32 `json:"vout"`
		Sequence uint32 `json:"sequence"`
	}
	wireVout struct {
		Value        json.Number `json:"value"`
		N            uint32      `json:"n"`
		ScriptPubKey struct {
			Hex       string   `json:"hex"`
			Type      string   `json:"type"`
			Address   string   `json:"address"`
			Addresses []string `json:"addresses"`
		} `json:"scriptPubKey"`
	}
	wireSmartFee struct {
		FeeRate *json.Number `json:"feerate"`
		Errors  []string     `json:"errors"`
		Blocks  int          `json:"blocks"`
	}
)

func (w *wireTx) convert() (Tx, error) {
	if err := checkHash(w.TxID); err != nil {
		return Tx{}, fmt.Errorf("txid: %w", err)
	}
	t := Tx{
		TxID:          strings.ToLower(w.TxID),
		WTxID:         strings.ToLower(w.Hash),
		Hex:           w.Hex,
		BlockHash:     strings.ToLower(w.BlockHash),
		Confirmations: w.Confirmations,
		BlockTime:     w.BlockTime,
		Vin:           make([]TxIn, len(w.Vin)),
		Vout:          make([]TxOut, len(w.Vout)),
	}
	if t.WTxID == "" {
		t.WTxID = t.TxID
	}
	for i, in := range w.Vin {
		if in.Coinbase == "" {
			if err := checkHash(in.TxID); err != nil {
				return Tx{}, fmt.Errorf("tx %s input %d: txid: %w", t.TxID, i, err)
			}
		}
		t.Vin[i] = TxIn{Coinbase: in.Coinbase, TxID: strings.ToLower(in.TxID), Vout: in.Vout, Sequence: in.Sequence}
	}
	for i, out := range w.Vout {
		sats, err := parseBTC(out.Value)
		if err != nil {
			return Tx{}, fmt.Errorf("tx %s output %d: %w", t.TxID, i, err)
		}
		addr := out.ScriptPubKey.Address
		if addr == "" && len(out.ScriptPubKey.Addresses) == 1 {
			addr = out.ScriptPubKey.Addresses[0]
		}
		t.Vout[i] = TxOut{
			N:            out.N,
			Value:        sats,
			ScriptPubKey: strings.ToLower(out.ScriptPubKey.Hex),
			Address:      addr,
			Type:         out.ScriptPubKey.Type,
		}
	}
	return t, nil
}

func (w *wireBlock) convert() (*Block, error) {
	if err := checkHash(w.Hash); err != nil {
		return nil, fmt.Errorf("block hash: %w", err)
	}
	b := &Block{
		Hash:          strings.ToLower(w.Hash),
		Height:        w.Height,
		Confirmations: w.Confirmations,
		PreviousHash:  strings.ToLower(w.PreviousHash),
		NextHash:      strings.ToLower(w.NextHash),
		Time:          w.Time,
	}
	txs := w.RawTx
	if len(txs) == 0 && !isNull(w.Tx) {
		if err := json.Unmarshal(w.Tx, &txs); err != nil {
			// Verbosity 1 (txids only) lands here: a node that ignored ours.
			return nil, fmt.Errorf("block %s: tx: want transaction objects (verbosity 2): %w", b.Hash, err)
		}
	}
	if len(txs) == 0 {
		return nil, fmt.Errorf("block %s has no transactions (a block always has its coinbase)", b.Hash)
	}
	b.Txs = make([]Tx, len(txs))
	for i := range txs {
		t, err := txs[i].convert()
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", b.Hash, err)
		}
		b.Txs[i] = t
	}
	return b, nil
}

// maxSatoshis is the 21 million BTC cap: no amount can exceed it.
const maxSatoshis = 21_000_000 * 100_000_000

var satsPerBTC = big.NewRat(100_000_000, 1)

// parseBTC converts a JSON amount in BTC to satoshis without going through
// float64. The result is rounded to the nearest satoshi, because btcd
// prints amounts as float64 (sats/1e8), whose shortest decimal can sit a
// hair off the exact value for large amounts.
func parseBTC(n json.Number) (int64, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 0, fmt.Errorf("amount %q is not a number", excerpt([]byte(n), 40))
	}
	r.Mul(r, satsPerBTC)
	if r.Sign() < 0 {
		return 0, fmt.Errorf("amount %s BTC is negative", n)
	}
	// round half up: floor(r + 1/2)
	q := new(big.Int).Quo(new(big.Int).Add(new(big.Int).Mul(r.Num(), big.NewInt(2)), r.Denom()), new(big.Int).Mul(r.Denom(), big.NewInt(2)))
	if !q.IsInt64() || q.Int64() > maxSatoshis {
		return 0, fmt.Errorf("amount %s BTC is above 21 million BTC", n)
	}
	return q.Int64(), nil
}

// checkHash accepts 64 hex characters: block hashes and txids as nodes
// print them (byte-reversed, but that is only a convention for callers).
func checkHash(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("want 64 hex characters, got %d", len(s))
	}
	if _, err := hex.DecodeString(s); err != nil {
		return errors.New("not hex")
	}
	return nil
}
