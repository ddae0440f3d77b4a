package bitcoin

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// Regtest payout addresses of every type (Bitcoin Core key_io vectors).
const (
	regP2PKH  = "n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXQ"
	regP2SH   = "2MxFajLApXpYk4VodBSZSt7rw8y4ryABkfA"
	regP2WPKH = "bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9"
	regP2WSH  = "bcrt1qan8gntac7z7me2ejt4hpru42ad2f759fmy0m3ejvs98656znv7eqga4uhv"
	regP2TR   = "bcrt1pfwxjqvtt4tcxrtdluukfmy2dv7xd2qzdfy6kajv5nwn4yam3wxkq3553uh"
)

func testKey(t testing.TB) *PrivateKey {
	t.Helper()
	k, err := ParsePrivateKey(wifVectors[0].wif, Regtest)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func addr(t testing.TB, s string) Address {
	t.Helper()
	a, err := ParseAddress(s, Regtest)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// coinsFor makes coins of the given values paying key, each with a distinct
// made-up outpoint.
func coinsFor(key *PrivateKey, values ...int64) []Coin {
	coins := make([]Coin, len(values))
	for i, v := range values {
		h := sha256.Sum256(fmt.Appendf(nil, "coin %d %d", i, v))
		coins[i] = Coin{OutPoint: wire.OutPoint{Hash: h, Index: uint32(i % 3)}, Value: v, PkScript: key.Address().PkScript()}
	}
	return coins
}

// engineVerify runs every input of tx through btcd's script engine with the
// standard flags, independently of Tx.Verify: real script execution of the
// witness against the spent output.
func engineVerify(t testing.TB, tx *Tx) {
	t.Helper()
	if err := engineCheck(tx.MsgTx(), tx.Coins()); err != nil {
		t.Fatal(err)
	}
}

func engineCheck(msg *wire.MsgTx, coins []Coin) error {
	prev := map[wire.OutPoint]*wire.TxOut{}
	for _, c := range coins {
		prev[c.OutPoint] = wire.NewTxOut(c.Value, c.PkScript)
	}
	fetcher := txscript.NewMultiPrevOutFetcher(prev)
	hashes := txscript.NewTxSigHashes(msg, fetcher)
	for i, in := range msg.TxIn {
		out := prev[in.PreviousOutPoint]
		if out == nil {
			return fmt.Errorf("input %d: unknown coin", i)
		}
		vm, err := txscript.NewEngine(out.PkScript, msg, i, txscript.StandardVerifyFlags, nil, hashes, out.Value, fetcher)
		if err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
		if err := vm.Execute(); err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
	}
	return nil
}
